"""Query latency p50/p95 per stage (LLM excluded: extractive mode) at corpus scale, read from the
ledger the CostTracer wrote, relative to the retrieve stage's p50 in the same run.

    .venv/bin/python bench/query_latency.py [--n 200] [--backend edge|local]
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
    args = ap.parse_args()
    questions = [json.loads(l)["question"] for l in QA_ZH.read_text(encoding="utf-8").splitlines()][: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(_env_file=None, data_dir=Path(tmp), llm_mode="extractive", store_backend=args.backend)
        with RagApp(settings) as app:
            app.ingest([CORPUS_ZH])
            app.ask(questions[0])  # warm-up: jieba dictionary, model loads
            for q in questions:
                app.ask(q)
            app.writer.flush()
        conn = sqlite3.connect(settings.ledger_path)
        rows = conn.execute("SELECT stage, latency_ms FROM stage_calls WHERE query_id IN "
                            "(SELECT query_id FROM queries WHERE kind = 'query')").fetchall()
        totals = [r[0] for r in conn.execute("SELECT latency_ms FROM queries WHERE kind = 'query'")]
    by_stage: dict[str, list[float]] = {}
    for stage, ms in rows:
        by_stage.setdefault(stage, []).append(ms)
    base = percentile(by_stage["retrieve"], 50)
    print(f"{len(questions)} questions over {CORPUS_ZH} (store: {args.backend}, extractive: no LLM)")
    print(f"{'stage':<14}{'p50 ms':>9}{'p95 ms':>9}{'p50 / retrieve p50':>20}")
    for stage in ("embed_query", "retrieve", "rerank", "generate"):
        xs = by_stage.get(stage, [])
        p50, p95 = percentile(xs, 50), percentile(xs, 95)
        print(f"{stage:<14}{p50:>9.1f}{p95:>9.1f}{p50 / base:>20.2f}")
    print(f"{'whole query':<14}{percentile(totals, 50):>9.1f}{percentile(totals, 95):>9.1f}"
          f"{percentile(totals, 50) / base:>20.2f}")


if __name__ == "__main__":
    main()
