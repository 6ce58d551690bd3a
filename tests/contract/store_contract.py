"""The contract every VectorStore backend keeps (haystack-style: each backend's test class inherits
`StoreContract` and supplies `make_store`). Small synthetic points; no shared data, no models."""
from __future__ import annotations

import threading
import uuid
from dataclasses import replace

import pytest

from rag_app.core.errors import ModelMismatch, StoreError
from rag_app.query.retrieval import rrf_fuse
from rag_app.store import CollectionInfo, Fusion, SparseVector, StoredPoint, VectorStore

DIM = 4


def info_for(name: str, dense: bool = True) -> CollectionInfo:
    return CollectionInfo(name=name, embed_model="model-a", dimension=DIM, dense_enabled=dense, unk_rate=0.01,
                          avgdl=10.0, chunker="legal@1", dense_disabled_reason=None if dense else "unk 62%",
                          sparse_tokenizer="tok/2")


def point(doc: str, version: str, i: int, *, title: str = "公司法", articles=("1",), terms=(1,),
          dense=(1.0, 0.0, 0.0, 0.0), text: str | None = None, doc_type: str = "statute") -> StoredPoint:
    cid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc}|{version}|{i}"))
    payload = {"chunk_id": cid, "doc_id": doc, "source_path": f"/x/{doc}.md", "title": title,
               "text": text or f"{doc} {version} {i}", "char_start": i, "char_end": i + 1, "token_count": 10,
               "chunker": "legal", "chunker_version": "1", "heading_path": [], "articles": [f"第{a}条" for a in articles],
               "article_nums": list(articles), "page": None, "kind": "text", "refs": [], "content_hash": version,
               "doc_type": doc_type}
    return StoredPoint(cid, payload, SparseVector(list(terms), [1.0] * len(terms)), list(dense))


class StoreContract:
    """Subclasses: `make_store(tmp_path) -> VectorStore` and `hnsw_config(store, name) -> (m, ef)`;
    `indexed_fields(store, name) -> set | None` (None: the backend has no payload indexes)."""

    def make_store(self, tmp_path) -> VectorStore:
        raise NotImplementedError

    def hnsw_config(self, store, name) -> tuple[int, int]:
        raise NotImplementedError

    def indexed_fields(self, store, name) -> set[str] | None:
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path):
        s = self.make_store(tmp_path)
        yield s
        s.close()

    @pytest.fixture
    def name(self, store):
        name = f"c-{uuid.uuid4().hex[:8]}"  # unique, so a shared server never sees a stale one
        yield name
        store.drop(name)

    def test_implements_the_protocol(self, store):
        assert isinstance(store, VectorStore)

    def test_collection_metadata_round_trips_and_drop_forgets_it(self, store, name):
        assert store.info(name) is None
        info = info_for(name)
        store.create(info)
        assert store.info(name) == info
        store.drop(name)
        assert store.info(name) is None

    def test_bm25_only_collection_keeps_why_the_dense_leg_was_dropped(self, store, name):
        store.create(info_for(name, dense=False))
        got = store.info(name)
        assert got.dense_enabled is False and got.dense_disabled_reason == "unk 62%"
        p = point("d1", "v1", 0)
        store.replace_document(name, "d1", "v1", [replace(p, dense=None)])
        assert [h.payload["doc_id"] for h in store.search(name, sparse=p.sparse, limit=5)] == ["d1"]

    def test_model_and_tokenizer_mismatch_are_errors_that_say_how_to_fix(self, store, name):
        store.create(info_for(name))
        info = store.info(name)
        store.check_model(info, "model-a", DIM)
        with pytest.raises(ModelMismatch, match="RAG_EMBED_MODEL=model-a"):
            store.check_model(info, "model-b", DIM)
        with pytest.raises(ModelMismatch):
            store.check_model(info, "model-a", DIM + 1)
        with pytest.raises(StoreError, match="--rebuild"):
            store.check_tokenizer(info, "tok/3")
        store.check_model(replace(info, dense_enabled=False), "model-b")  # no dense leg: any model

    def test_reingest_is_idempotent_and_a_changed_document_replaces_its_chunks(self, store, name):
        store.create(info_for(name))
        v1 = [point("d1", "v1", i) for i in range(3)]
        other = [point("d2", "v1", 0, title="劳动法")]
        store.replace_document(name, "d1", "v1", v1)
        store.replace_document(name, "d2", "v1", other)
        assert store.document_hash(name, "d1") == "v1" and store.document_hash(name, "nope") is None
        store.replace_document(name, "d1", "v1", v1)  # same content again
        assert store.count(name) == 4
        v2 = [point("d1", "v2", i) for i in range(2)]
        store.replace_document(name, "d1", "v2", v2)
        store.commit(name)
        by_doc = {}
        for p in store.all_payloads(name):
            by_doc.setdefault(p["doc_id"], set()).add(p["content_hash"])
        assert by_doc == {"d1": {"v2"}, "d2": {"v1"}} and store.count(name) == 3
        assert store.document_hash(name, "d1") == "v2"

    def test_citation_lookup_by_title_and_article_and_by_document(self, store, name):
        store.create(info_for(name))
        store.replace_document(name, "d1", "v1", [point("d1", "v1", 0, articles=("57",)),
                                                  point("d1", "v1", 1, articles=("58", "133-1"))])
        store.replace_document(name, "d2", "v1", [point("d2", "v1", 0, title="劳动法", articles=("57",))])
        hits = store.find_articles(name, ["公司法"], ["57"])
        assert [(h.chunk.title, h.chunk.article_nums) for h in hits] == [("公司法", ("57",))]
        assert {h.chunk.doc_id for h in store.find_articles(name, ["公司法", "劳动法"], ["57"])} == {"d1", "d2"}
        assert [h.chunk.article_nums for h in store.find_articles(name, [], ["133-1"], doc_id="d1")] == [("58", "133-1")]
        assert store.find_articles(name, ["刑法"], ["57"]) == []

    def test_titles_are_distinct_and_follow_writes(self, store, name):
        store.create(info_for(name))
        store.replace_document(name, "d1", "v1", [point("d1", "v1", i) for i in range(3)])
        assert store.titles(name) == ["公司法"]
        store.replace_document(name, "d2", "v1", [point("d2", "v1", 0, title="劳动法")])
        assert sorted(store.titles(name)) == ["公司法", "劳动法"]

    def test_idf_is_applied_by_the_engine(self, store, name):
        store.create(info_for(name, dense=False))
        # term 1 is in every point, term 2 in one: a query for both puts the rare term's point first
        pts = [replace(point("d1", "v1", i, terms=(1,) if i else (1, 2)), dense=None) for i in range(6)]
        pts[1] = replace(pts[1], sparse=SparseVector([1], [3.0]))  # common term, 3x the tf weight
        store.replace_document(name, "d1", "v1", pts)
        hits = store.search_sparse(name, [1, 2], [1.0, 1.0], limit=6)
        assert hits[0].payload["chunk_id"] == pts[0].id
        assert hits[0].score > hits[1].score
        assert store.search_sparse(name, [], [], limit=3) == []

    def test_hybrid_fusion_is_weighted_rrf_in_the_engine(self, store, name):
        store.create(info_for(name))
        pts = [point("d1", "v1", i, terms=tuple(range(i + 1)), dense=(1.0, i * 0.3, 0.0, 0.1)) for i in range(8)]
        store.replace_document(name, "d1", "v1", pts)
        store.commit(name)
        qd, qs = [1.0, 0.0, 0.0, 0.0], SparseVector([5, 6, 7], [1.0, 1.0, 1.0])
        dense_rank = [h.payload["chunk_id"] for h in store.search_dense(name, qd, 8)]
        sparse_rank = [h.payload["chunk_id"] for h in store.search(name, sparse=qs, limit=8)]
        assert dense_rank[0] == pts[0].id and sparse_rank[0] == pts[7].id  # the legs disagree
        fused = store.search(name, dense=qd, sparse=qs, limit=8, fusion=Fusion(k=60))
        expected = rrf_fuse([dense_rank, sparse_rank], [1.0, 1.0], k=60)
        for h in fused:
            assert h.score == pytest.approx(expected[h.payload["chunk_id"]], rel=1e-4)
        weighted = store.search(name, dense=qd, sparse=qs, limit=8, fusion=Fusion(k=60, dense_weight=3.0))
        want = {cid: sum(1 / (r / w + 60) for ranks, w in ((dense_rank, 3.0), (sparse_rank, 1.0))
                         for r, c in enumerate(ranks, 1) if c == cid) for cid in expected}
        for h in weighted:
            assert h.score == pytest.approx(want[h.payload["chunk_id"]], rel=1e-4)
        assert [h.score for h in weighted] == sorted((h.score for h in weighted), reverse=True)
        assert len(fused) == len(expected) == 8
        # `depth` fuses deeper legs than it returns: the top of 8-deep legs, not of 1-deep ones
        assert fused[0].score > 1 / 61 + 1e-4  # it is in both legs
        top = store.search(name, dense=qd, sparse=qs, limit=1, depth=8, fusion=Fusion(k=60))
        assert len(top) == 1 and top[0].score == pytest.approx(fused[0].score, rel=1e-4)
        shallow = store.search(name, dense=qd, sparse=qs, limit=1, fusion=Fusion(k=60))
        assert shallow[0].score == pytest.approx(1 / 61, rel=1e-4)

    def test_search_filters_on_payload_fields(self, store, name):
        store.create(info_for(name))
        store.replace_document(name, "d1", "v1", [point("d1", "v1", 0)])
        store.replace_document(name, "d2", "v1", [point("d2", "v1", 0, title="劳动法")])
        q = SparseVector([1], [1.0])
        assert {h.payload["doc_id"] for h in store.search(name, sparse=q, limit=5)} == {"d1", "d2"}
        assert [h.payload["doc_id"] for h in store.search(name, sparse=q, limit=5, where={"title": "劳动法"})] == ["d2"]
        both = store.search(name, sparse=q, dense=[1.0, 0, 0, 0], limit=5, where={"doc_id": ["d1"]})
        assert [h.payload["doc_id"] for h in both] == ["d1"]

    def test_a_scope_restricts_every_leg_to_its_documents(self, store, name):
        """What `rag ask --doc` and the named lever rely on: a doc_id filter on dense, sparse and fused
        searches, the document catalogue (one entry per document, following writes) and the type filter."""
        store.create(info_for(name))
        for d, kind in (("n1", "contract"), ("n2", "contract"), ("law", "statute")):
            store.replace_document(name, d, "v1", [point(d, "v1", i, title=f"T-{d}", doc_type=kind) for i in range(3)])
        store.commit(name)
        q, qd = SparseVector([1], [1.0]), [1.0, 0.0, 0.0, 0.0]
        for kwargs in (dict(sparse=q), dict(dense=qd), dict(sparse=q, dense=qd)):
            hits = store.search(name, limit=9, where={"doc_id": ["n2", "law"]}, **kwargs)
            assert len(hits) == 6 and {h.payload["doc_id"] for h in hits} == {"n2", "law"}
        assert {h.payload["doc_id"] for h in store.search_sparse(name, [1], [1.0], 9, {"doc_id": ["n1"]})} == {"n1"}
        assert {h.payload["doc_id"] for h in store.search_dense(name, qd, 9, {"doc_type": "statute"})} == {"law"}
        docs = sorted(store.documents(name), key=lambda d: d["doc_id"])
        assert docs == [{"doc_id": d, "title": f"T-{d}", "source_path": f"/x/{d}.md", "doc_type": k}
                        for d, k in (("law", "statute"), ("n1", "contract"), ("n2", "contract"))]
        store.replace_document(name, "n3", "v1", [point("n3", "v1", 0, doc_type="other")])
        assert len(store.documents(name)) == 4

    def test_hnsw_parameters_and_payload_indexes_are_configured(self, store, name):
        store.create(info_for(name))
        assert self.hnsw_config(store, name) == (12, 64)  # make_store passes m=12, ef_construct=64
        fields = self.indexed_fields(store, name)
        if fields is not None:
            assert {"doc_id", "title", "article_nums", "doc_type"} <= fields

    def test_threads_query_while_a_document_is_replaced(self, store, name):
        store.create(info_for(name))
        store.replace_document(name, "d1", "v0", [point("d1", "v0", i) for i in range(20)])
        errors, seen = [], []

        def reader():
            try:
                for _ in range(30):
                    hits = store.search(name, sparse=SparseVector([1], [1.0]), dense=[1.0, 0, 0, 0], limit=50)
                    seen.append({h.payload["content_hash"] for h in hits})
                    store.find_articles(name, ["公司法"], ["1"])
            except Exception as e:  # noqa: BLE001 - the test reports any failure
                errors.append(e)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for v in range(1, 6):
            store.replace_document(name, "d1", f"v{v}", [point("d1", f"v{v}", i) for i in range(20)])
        for t in threads:
            t.join()
        assert errors == []
        assert all(s for s in seen)  # never a moment without the document
        assert store.document_hash(name, "d1") == "v5" and store.count(name) == 20
