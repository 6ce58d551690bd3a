"""The store-owned cache of indexes derived from a collection (rag_app.store.base.DerivedIndexes)."""
from __future__ import annotations

import threading

from rag_app.store.base import DerivedIndexes


def test_built_once_until_the_collection_is_written():
    idx, calls = DerivedIndexes(), []
    build = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert idx.get("legal", "charges", build) == 1
    assert idx.get("legal", "charges", build) == 1 and len(calls) == 1
    assert idx.get("other", "charges", build) == 2  # another collection has its own
    idx.drop("legal")
    assert idx.get("legal", "charges", build) == 3
    assert idx.get("other", "charges", build) == 2  # untouched by legal's write


def test_a_build_that_a_write_overtook_is_returned_once_and_not_kept():
    idx = DerivedIndexes()
    started, release = threading.Event(), threading.Event()
    out = []

    def slow_build():
        started.set()
        release.wait(5)
        return "old text"

    t = threading.Thread(target=lambda: out.append(idx.get("legal", "charges", slow_build)))
    t.start()
    started.wait(5)
    idx.drop("legal")  # the document was replaced while the old text was being read
    release.set()
    t.join(5)
    assert out == ["old text"]
    assert idx.get("legal", "charges", lambda: "new text") == "new text"


def test_a_server_store_rereads_after_its_ttl(monkeypatch):
    import rag_app.store.base as base

    now = [100.0]
    monkeypatch.setattr(base.time, "monotonic", lambda: now[0])
    idx, n = DerivedIndexes(ttl_s=30), iter(range(10))
    assert idx.get("legal", "titles", lambda: next(n)) == 0
    now[0] += 29
    assert idx.get("legal", "titles", lambda: next(n)) == 0
    now[0] += 2  # another process may have written the server's collection meanwhile
    assert idx.get("legal", "titles", lambda: next(n)) == 1
