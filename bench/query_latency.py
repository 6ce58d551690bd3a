"""Query latency p50/p95 per stage (LLM excluded: extractive mode) at corpus scale, from each answer's own
stage usage (the figures the ledger rows are written from), relative to the retrieve stage's p50 in the
same run; the whole query is timed around `ask`.

    .venv/bin/python bench/query_latency.py [--n 200] [--backend edge|local] [--levers auto|none|...]

Two passes over the same questions: the first on a fresh data dir (rescore's embedding cache cold),
the second with every candidate already embedded (what a running service sees for repeat passages).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.config import Settings  # noqa: E402
from tracing.ledger import percentile  # noqa: E402


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
            passes = [[_timed_ask(app, q) for q in questions] for _ in ("cold", "warm")]
            passes = [_latencies(answers) for answers in passes]
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


def _timed_ask(app, question: str):
    t0 = time.perf_counter()
    answer = app.ask(question)
    return answer, (time.perf_counter() - t0) * 1000


def _latencies(answers) -> tuple[dict[str, list[float]], list[float]]:
    """Per-stage latencies (from each answer's usage) and whole-query latencies."""
    by_stage: dict[str, list[float]] = {}
    for answer, _ in answers:
        for usage in answer.usage:
            if usage.latency_ms is not None:
                by_stage.setdefault(usage.stage, []).append(usage.latency_ms)
    return by_stage, [ms for _, ms in answers]


if __name__ == "__main__":
    main()
