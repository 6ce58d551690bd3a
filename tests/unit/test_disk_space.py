"""What a write needs (rag_app/store/space.py): a WAL segment, 4x the documents, the collection."""
from __future__ import annotations

import pytest

from rag_app.store import space


def test_the_need_counts_a_wal_segment_the_documents_and_the_collection(tmp_path):
    coll = tmp_path / "legal"
    coll.mkdir()
    (coll / "seg.dat").write_bytes(b"x" * 100_000)
    sparse = coll / "page_0.dat"
    with sparse.open("wb") as f:  # 32 MiB apparent, a few KiB of blocks: only the blocks count
        f.truncate(32 * 2**20)
        f.write(b"y" * 4096)
    used = space.used_bytes(coll)
    assert 100_000 <= used < 200_000
    assert space.write_need(1000, coll) == space.WAL_SEGMENT_BYTES + 4000 + used
    assert space.write_need(1000, tmp_path / "absent") == space.WAL_SEGMENT_BYTES + 4000


def test_a_write_that_cannot_fit_names_the_path_and_both_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(space, "free_bytes", lambda path: 300 * 1024)
    with pytest.raises(space.DiskFull) as e:
        space.require_free(tmp_path, 40 * 2**20, "adding 1,234 bytes of documents")
    assert str(e.value).startswith(f"{tmp_path}: adding 1,234 bytes of documents needs 40.0 MiB free")
    assert "has 300 KiB" in str(e.value) and "RAG_DATA_DIR" in str(e.value)
    space.require_free(tmp_path, 200 * 1024, "a small write")  # fits: no error


def test_free_bytes_looks_at_the_nearest_existing_folder(tmp_path):
    assert space.free_bytes(tmp_path / "not" / "yet" / "made") == space.free_bytes(tmp_path) > 0
