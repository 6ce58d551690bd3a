"""Query latency of the default path (extractive: no LLM) on the whole corpus, cold and warm, beside two
anchors timed in the same process: the raw Edge engine call (BM25 top-20, query vector prepared) and
bm25s over the same chunks and tokens. Ratios to the anchors are what to compare across runs; the
machine is shared, so CPU time per pass is printed too.

    .venv/bin/python bench/query_latency.py [--n 100] [--seed 0] [--data-dir DIR] [--levers auto]
    .venv/bin/python bench/query_latency.py --levers none                      # the anchor a default is held to
    .venv/bin/python bench/query_latency.py --levers rescore+charge+colloquial+named --rescore-unit chunk \
        --query-adapter none                                                    # 0.7.0's default

- cold: questions drawn at random from qa_dev (seeded, not in file order: questions next to each other
  in the file share candidates and hid the cold cost), each asked for the first time in this data dir.
  Ingest has made every chunk's rescore vector (rag_app/ingest/rescore_pass.py), so a new question embeds only
  itself. A question asked before in the same data dir is not cold: `--data-dir` reuses an ingest (and
  its embedding pass) across runs, so pick another `--seed` there.
- warm: the same questions again (the query vector cached too).
Each question's three timings (anchors, then the whole query) are taken back to back, so load changes
hit them alike.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, machine_line  # noqa: E402
from rag_app.text import sparse  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from rag_app.query.levers import query_terms, to_vector  # noqa: E402
from rag_app.core.types import Chunk  # noqa: E402
from tracing.ledger import percentile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="edge", choices=["edge", "local"])
    ap.add_argument("--levers", default="auto", help="RAG_RETRIEVAL_LEVERS: auto (the default: rescore, wide and the "
                    "question levers offline), none, or a list (0.7.0's default: rescore+charge+colloquial+named)")
    ap.add_argument("--data-dir", type=Path, help="reuse this data dir's ingest and embedding pass (default: a fresh one)")
    ap.add_argument("--rescore-unit", default="article", choices=["chunk", "article"], help="RAG_RESCORE_UNIT")
    ap.add_argument("--query-adapter", default="auto", help="RAG_QUERY_ADAPTER: auto (the bundled one), none, or an "
                    "adapter's .npz path")
    ap.add_argument("--versus", default="none", help="RAG_RETRIEVAL_LEVERS of a second pipeline over the same "
                    "collection, each question timed through it right before the first (levers-off: the anchor a "
                    "default's cost is held to); '' for none")
    args = ap.parse_args()
    print(machine_line())
    rows = [json.loads(line) for line in QA_ZH.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = [r["question"] for r in random.Random(args.seed).sample(rows, args.n)]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(_env_file=None, data_dir=args.data_dir or Path(tmp), llm_mode="extractive",
                            store_backend=args.backend, retrieval_levers=args.levers, rerank_model=None,
                            rescore_unit=args.rescore_unit, query_adapter=args.query_adapter)
        with RagApp(settings) as app:
            t0, c0 = time.perf_counter(), time.process_time()
            report = app.ingest([CORPUS_ZH])
            ingest = (time.perf_counter() - t0, time.process_time() - c0)
            adapter = Path(app.query_config().query_adapter or "none").name  # what `auto` resolved to
            app.warm_up()  # what `rag serve` loads before its first question (models, the charge index)
            app.ask("公司法第五十七条")  # warm-up: jieba dictionary (not one of the questions)
            versus = None
            if args.versus:  # the same store, its own levers: timed beside each question, so load hits both alike
                versus = RagApp(settings.model_copy(update={"retrieval_levers": args.versus}), shared=app)
                versus.warm_up()
                versus.ask("公司法第五十七条")
            app.writer.flush()
            anchors = Anchors(app)
            passes = {name: run_pass(app, anchors, questions, versus) for name in ("cold", "warm")}
    r = report.rescore
    print(f"{len(questions)} questions drawn at random (seed {args.seed}) from {QA_ZH.name} over {CORPUS_ZH.name} "
          f"(store: {args.backend}, levers: {args.levers}, rescore unit: {args.rescore_unit}, adapter: "
          f"{adapter}, extractive: no LLM)")
    print(f"ingest {ingest[0]:.1f} s wall, {ingest[1]:.1f} s CPU; rescore vectors: "
          + (f"{r.texts} texts, {r.cache_misses} embedded now" if r else "no pass (rescore not in use)"))
    print(f"{'pass':<6}{'what':<18}{'p50 ms':>9}{'p95 ms':>9}{'x bm25s':>9}{'x Edge':>9}{'CPU s':>8}")
    for name, p in passes.items():
        b50, e50 = percentile(p["bm25s"], 50), percentile(p["edge"], 50)
        for what, xs in (("whole query", p["total"]), *sorted(p["stages"].items()), ("bm25s", p["bm25s"]),
                         ("raw Edge", p["edge"])):
            p50, p95 = percentile(xs, 50), percentile(xs, 95)
            cpu = f"{p['cpu']:>8.1f}" if what == "whole query" else ""
            x_bm25s = f"{p50 / b50:>9.1f}" if b50 == b50 else f"{'-':>9}"  # NaN: bm25s not installed
            print(f"{name:<6}{what:<18}{p50:>9.2f}{p95:>9.2f}{x_bm25s}{p50 / e50:>9.1f}{cpu}")
        print(f"{name:<6}{'rescore partial':<18}{p['partial']:>9} of {len(questions)} questions (note on the retrieve row)")
        if p["versus"]:
            v50, w50 = percentile(p["versus"], 50), percentile(p["total"], 50)
            ratios = sorted(t / v for t, v in zip(p["total"], p["versus"]) if v > 0)
            print(f"{name:<6}{'levers ' + args.versus:<18}{v50:>9.2f}{percentile(p['versus'], 95):>9.2f}"
                  f"   whole / it: p50 {w50 / v50:.2f}x (median per question {ratios[len(ratios) // 2]:.2f}x); "
                  f"CPU {p['versus_cpu']:.1f} s")


class Anchors:
    """The two engine-only anchors over the collection's chunks, with the questions' tokens prepared
    outside the timing (the whole query includes its own tokenizing; the anchors show the engine floor)."""

    def __init__(self, app: RagApp):
        self.store, self.name = app.store, app.collection.name
        try:
            import bm25s
        except ImportError:  # an optional anchor: without it the Edge engine anchor still gives the ratio
            self.bm25 = None
            return
        texts = [Chunk.from_payload(p).indexed_text() for p in app.store.all_payloads(self.name)]
        self.bm25 = bm25s.BM25()
        self.bm25.index([sparse.tokenize(t) for t in texts], show_progress=False)

    def edge_ms(self, question: str) -> float:
        vector = to_vector(query_terms(question))
        t = time.perf_counter()
        self.store.search_sparse(self.name, *vector, 20)
        return (time.perf_counter() - t) * 1000

    def bm25s_ms(self, question: str) -> float:
        if self.bm25 is None:
            return float("nan")
        tokens = [[t for t in sparse.tokenize(sparse.normalize_query(question)) if t in self.bm25.vocab_dict]]
        if not tokens[0]:
            return 0.0
        t = time.perf_counter()
        self.bm25.retrieve(tokens, k=20, show_progress=False, n_threads=0)
        return (time.perf_counter() - t) * 1000


def run_pass(app: RagApp, anchors: Anchors, questions: list[str], versus: RagApp | None = None) -> dict:
    out: dict = {"total": [], "bm25s": [], "edge": [], "stages": {}, "partial": 0, "versus": [], "versus_cpu": 0.0,
                 "cpu": 0.0}
    for q in questions:
        out["bm25s"].append(anchors.bm25s_ms(q))
        out["edge"].append(anchors.edge_ms(q))
        if versus is not None:  # it embeds nothing of the question (levers off), so it leaves the question cold
            c, t = time.process_time(), time.perf_counter()
            versus.ask(q)
            out["versus"].append((time.perf_counter() - t) * 1000)
            out["versus_cpu"] += time.process_time() - c
        cpu, t = time.process_time(), time.perf_counter()
        answer = app.ask(q)
        out["total"].append((time.perf_counter() - t) * 1000)
        out["cpu"] += time.process_time() - cpu
        for usage in answer.usage:
            if usage.latency_ms is not None and usage.stage in ("embed_query", "retrieve", "rerank", "generate"):
                out["stages"].setdefault(usage.stage, []).append(usage.latency_ms)
            if usage.stage == "retrieve" and usage.note and "no vector yet" in usage.note:
                out["partial"] += 1
    return out


if __name__ == "__main__":
    main()
