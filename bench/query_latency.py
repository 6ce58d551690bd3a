"""Query latency p50/p95 per stage (LLM excluded: extractive mode) at corpus scale, read from the
ledger the CostTracer wrote, relative to the retrieve stage's p50 in the same run.

    .venv/bin/python bench/query_latency.py [--n 200] [--backend edge|local] [--levers auto|none|...]

Two passes over the same questions: the first on a fresh data dir (rescore's embedding cache cold),
the second with every candidate already embedded (what a running service sees for repeat passages).
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.config import Settings  # noqa: E402
from tracing.reports import percentile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--backend", default="edge", choices=["edge", "local"])
    ap.add_argument("--levers", default="auto", help="RAG_RETRIEVAL_LEVERS: auto (the default: rescore offline) or none")
    args = ap.parse_args()
    questions = [json.loads(l)["question"] for l in QA_ZH.read_text(encoding="utf-8").splitlines()][: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(_env_file=None, data_dir=Path(tmp), llm_mode="extractive", store_backend=args.backend,
                            retrieval_levers=args.levers)
        with RagApp(settings) as app:
            app.ingest([CORPUS_ZH])
            app.ask("公司法第五十七条")  # warm-up: jieba dictionary, model loads (not one of the questions)
            app.writer.flush()
            passes = []
            for _ in ("cold", "warm"):
                mark = _max_rowid(settings.ledger_path)
                for q in questions:
                    app.ask(q)
                app.writer.flush()
                passes.append(_latencies(settings.ledger_path, mark))
    print(f"{len(questions)} questions over {CORPUS_ZH} (store: {args.backend}, levers: {args.levers}, "
          "extractive: no LLM)")
    base = percentile(passes[0][0]["retrieve"], 50)
    print(f"{'pass':<6}{'stage':<14}{'p50 ms':>9}{'p95 ms':>9}{'p50 / cold retrieve p50':>25}")
    for name, (by_stage, totals) in zip(("cold", "warm"), passes):
        for stage in ("embed_query", "retrieve", "rerank", "generate"):
            xs = by_stage.get(stage, [])
            p50, p95 = percentile(xs, 50), percentile(xs, 95)
            print(f"{name:<6}{stage:<14}{p50:>9.1f}{p95:>9.1f}{p50 / base:>25.2f}")
        print(f"{name:<6}{'whole query':<14}{percentile(totals, 50):>9.1f}{percentile(totals, 95):>9.1f}"
              f"{percentile(totals, 50) / base:>25.2f}")


def _max_rowid(ledger: Path) -> int:
    with sqlite3.connect(ledger) as conn:
        return conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM queries").fetchone()[0]


def _latencies(ledger: Path, after_rowid: int) -> tuple[dict[str, list[float]], list[float]]:
    """Per-stage and whole-query latencies of the queries written after `after_rowid`."""
    with sqlite3.connect(ledger) as conn:
        ids = "SELECT query_id FROM queries WHERE kind = 'query' AND rowid > ?"
        rows = conn.execute(f"SELECT stage, latency_ms FROM stage_calls WHERE query_id IN ({ids})",
                            (after_rowid,)).fetchall()
        totals = [r[0] for r in conn.execute("SELECT latency_ms FROM queries WHERE kind = 'query' AND rowid > ?",
                                             (after_rowid,))]
    by_stage: dict[str, list[float]] = {}
    for stage, ms in rows:
        by_stage.setdefault(stage, []).append(ms)
    return by_stage, totals


if __name__ == "__main__":
    main()
