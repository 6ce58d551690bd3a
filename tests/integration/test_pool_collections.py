"""Collections in `rag serve`'s memory (rag_app/service/pool.py, #46 N3): each collection a request
touches gets its app (and the embedded store opens its shard); past RAG_MAX_OPEN_COLLECTIONS the least
recently used close, and one idle past RAG_COLLECTION_IDLE_S closes at the next request, so memory
stays bounded however many collections exist. A closed collection answers again when asked."""
from __future__ import annotations

import time

from rag_app.service.pool import VariantPool
from tests.conftest import make_settings

LAW = "第一条 为了规范测试，制定本法。\n\n第二条 本法适用于测试。\n"


def fill(pool: VariantPool, names: list[str], tmp_path) -> None:
    for name in names:
        doc = tmp_path / f"{name}.md"
        doc.write_text(LAW, encoding="utf-8")
        assert not pool.ingester(name).ingest([doc]).errors


def open_shards(pool: VariantPool) -> set[str]:
    return set(pool.base.store._shards)


def test_the_least_recently_used_collections_close_past_the_limit(tmp_path):
    pool = VariantPool(make_settings(tmp_path, retriever="bm25", max_open_collections=2))
    try:
        fill(pool, ["c1", "c2", "c3", "c4"], tmp_path)
        for name in ["c1", "c2", "c3", "c4"]:
            assert pool.app_for("default", name).ask("测试适用于什么？").text
        assert pool.open_collections() == ["c3", "c4"] and open_shards(pool) <= {"c3", "c4", "legal"}
        assert pool.evicted >= 2
        assert pool.app_for("default", "c1").ask("测试适用于什么？").text  # closed, not gone: opened again
        assert pool.open_collections() == ["c1", "c4"]
    finally:
        pool.close()


def test_an_idle_collection_closes_at_the_next_request(tmp_path):
    pool = VariantPool(make_settings(tmp_path, retriever="bm25", collection_idle_s=0.2))
    try:
        fill(pool, ["idle", "busy"], tmp_path)
        pool.app_for("default", "idle").ask("测试适用于什么？")
        time.sleep(0.3)
        pool.app_for("default", "busy").ask("测试适用于什么？")
        assert pool.open_collections() == ["busy"] and "idle" not in open_shards(pool)
    finally:
        pool.close()
