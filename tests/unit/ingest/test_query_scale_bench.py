"""bench/query_scale.py's shortcut: every replica chunk finds its original's rescore vector in the
embedding cache under its own indexed text, so the bench's rescore runs in full at every scale."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.query_scale import build_scale, copy_cache, default_settings
from rag_app.text import sparse
from rag_app.chunking.registry import build_chunker
from rag_app.models.embedding_cache import EmbeddingCache
from rag_app.ingest.loaders import load_document
from rag_app.ingest.rescore_pass import chunk_texts
from rag_app.store import CollectionInfo, open_store
from rag_app.core.types import Chunk

LAW = Path(__file__).resolve().parents[2] / "fixtures" / "laws" / "社会法" / "劳动法(2018-12-29).md"


def test_each_replica_is_cached_with_its_originals_vector(tmp_path):
    settings = default_settings(tmp_path / "3x")
    chunker = build_chunker("legal", settings)
    parsed = [(doc, chunker.chunk(doc)) for doc in [load_document(LAW)]]
    originals = [c for _, cs in parsed for c in cs]
    info = CollectionInfo(name=settings.collection, embed_model="m", dimension=384, dense_enabled=False,
                          unk_rate=0.6, avgdl=200.0, chunker=f"{chunker.name}@{chunker.version}",
                          dense_disabled_reason="test", sparse_tokenizer=sparse.TOKENIZER_VERSION)
    vectors = {c.indexed_text(): np.full(4, i, dtype=np.float32) for i, c in enumerate(originals)}

    n = build_scale(settings, info, parsed, 3, vectors, "rescore@1")

    assert n == 3 * len(originals)
    with open_store(settings) as store:
        texts = chunk_texts(store, info.name)
        titles = {p["title"] for p in store.all_payloads(info.name)}
    assert len(texts) == n and len(titles) == 3  # replicas are distinct texts, one title per copy
    cached = EmbeddingCache(settings.cache_path).get_many("rescore@1", texts)
    assert set(cached) == set(texts)
    by_body = {c.text: vectors[c.indexed_text()] for c in originals}
    assert len(by_body) == len(originals)  # bodies tell the originals apart
    with open_store(settings) as store:
        for payload in store.all_payloads(info.name):
            chunk = Chunk.from_payload(payload)
            np.testing.assert_array_equal(cached[chunk.indexed_text()], by_body[chunk.text])


def test_a_cache_copy_keeps_the_writes_still_in_its_wal(tmp_path):
    source = tmp_path / "ingested" / "embed_cache.sqlite"
    held = EmbeddingCache(source)  # its connection stays open: the write stays in the WAL
    held.put_many("m", {"a text": np.ones(3, dtype=np.float32)})

    copy_cache(source, tmp_path / "copy" / "embed_cache.sqlite")

    assert list(EmbeddingCache(tmp_path / "copy" / "embed_cache.sqlite").get_many("m", ["a text"])) == ["a text"]
