"""Where a whole query's time goes (extractive mode, no LLM): cProfile over N questions after a
warm-up, on the corpus ingested into a temp store. Prints per-query ms and the top functions.

    .venv/bin/python bench/profile_query.py [--n 100] [--backend edge|local] [--top 25]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, machine_line  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--backend", default="edge", choices=["edge", "local"])
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    print(machine_line())
    questions = [json.loads(l)["question"] for l in QA_ZH.read_text(encoding="utf-8").splitlines()][: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(_env_file=None, data_dir=Path(tmp), llm_mode="extractive", rerank_model=None,
                            store_backend=args.backend)
        with RagApp(settings) as app:
            app.ingest([CORPUS_ZH])
            app.ask(questions[0])  # warm-up: jieba dictionary, model loads
            prof = cProfile.Profile()
            t = time.perf_counter()
            prof.enable()
            for q in questions:
                app.ask(q)
            prof.disable()
            wall = time.perf_counter() - t
            app.writer.flush()
    print(f"{args.backend}: {len(questions)} questions, {wall / len(questions) * 1000:.2f} ms per query "
          "(under the profiler)")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
