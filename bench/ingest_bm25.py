"""`rag ingest` of the legal_zh corpus, BM25 only (as offline: the fallback embedder's dense leg
is dropped), into Qdrant Edge and into qdrant-client's local mode (the store of earlier versions)
in the same process, each into a fresh data dir after a warm-up, with where the time goes.
Target: Edge <= 60% of local mode.

    .venv/bin/python bench/ingest_bm25.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, machine_line  # noqa: E402
from rag_app import app as app_mod  # noqa: E402
from rag_app.ingest import indexing
from rag_app.text import sparse
from rag_app.app import RagApp  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from rag_app.store.client import ClientStore  # noqa: E402
from rag_app.store.edge import EdgeStore  # noqa: E402

spent: dict[str, float] = defaultdict(float)


def timed(owner, attr: str, bucket: str) -> None:
    fn = getattr(owner, attr)

    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[bucket] += time.perf_counter() - t
    setattr(owner, attr, wrapper)


BUCKETS = [  # (owner, attribute, bucket); buckets nest: chunking = parse_chunk - load
    (indexing, "load_document", "load files"),
    (indexing, "parse_and_chunk", "parse + chunk"),
    (app_mod, "load_embeddings", "load embedder"),
    (indexing, "decide_collection", "dense-leg decision (unk rate, avgdl)"),
    (sparse, "document_vector", "BM25 vectors (jieba + bigrams)"),
    (EdgeStore, "replace_document", "store writes"),
    (ClientStore, "replace_document", "store writes"),
    (EdgeStore, "commit", "flush + optimize"),
]


def main() -> None:
    print(machine_line())
    for owner, attr, bucket in BUCKETS:
        timed(owner, attr, bucket)
    results = {}
    # warm-up on three files: imports, jieba's dictionary, the embedder from disk; neither store pays them
    with tempfile.TemporaryDirectory() as tmp:
        with RagApp(Settings(_env_file=None, data_dir=Path(tmp), rerank_model=None)) as app:
            app.ingest(sorted(CORPUS_ZH.rglob("*.md"))[:3])
    for backend in ("local", "edge"):
        spent.clear()
        with tempfile.TemporaryDirectory() as tmp:
            s = Settings(_env_file=None, data_dir=Path(tmp), llm_mode="extractive", rerank_model=None,
                         store_backend=backend)
            t = time.perf_counter()
            with RagApp(s) as app:
                report = app.ingest([CORPUS_ZH])
            total = time.perf_counter() - t
        chunks = sum(o.chunks for o in report.outcomes)
        results[backend] = (total, dict(spent), chunks, report.collection.dense_enabled)
    print(f"corpus {CORPUS_ZH}: {results['edge'][2]} chunks, dense leg kept: {results['edge'][3]}")
    print(f"{'where the time goes (s)':<40}{'local mode':>11}{'Edge':>8}")
    keys = list(dict.fromkeys(b for _, _, b in BUCKETS))
    for k in keys:
        print(f"{k:<40}{results['local'][1].get(k, 0.0):>11.2f}{results['edge'][1].get(k, 0.0):>8.2f}")
    print(f"{'total (open store .. close)':<40}{results['local'][0]:>11.2f}{results['edge'][0]:>8.2f}")
    print(f"Edge / local mode ingest time: {results['edge'][0] / results['local'][0]:.0%} (target <= 60%)")
    print("(parse + chunk includes load files; BM25 vectors are computed inside the index step)")


if __name__ == "__main__":
    main()
