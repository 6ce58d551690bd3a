"""Qdrant: local on-disk mode under the data dir by default, a server when QDRANT_URL is set.

One collection per (chunker, model) choice. Each collection records, in Qdrant's collection
metadata, the embedding model and dimension it was built with, whether its dense leg is enabled
(and why not), and the BM25 average document length; querying with another model is an error.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from qdrant_client import QdrantClient, models

from rag_app.errors import ModelMismatch, StoreError
from rag_app.types import Chunk

log = logging.getLogger(__name__)
DENSE, SPARSE = "dense", "bm25"


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    embed_model: str
    dimension: int
    dense_enabled: bool
    unk_rate: float
    avgdl: float
    chunker: str
    dense_disabled_reason: str | None = None
    sparse_tokenizer: str | None = None

    def as_metadata(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Hit:
    payload: dict
    score: float

    @property
    def chunk(self) -> Chunk:
        return Chunk.from_payload(self.payload)


def _locked(method):
    def wrapper(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)
    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper


class QdrantStore:
    def __init__(self, *, url: str | None = None, path: Path | None = None, api_key: str | None = None,
                 hnsw_m: int = 16, hnsw_ef_construct: int = 100, search_ef: int = 128):
        self.local = not url
        # Local mode is an in-process engine over files; serialise access from service threads.
        self.lock = threading.RLock()
        if url:
            self.client = QdrantClient(url=url, api_key=api_key)
        else:
            path = Path(path or ".rag/qdrant")
            path.mkdir(parents=True, exist_ok=True)
            try:
                self.client = QdrantClient(path=str(path))
            except RuntimeError as e:  # portalocker: another process holds the local store
                raise StoreError(f"Qdrant store {path} is in use by another process ({e}); "
                                 "stop it or set QDRANT_URL to share a server") from e
        self.hnsw = models.HnswConfigDiff(m=hnsw_m, ef_construct=hnsw_ef_construct)
        self.search_ef = search_ef
        self._titles: dict[tuple[str, int], list[str]] = {}

    @classmethod
    def from_settings(cls, s) -> "QdrantStore":
        return cls(url=s.qdrant_url, path=s.qdrant_path, api_key=s.qdrant_api_key, hnsw_m=s.hnsw_m,
                   hnsw_ef_construct=s.hnsw_ef_construct, search_ef=s.search_ef)

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- collections --------------------------------------------------------------------------
    @_locked
    def info(self, name: str) -> CollectionInfo | None:
        if not self.client.collection_exists(name):
            return None
        meta = self.client.get_collection(name).config.metadata or {}
        if "embed_model" not in meta:
            raise StoreError(f"collection {name!r} was not created by this app (no metadata); "
                             "pick another RAG_COLLECTION or delete it")
        return CollectionInfo(**{k: meta.get(k) for k in CollectionInfo.__dataclass_fields__})

    @_locked
    def create(self, info: CollectionInfo) -> None:
        vectors = ({DENSE: models.VectorParams(size=info.dimension, distance=models.Distance.COSINE,
                                               hnsw_config=self.hnsw)} if info.dense_enabled else {})
        self.client.create_collection(
            info.name, vectors_config=vectors,
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            metadata=info.as_metadata())
        if self.local:
            return  # local mode scans payloads anyway and warns that indexes do nothing
        for field, schema in (("doc_id", models.PayloadSchemaType.KEYWORD),
                              ("article_nums", models.PayloadSchemaType.KEYWORD),
                              ("title", models.PayloadSchemaType.KEYWORD)):
            self.client.create_payload_index(info.name, field, schema)

    @_locked
    def drop(self, name: str) -> None:
        if self.client.collection_exists(name):
            self.client.delete_collection(name)

    @staticmethod
    def check_tokenizer(info: CollectionInfo, current: str) -> None:
        if info.sparse_tokenizer != current:
            raise StoreError(f"collection {info.name!r} was indexed with BM25 tokenizer {info.sparse_tokenizer!r}; "
                             f"this version uses {current!r}: re-ingest with `rag ingest --rebuild PATH`")

    @staticmethod
    def check_model(info: CollectionInfo, model: str, dimension: int | None = None) -> None:
        if not info.dense_enabled:
            return
        if model != info.embed_model or (dimension is not None and dimension != info.dimension):
            raise ModelMismatch(
                f"collection {info.name!r} was built with embedding model {info.embed_model!r} "
                f"(dim {info.dimension}) but the query uses {model!r}"
                f"{f' (dim {dimension})' if dimension else ''}; set RAG_EMBED_MODEL={info.embed_model} "
                "or re-ingest with --rebuild")

    # -- documents ----------------------------------------------------------------------------
    @_locked
    def document_hash(self, name: str, doc_id: str) -> str | None:
        points, _ = self.client.scroll(name, scroll_filter=_doc_filter(doc_id), limit=1,
                                       with_payload=["content_hash"])
        return points[0].payload.get("content_hash") if points else None

    @_locked
    def replace_document(self, name: str, doc_id: str, points: list[models.PointStruct]) -> None:
        """Old chunks of the document go, new ones come; ids are content hashes, so this is idempotent."""
        self.client.delete(name, points_selector=models.FilterSelector(filter=_doc_filter(doc_id)))
        for i in range(0, len(points), 256):
            self.client.upsert(name, points=points[i:i + 256])

    @_locked
    def count(self, name: str) -> int:
        return self.client.count(name).count

    @_locked
    def all_payloads(self, name: str) -> list[dict]:
        out, offset = [], None
        while True:
            points, offset = self.client.scroll(name, limit=1024, offset=offset, with_payload=True)
            out.extend(p.payload for p in points)
            if offset is None:
                return out

    @_locked
    def titles(self, name: str) -> list[str]:
        """Distinct law titles in a collection (for citation-aware retrieval); cached per process."""
        key = (name, self.count(name))
        if key not in self._titles:
            seen: dict[str, None] = {}
            offset = None
            while True:
                points, offset = self.client.scroll(name, limit=2048, offset=offset, with_payload=["title"])
                seen.update((p.payload["title"], None) for p in points)
                if offset is None:
                    break
            self._titles[key] = list(seen)
        return self._titles[key]

    @_locked
    def find_articles(self, name: str, titles: list[str], keys: list[str], limit: int = 10,
                      doc_id: str | None = None) -> list[Hit]:
        """Chunks of the named laws (or of one document) that carry any of the article keys ('264', '133-1')."""
        where = (models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id)) if doc_id
                 else models.FieldCondition(key="title", match=models.MatchAny(any=titles)))
        flt = models.Filter(must=[where, models.FieldCondition(key="article_nums", match=models.MatchAny(any=keys))])
        points, _ = self.client.scroll(name, scroll_filter=flt, limit=limit, with_payload=True)
        return [Hit(p.payload, 1.0) for p in points]

    # -- search -------------------------------------------------------------------------------
    @_locked
    def search_dense(self, name: str, vector: list[float], limit: int, flt=None) -> list[Hit]:
        params = None if self.local else models.SearchParams(hnsw_ef=self.search_ef)  # local mode is exact
        res = self.client.query_points(name, query=vector, using=DENSE, limit=limit, query_filter=flt,
                                       search_params=params, with_payload=True)
        return [Hit(p.payload, p.score) for p in res.points]

    @_locked
    def search_sparse(self, name: str, indices: list[int], values: list[float], limit: int, flt=None) -> list[Hit]:
        if not indices:
            return []
        res = self.client.query_points(name, query=models.SparseVector(indices=indices, values=values),
                                       using=SPARSE, limit=limit, query_filter=flt, with_payload=True)
        return [Hit(p.payload, p.score) for p in res.points]


def _doc_filter(doc_id: str) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))])
