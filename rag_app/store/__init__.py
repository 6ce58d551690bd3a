"""The vector store: one small interface (`VectorStore`), two backends.

    open_store(settings) -> VectorStore
      QDRANT_URL set            ClientStore: a Qdrant server through qdrant-client
      default                   EdgeStore: Qdrant Edge in-process, one shard per collection under
                                RAG_DATA_DIR/edge (HNSW, sparse IDF, payload indexes, RRF fusion)
      RAG_STORE_BACKEND=local   ClientStore on RAG_DATA_DIR/qdrant: qdrant-client's pure-Python local
                                mode, the store of earlier versions (slow; for comparison only)

Public API (what retrieval, ingest, `rag chunks stats` and retrieval levers call; names are plain
collection names, points are `StoredPoint`s, results are `Hit(payload, score)`):

    info(name) -> CollectionInfo | None     what the collection was built with (model, dim, BM25
                                            tokenizer, dense-leg decision); None if absent
    create(info) / drop(name) / count(name) / commit(name)   commit = durable + indexed (after ingest)
    check_model(info, model, dim) / check_tokenizer(info, version)   raise ModelMismatch / StoreError
    document_hash(name, doc_id) -> str | None
    replace_document(name, doc_id, content_hash, points)   new version in, other versions out
    all_payloads(name) -> list[dict]         every chunk's payload (chunk stats, tests)
    titles(name) -> list[str]                distinct law titles (cached; refreshed on our writes)
    documents(name) -> list[dict]            one {doc_id, title, source_path, doc_type} per document
                                            (what a scope names; rag_app/query/scope.py keeps it per collection)
    find_articles(name, titles, keys, limit, doc_id=None) -> list[Hit]   citation lookup
    search(name, dense=vec?, sparse=SparseVector?, limit, depth=None, fusion=Fusion(k, weights),
           where={field: v})
        one leg -> its top `limit`; both -> each leg `depth` deep, weighted RRF done by the engine.
        `where` filters on payload fields (value or list of values); doc_id, title, article_nums,
        doc_type are indexed (INDEXED_FIELDS). `matches(payload, where)` is the same rule as a function.
    search_dense(name, vector, limit) / search_sparse(name, indices, values, limit)   one leg

Errors: StoreError (and its ModelMismatch, StoreInUse — another process holds the embedded store,
OutdatedStore — a store an earlier version built, with the command that rebuilds it).
The contract every backend keeps is tests/contract/store_contract.py.

Modules: `base` (the interface and the values that cross it), `edge` and `client` (the two backends),
`_shapes` (the filter and point shapes both Qdrant APIs share), `lock` (one process owns an embedded
store) and `space` (free space checked before a write).
"""
from __future__ import annotations

from rag_app.store.base import (DENSE, INDEXED_FIELDS, SPARSE, CollectionInfo, Fusion, Hit, SparseVector,
                                StoredPoint, VectorStore, Where, check_model, check_name, check_tokenizer, matches)

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.store.space import DiskFull, MIN_START_BYTES, free_bytes, require_free, write_need


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["DENSE", "INDEXED_FIELDS", "MIN_START_BYTES", "SPARSE", "CollectionInfo", "DiskFull", "Fusion",
           "Hit", "SparseVector", "StoredPoint", "VectorStore", "Where", "check_model", "check_name",
           "check_tokenizer", "free_bytes", "matches", "open_store", "require_free", "write_need"]


def open_store(settings) -> VectorStore:
    """The store the settings name (see the module docstring)."""
    if settings.qdrant_url or settings.store_backend == "local":
        from rag_app.store.client import ClientStore

        return ClientStore.from_settings(settings)
    from rag_app.store.edge import EdgeStore

    return EdgeStore.from_settings(settings)
