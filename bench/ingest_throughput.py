"""Ingest throughput as a fraction of the raw `encode` throughput of the same model on the same
chunks, both measured here. Target >= 80%. The dense leg is forced on (ingest pays for embedding,
sparse vectors, payloads and the Qdrant upsert; raw encode pays for embedding alone).

    .venv/bin/python bench/ingest_throughput.py [--files N] [--model PATH_OR_ID]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, machine_line  # noqa: E402
from rag_app.chunking.registry import build_chunker  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from rag_app.models.embedding import load_embeddings  # noqa: E402
from rag_app.ingest.indexing import decide_collection, index_documents  # noqa: E402
from rag_app.ingest.loaders import load_document  # noqa: E402
from rag_app.store.edge import EdgeStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    print(machine_line())
    settings = Settings(_env_file=None)
    emb = load_embeddings(args.model or settings.embed_model, cache=None)
    files = sorted(CORPUS_ZH.rglob("*.md"))[: args.files]
    chunker = build_chunker("legal", settings)
    parsed = [(d, chunker.chunk(d)) for d in (load_document(f) for f in files)]
    texts = [c.indexed_text() for _, cs in parsed for c in cs]
    emb.encoder.encode_passages(texts[:8])  # warm up
    t = time.perf_counter()
    emb.encoder.encode_passages(texts)
    raw = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp, EdgeStore(Path(tmp)) as store:
        info = decide_collection("bench", chunker, emb, [c for _, cs in parsed for c in cs], max_unk_rate=1.0)
        store.create(info)
        t = time.perf_counter()
        index_documents(store, info, parsed, emb)
        ingest = time.perf_counter() - t
    print(f"model {emb.model_name}; {len(files)} files, {len(texts)} chunks")
    print(f"raw encode : {raw:7.2f} s  {len(texts) / raw:7.1f} chunks/s  (baseline)")
    print(f"ingest     : {ingest:7.2f} s  {len(texts) / ingest:7.1f} chunks/s")
    print(f"ingest / raw encode throughput: {raw / ingest:.1%} (target >= 80%)")


if __name__ == "__main__":
    main()
