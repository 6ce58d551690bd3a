"""Tables for `rag eval` and `rag eval-compare` (rich), kept out of the CLI: 80 columns each."""
from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table

from rag_app.present import keyed_labels, usd


def ci(m: dict | None) -> str:
    if not m or m.get("mean") is None:
        return "-"
    return f"{m['mean']:.3f} [{m['ci95_low']:.3f},{m['ci95_high']:.3f}]"


def diff(d: dict | None) -> str:
    if not d or d.get("diff") is None:
        return "-"
    mark = {"better": " +", "worse": " -"}.get(d["verdict"], "")
    return f"{d['diff']:+.3f} [{d['ci95_low']:+.3f},{d['ci95_high']:+.3f}]{mark}"


def budget_table(result: dict) -> Group:
    """Recall within each context-token budget, one row per (config, task, budget): 80 columns whatever
    the number of budgets (a configuration too long for it keyed C1, spelled out below)."""
    budgets = result["budgets"]
    groups = [(r, "all") for r in result["results"] if r.get("budgets")]
    groups += [(r, r["task"]) for r in result["by_task"] if r.get("budgets")]

    def build(labels: dict) -> Table:
        t = Table(title=f"recall within context-token budgets, 95% bootstrap CI ({result['split']}, "
                        f"{result['questions']} questions; crossing chunk cut to the tokens left)",
                  pad_edge=False, collapse_padding=True)
        t.add_column("config", no_wrap=True)
        t.add_column("task", overflow="fold", max_width=14)
        for c in ("n", "budget", "recall [95% CI]", "tokens"):
            t.add_column(c, justify="right", no_wrap=True)
        for r, task in groups:
            m = r["budgets"]
            n = str(m["recall@5"]["n"]) if "recall@5" in m else "-"
            t.add_row(labels[_config(r)], task, n, "top 5", ci(m.get("recall@5")), "")
            for b in budgets:
                t.add_row("", "", "", f"{b:,}", ci(m.get(f"recall_within_{b}")),
                          f"{m.get(f'context_tokens_within_{b}') or 0:,.0f}")
        return t
    table, legend = keyed_labels((_config(r) for r, _ in groups), build, "C")
    return Group(table, *legend)


def _config(r: dict) -> str:
    return f"{r['chunker']}/{r['retriever']}"


def diff_table(title: str, diffs: dict[str, dict], by_task: dict[str, dict[str, dict]]) -> Table:
    """new - base per metric and task, one row each (80 columns whatever the number of metrics)."""
    t = Table(title=title + " (new - base, paired bootstrap 95% CI; + / - when the CI excludes 0)",
              pad_edge=False, collapse_padding=True)
    t.add_column("task", overflow="fold", max_width=16)
    t.add_column("metric", overflow="fold", max_width=24)
    t.add_column("difference [95% CI]", justify="right", no_wrap=True)
    for task, d in (("all", diffs), *by_task.items()):
        for i, m in enumerate(diffs):
            t.add_row(task if i == 0 else "", m, diff(d.get(m)))
    return t


def print_budgets(result: dict, console: Console) -> None:
    console.print(budget_table(result))
    for c in result.get("paired_vs_first", []):
        console.print(diff_table(f"{c['new']} vs {c['base']}", c["diff"], c["diff_by_task"]))


def eval_tables(result: dict, ks: list[int]) -> list:
    """`rag eval`'s tables: retrieval quality and cost, answers and what a right one costs, chunks, and
    recall by task; configurations numbered in the order of `result["results"]`."""
    number = {id(r): str(i) for i, r in enumerate(result["results"], 1)}
    done = [(number[id(r)], r) for r in result["results"] if not r.get("skipped")]
    return [_quality_table(done, ks), _answers_table(done), _chunks_table(done), _task_table(result["by_task"])]


def _numbered(title: str, columns: tuple[str, ...]) -> Table:
    t = Table(title=title, pad_edge=False, collapse_padding=True)
    for c in columns:
        t.add_column(c, justify="right", no_wrap=True)
    return t


def _quality_table(done: list[tuple[str, dict]], ks: list[int]) -> Table:
    t = _numbered("quality and cost", ("#", *[f"r@{k}" for k in ks], "mrr@10", "ndcg@10", "ctx tok", "$/1k q"))
    for n, r in done:
        t.add_row(n, *[f"{r[f'recall@{k}']:.3f}" for k in ks], f"{r['mrr@10']:.3f}", f"{r['ndcg@10']:.3f}",
                  f"{r['mean_context_tokens']:,.0f}",
                  "unpriced" if r["usd_per_query"] is None else usd(1000 * r["usd_per_query"]))
    return t


def _answers_table(done: list[tuple[str, dict]]) -> Table:
    t = _numbered("answers: cite their gold, and what a right one costs",
                  ("#", "answers", "cite gold", "right", "$ per right answer"))
    for n, r in done:
        share, per_right = r.get("answers_citing_gold"), r.get("usd_per_correct_answer")
        shown = "unpriced" if r["usd_per_query"] is None else "-" if per_right is None else usd(per_right)
        t.add_row(n, r.get("answers", "extractive"), "-" if share is None else f"{share:.1%}",
                  f"{r.get('correct_answers', 0):,}", shown)
    return t


def _chunks_table(done: list[tuple[str, dict]]) -> Table:
    t = _numbered("chunks", ("#", "chunks", "mean tok", "in target %", "sent. int. %", "art. int. %", "ingest s"))
    for n, r in done:
        t.add_row(n, f"{r['chunks']:,}", f"{r['mean_tokens']:.0f}", f"{r['pct_in_target']:.1f}",
                  f"{r['sentence_integrity_pct']:.1f}",
                  "-" if r["article_integrity_pct"] is None else f"{r['article_integrity_pct']:.1f}",
                  "-" if r["ingest_s"] is None else f"{r['ingest_s']:.1f}")
    return t


def _task_table(by_task: list[dict]) -> Group:
    def build(labels: dict) -> Table:
        t = Table(title="by task", pad_edge=False, collapse_padding=True)
        for c in ("chunker", "retriever", "task", "n", "recall@5", "mrr@10", "cite gold"):
            t.add_column(c, no_wrap=c in ("chunker", "retriever"),
                         justify="right" if c in ("n", "recall@5", "mrr@10", "cite gold") else "left")
        for r in by_task:
            cited = r.get("answers_citing_gold")
            t.add_row(labels[r["chunker"]], labels[r["retriever"]], r["task"], str(r["n"]), f"{r.get('recall@5', 0):.3f}",
                      f"{r['mrr@10']:.3f}", "-" if cited is None else f"{cited:.0%}")
        return t
    table, legend = keyed_labels((n for r in by_task for n in (r["chunker"], r["retriever"])), build, "C")
    return Group(table, *legend)
