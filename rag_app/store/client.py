"""qdrant-client: a Qdrant server (QDRANT_URL, QDRANT_API_KEY), or qdrant-client's pure-Python local
mode on a folder (the store of earlier versions; kept as the server API's stand-in in tests and as
the baseline in bench/). Collection metadata lives in Qdrant's collection metadata."""
from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient, models

from rag_app.core import StoreError, StoreInUse
from rag_app.store.base import (DENSE, DOCUMENT_FIELDS, INDEXED_FIELDS, SPARSE, CollectionInfo, DerivedIndexes, Fusion, Hit, SparseVector,
                                StoreChecks, StoredPoint, Where, check_name)
from rag_app.store._shapes import payload, stale_of, vectors_of, where_filter

BATCH = 256
TITLES_TTL_S = 30.0  # a server may be written by other processes: re-read the titles now and then


class ClientStore(StoreChecks):
    def __init__(self, *, url: str | None = None, path: Path | None = None, api_key: str | None = None,
                 hnsw_m: int = 16, hnsw_ef_construct: int = 100, search_ef: int = 128):
        self.local = not url
        self.where = url or str(path)
        # local mode is an in-process engine over files; serialise access from service threads
        self._lock = threading.RLock()
        if url:
            self.client = QdrantClient(url=url, api_key=api_key)
            self._reach(url)
        else:
            path = Path(path or ".rag/qdrant")
            path.mkdir(parents=True, exist_ok=True)
            try:
                self.client = QdrantClient(path=str(path))
            except RuntimeError as e:  # portalocker: another process holds the local store
                raise StoreInUse(f"store {path} is in use by another process ({e}); stop it or set "
                                 "QDRANT_URL to share a server") from e
        self.hnsw = models.HnswConfigDiff(m=hnsw_m, ef_construct=hnsw_ef_construct)
        self.search_ef = search_ef
        # a server may be written by other processes too: what we derive from it is re-read after a while
        self.derived_indexes = DerivedIndexes(None if self.local else TITLES_TTL_S)

    def _reach(self, url: str) -> None:
        """One request when the store is opened, so an unreachable server is one line naming QDRANT_URL here
        rather than qdrant-client's traceback from whichever call comes first."""
        try:
            self.client.get_collections()
        except Exception as e:  # qdrant-client wraps httpx and grpc errors in several types of its own
            self.client.close()
            why = " ".join(str(e).split()) or type(e).__name__
            raise StoreError(f"QDRANT_URL={url}: Qdrant server unreachable or refusing requests ({why}); "
                             "start it, or fix or unset QDRANT_URL (unset = the embedded store)") from None

    @classmethod
    def from_settings(cls, s) -> "ClientStore":
        return cls(url=s.qdrant_url, path=s.qdrant_path, api_key=s.qdrant_api_key, hnsw_m=s.hnsw_m,
                   hnsw_ef_construct=s.hnsw_ef_construct, search_ef=s.search_ef)

    def __repr__(self) -> str:
        return f"ClientStore({'local ' if self.local else ''}{self.where})"

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- collections ----------------------------------------------------------------------------
    def info(self, name: str) -> CollectionInfo | None:
        with self._lock:
            if not self.client.collection_exists(check_name(name)):
                return None
            meta = self.client.get_collection(name).config.metadata or {}
        if "embed_model" not in meta:
            raise StoreError(f"collection {name!r} was not created by this app (no metadata); "
                             "pick another RAG_COLLECTION or delete it")
        return CollectionInfo.from_metadata(meta)

    def create(self, info: CollectionInfo) -> None:
        vectors = ({DENSE: models.VectorParams(size=info.dimension, distance=models.Distance.COSINE,
                                               hnsw_config=self.hnsw)} if info.dense_enabled else {})
        with self._lock:
            self.client.create_collection(
                check_name(info.name), vectors_config=vectors,
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                metadata=info.as_metadata())
            self.derived_indexes.drop(info.name)
            if self.local:
                return  # local mode scans payloads anyway and warns that indexes do nothing
            for field in INDEXED_FIELDS:
                self.client.create_payload_index(info.name, field, models.PayloadSchemaType.KEYWORD)

    def drop(self, name: str) -> None:
        with self._lock:
            self.derived_indexes.drop(name)
            if self.client.collection_exists(name):
                self.client.delete_collection(name)

    def count(self, name: str) -> int:
        with self._lock:
            return self.client.count(name).count

    def commit(self, name: str) -> None:
        """Writes are acknowledged durable by the server (local mode: on each call); nothing to do."""

    # -- documents ------------------------------------------------------------------------------
    def document_hash(self, name: str, doc_id: str) -> str | None:
        with self._lock:
            points, _ = self.client.scroll(name, scroll_filter=_filter({"doc_id": doc_id}), limit=1,
                                           with_payload=["content_hash"])
        return payload(points[0]).get("content_hash") if points else None

    def replace_document(self, name: str, doc_id: str, content_hash: str, points: Sequence[StoredPoint]) -> None:
        """Upsert the new version, then delete the document's points of any other version."""
        with self._lock:
            for i in range(0, len(points), BATCH):
                self.client.upsert(name, points=[_point(p) for p in points[i:i + BATCH]])
            stale = stale_of(models, doc_id, content_hash)
            self.client.delete(name, points_selector=models.FilterSelector(filter=stale))
            self.derived_indexes.drop(name)

    def all_payloads(self, name: str) -> list[dict]:
        out: list[dict] = []
        offset = None
        with self._lock:
            while True:
                points, offset = self.client.scroll(name, limit=1024, offset=offset, with_payload=True)
                out.extend(payload(p) for p in points)
                if offset is None:
                    return out

    def titles(self, name: str) -> list[str]:
        """Distinct law titles; cached until this store writes the collection (or, on a server that
        others may write, for TITLES_TTL_S)."""
        def build() -> list[str]:
            with self._lock:
                if self.local:  # local mode has no facet index: scan titles once
                    seen: dict[str, None] = {}
                    offset = None
                    while True:
                        points, offset = self.client.scroll(name, limit=2048, offset=offset, with_payload=["title"])
                        seen.update((payload(p)["title"], None) for p in points)
                        if offset is None:
                            break
                    return sorted(seen)
                res = self.client.facet(name, key="title", limit=1_000_000, exact=True)
                return sorted(str(h.value) for h in res.hits if h.count > 0)
        return self.derived(name, "titles", build)

    def documents(self, name: str) -> list[dict]:
        """One entry per document ({doc_id, title, source_path, doc_type}), without the chunks' texts."""
        seen: dict[str, dict] = {}
        offset = None
        with self._lock:
            while True:
                points, offset = self.client.scroll(name, limit=2048, offset=offset, with_payload=list(DOCUMENT_FIELDS))
                for p in points:
                    seen.setdefault(payload(p)["doc_id"], {f: payload(p).get(f) for f in DOCUMENT_FIELDS})
                if offset is None:
                    return list(seen.values())

    def find_articles(self, name: str, titles: Sequence[str], keys: Sequence[str], limit: int = 10,
                      doc_id: str | None = None) -> list[Hit]:
        where = {"doc_id": doc_id} if doc_id else {"title": list(titles)}
        with self._lock:
            points, _ = self.client.scroll(name, scroll_filter=_filter({**where, "article_nums": list(keys)}),
                                           limit=limit, with_payload=True)
        return [Hit(payload(p), 1.0) for p in points]

    # -- search ---------------------------------------------------------------------------------
    def search(self, name: str, *, dense: Sequence[float] | None = None, sparse: SparseVector | None = None,
               limit: int, depth: int | None = None, fusion: Fusion = Fusion(),
               where: Where | None = None) -> list[Hit]:
        params = None if self.local else models.SearchParams(hnsw_ef=self.search_ef)  # local mode is exact
        legs, weights = [], []
        if dense is not None:
            legs.append(models.Prefetch(query=list(dense), using=DENSE, limit=max(depth or limit, limit),
                                        params=params))
            weights.append(fusion.dense_weight)
        if sparse is not None and sparse.indices:
            legs.append(models.Prefetch(query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                                        using=SPARSE, limit=max(depth or limit, limit)))
            weights.append(fusion.sparse_weight)
        if not legs:
            return []
        flt = _filter(where) if where else None
        with self._lock:
            if len(legs) == 1:
                leg = legs[0]
                res = self.client.query_points(name, query=leg.query, using=leg.using, limit=limit,
                                               query_filter=flt, search_params=leg.params, with_payload=True)
            else:
                for leg in legs:
                    leg.filter = flt
                res = self.client.query_points(
                    name, prefetch=legs, limit=limit, with_payload=True,
                    query=models.RrfQuery(rrf=models.Rrf(k=fusion.engine_k, weights=weights)))
        return [Hit(payload(p), p.score) for p in res.points]


def _filter(where: Where) -> Any:
    return where_filter(models, where)


def _point(p: StoredPoint) -> Any:
    return models.PointStruct(id=p.id, vector=vectors_of(models, p), payload=p.payload)
