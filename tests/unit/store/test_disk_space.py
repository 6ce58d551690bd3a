"""What a write needs (rag_app/store/space.py): a WAL segment, 4x the documents, the collection."""
from __future__ import annotations

import pytest

from rag_app.store import space


def test_the_need_is_the_stores_reserve_and_24_bytes_per_document_byte():
    assert space.STORE_RESERVE_BYTES == 56 * 2**20 == space.MIN_START_BYTES
    assert space.write_need(1000) == 56 * 2**20 + 24_000 and space.write_need(-5) == 56 * 2**20


def test_a_write_that_cannot_fit_names_the_path_and_both_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(space, "free_bytes", lambda path: 300 * 1024)
    with pytest.raises(space.DiskFull) as e:
        space.require_free(tmp_path, 40 * 2**20, "adding 1,234 bytes of documents")
    assert str(e.value).startswith(f"{tmp_path}: adding 1,234 bytes of documents needs 40.0 MiB free")
    assert "has 300 KiB" in str(e.value) and "RAG_DATA_DIR" in str(e.value)
    space.require_free(tmp_path, 200 * 1024, "a small write")  # fits: no error


def test_free_bytes_looks_at_the_nearest_existing_folder(tmp_path, monkeypatch):
    # which folder it asks about, not two readings of a shared disk's free space (other writers move it
    # between the two calls: 38,466,363,392 against 38,466,764,800 under CI)
    asked, statvfs = [], space.os.statvfs
    monkeypatch.setattr(space.os, "statvfs", lambda p: asked.append(p) or statvfs(p))
    assert space.free_bytes(tmp_path / "not" / "yet" / "made") > 0
    assert asked == [tmp_path]
