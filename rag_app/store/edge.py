"""Qdrant Edge: Qdrant's segment engine in-process (HNSW, sparse vectors with IDF, payload indexes,
prefetch + RRF fusion, a WAL), one shard per collection:

    RAG_DATA_DIR/edge/.lock                    pid of the process that owns the store
    RAG_DATA_DIR/edge/<collection>/collection.json   CollectionInfo (Edge has no collection metadata)
    RAG_DATA_DIR/edge/<collection>/shard/      the Edge shard

Edge's Python calls hold the GIL, so the engine never runs two calls at once in one process; one
re-entrant lock around every call keeps our multi-step operations (open-or-create a shard,
replace a document, drop while a query holds the shard) whole as well. It costs nothing measurable.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from rag_app.core import OutdatedStore, StoreError
from rag_app.store.base import (DENSE, DOCUMENT_FIELDS, INDEXED_FIELDS, REBUILD, SPARSE, CollectionInfo, DerivedIndexes, Fusion, Hit,
                                SparseVector, StoreChecks, StoredPoint, Where, check_name)
from rag_app.store.lock import ProcessLock
from rag_app.store._shapes import payload, stale_of, vectors_of, where_filter

log = logging.getLogger(__name__)
META = "collection.json"
BATCH = 512
# The engine's optimizer rewrites an appendable segment as an indexed one (immutable sparse and payload
# indexes) at `commit` once it passes this many KB of vectors; its default, 10,000 KB, lies between 1x and
# 2x legal_zh, so 1x skipped the pass and every larger corpus paid it: writes 6x at 4x the corpus. At
# 1,000 KB (a segment of ~500 chunks; one law re-ingested stays appendable) every corpus pays ~0.1 ms a
# chunk once, writes grow linearly, and a new process opens the 1x store in ~2/3 of the CPU (the
# appendable segment's indexes are rebuilt on every open). Queries cost the same. Sparse-only
# collections only: with a dense leg the pass builds HNSW, which the engine's default keeps as it was.
SPARSE_ONLY_INDEXING_KB = 1_000


class EdgeStore(StoreChecks):
    def __init__(self, root: Path, *, legacy_path: Path | None = None, hnsw_m: int = 16,
                 hnsw_ef_construct: int = 100, search_ef: int = 128, indexing_threshold_kb: int | None = None):
        """`root`: folder of the shards. `legacy_path`: where an earlier version kept its
        qdrant-client local-mode store, recognised so the user is told to rebuild.
        `indexing_threshold_kb`: the engine's, for the collections this store creates (None: the app's
        choice, SPARSE_ONLY_INDEXING_KB below; bench/edge_writes.py compares others; 0 never indexes)."""
        self.indexing_threshold_kb = indexing_threshold_kb
        self.root = Path(root)
        self.legacy_path = Path(legacy_path) if legacy_path else None
        self.hnsw_m, self.hnsw_ef_construct, self.search_ef = hnsw_m, hnsw_ef_construct, search_ef
        self._lock = threading.RLock()
        self._process_lock = ProcessLock(self.root / ".lock").acquire()
        self._shards: dict[str, qe.EdgeShard] = {}
        self._infos: dict[str, CollectionInfo] = {}
        self.derived_indexes = DerivedIndexes()  # no other process writes: the store is locked

    @classmethod
    def from_settings(cls, s) -> "EdgeStore":
        return cls(s.edge_path, legacy_path=s.qdrant_path, hnsw_m=s.hnsw_m,
                   hnsw_ef_construct=s.hnsw_ef_construct, search_ef=s.search_ef)

    def __repr__(self) -> str:
        return f"EdgeStore({self.root})"

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            for shard in self._shards.values():
                shard.close()  # flushes
            self._shards.clear()
            self._process_lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _dir(self, name: str) -> Path:
        return self.root / check_name(name)

    def _shard(self, name: str) -> qe.EdgeShard:
        shard = self._shards.get(name)
        if shard is None:
            if self.info(name) is None:
                raise self.missing(name)
            shard = self._shards[name] = self._load_shard(name)
        return shard

    def _load_shard(self, name: str) -> qe.EdgeShard:
        """Open the shard or say which folder is damaged. (A shard whose segments were deleted
        opens as an empty one: RagApp.collection catches that through `emptied`.)"""
        folder = self._dir(name) / "shard"
        try:
            return qe.EdgeShard.load(str(folder))
        except Exception as e:  # the engine raises a bare Exception("Service runtime error: ...")
            raise StoreError(f"{folder}: the Qdrant Edge shard of collection {name!r} cannot be opened "
                             f"({str(e)[:300]}) — {REBUILD}") from e

    def emptied(self, name: str) -> StoreError:
        return StoreError(f"{self._dir(name) / 'shard'}: collection {name!r} holds no chunks (its data was "
                          f"deleted or an ingest was interrupted) — {REBUILD}")

    def missing(self, name: str) -> StoreError:
        meta = self._dir(name) / META
        return StoreError(f"no collection {name!r}: {meta} does not exist — build it with `rag ingest PATH` "
                          "(`rag ingest --rebuild PATH` if it was deleted or damaged)")

    # -- collections ----------------------------------------------------------------------------
    def info(self, name: str) -> CollectionInfo | None:
        with self._lock:
            if name in self._infos:
                return self._infos[name]
            meta = self._dir(name) / META
            if not meta.exists():
                self._check_legacy(name)
                return None
            try:
                info = CollectionInfo.from_metadata(json.loads(meta.read_text(encoding="utf-8")))
            except (ValueError, TypeError, UnicodeDecodeError) as e:
                raise StoreError(f"{meta} is not a collection description this app wrote ({str(e)[:200]}) — "
                                 f"{REBUILD}") from e
            self._infos[name] = info
            return info

    def create(self, info: CollectionInfo) -> None:
        with self._lock:
            folder = self._dir(info.name)
            if (folder / META).exists():
                raise StoreError(f"collection {info.name!r} already exists in {self.root}")
            shutil.rmtree(folder, ignore_errors=True)  # a half-created one from a crash
            hnsw = qe.HnswIndexConfig(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct, full_scan_threshold=10_000)
            vectors = ({DENSE: qe.EdgeVectorParams(size=info.dimension, distance=qe.Distance.Cosine, hnsw_config=hnsw)}
                       if info.dense_enabled else None)
            threshold = self.indexing_threshold_kb
            if threshold is None and not info.dense_enabled:
                threshold = SPARSE_ONLY_INDEXING_KB
            optimizers = None if threshold is None else qe.EdgeOptimizersConfig(indexing_threshold=threshold)
            config = qe.EdgeConfig(vectors=vectors, hnsw_config=hnsw, optimizers=optimizers,
                                   sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)})
            shard = qe.EdgeShard.create(str(folder / "shard"), config)
            for field in INDEXED_FIELDS:
                shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
            shard.flush()
            # the description is written last, atomically: its presence means "the collection is whole"
            tmp = folder / (META + ".tmp")
            tmp.write_text(json.dumps(info.as_metadata(), ensure_ascii=False, indent=1), encoding="utf-8")
            os.replace(tmp, folder / META)
            self._shards[info.name], self._infos[info.name] = shard, info
            self.derived_indexes.drop(info.name)

    def drop(self, name: str) -> None:
        with self._lock:
            shard = self._shards.pop(name, None)
            if shard is not None:
                shard.close()
            self._infos.pop(name, None)
            self.derived_indexes.drop(name)
            folder = self._dir(name)
            if (folder / META).exists():
                (folder / META).unlink()  # first, so a crash mid-delete leaves no "whole" collection
            shutil.rmtree(folder, ignore_errors=True)
            self._drop_legacy(name)

    def release(self, name: str) -> None:
        with self._lock:
            shard = self._shards.pop(name, None)
            if shard is not None:
                shard.close()  # flushes
            self.derived_indexes.drop(name)

    def count(self, name: str) -> int:
        with self._lock:
            return self._shard(name).count(qe.CountRequest(exact=True))

    def commit(self, name: str) -> None:
        """Durable and indexed: flush, then let the optimizer build HNSW / merge segments."""
        with self._lock:
            shard = self._shard(name)
            shard.flush()
            shard.optimize()

    # -- documents ------------------------------------------------------------------------------
    def document_hash(self, name: str, doc_id: str) -> str | None:
        with self._lock:
            points, _ = self._shard(name).scroll(qe.ScrollRequest(
                limit=1, filter=_filter({"doc_id": doc_id}), with_payload=["content_hash"]))
            return payload(points[0]).get("content_hash") if points else None

    def replace_document(self, name: str, doc_id: str, content_hash: str, points: Sequence[StoredPoint]) -> None:
        """New chunks go in first, then the document's chunks of any other version go: a query
        running meanwhile sees the old or the new document, never none. Idempotent (ids are
        content hashes)."""
        with self._lock:
            shard = self._shard(name)
            for i in range(0, len(points), BATCH):
                shard.update(qe.UpdateOperation.upsert_points([_point(p) for p in points[i:i + BATCH]]))
            stale = stale_of(qe, doc_id, content_hash)
            shard.update(qe.UpdateOperation.delete_points_by_filter(stale))
            self.derived_indexes.drop(name)

    def all_payloads(self, name: str) -> list[dict]:
        with self._lock:
            shard, offset = self._shard(name), None
            out: list[dict] = []
            while True:
                points, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=2048, with_payload=True))
                out.extend(payload(p) for p in points)
                if offset is None:
                    return out

    def titles(self, name: str) -> list[str]:
        """Distinct law titles (for citation-aware retrieval), from the keyword index; cached until
        this store next writes the collection (no other process can: the store is locked)."""
        def build() -> list[str]:
            with self._lock:
                res = self._shard(name).facet(qe.FacetRequest(key="title", limit=1_000_000, exact=True))
            # an exact facet still lists the values of deleted points, with count 0 (a replaced law's old title)
            return sorted(str(h.value) for h in res.hits if h.count > 0)
        return self.derived(name, "titles", build)

    def documents(self, name: str) -> list[dict]:
        """One entry per document ({doc_id, title, source_path, doc_type}), read from its chunks' payloads
        without their texts."""
        with self._lock:
            shard, offset = self._shard(name), None
            seen: dict[str, dict] = {}
            while True:
                points, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=4096,
                                                               with_payload=list(DOCUMENT_FIELDS)))
                for p in points:
                    seen.setdefault(payload(p)["doc_id"], {f: payload(p).get(f) for f in DOCUMENT_FIELDS})
                if offset is None:
                    return list(seen.values())

    def find_articles(self, name: str, titles: Sequence[str], keys: Sequence[str], limit: int = 10,
                      doc_id: str | None = None) -> list[Hit]:
        """Chunks of the named laws (or of one document) that carry any of the article keys ('264', '133-1')."""
        where = {"doc_id": doc_id} if doc_id else {"title": list(titles)}
        with self._lock:
            points, _ = self._shard(name).scroll(qe.ScrollRequest(
                limit=limit, filter=_filter({**where, "article_nums": list(keys)}), with_payload=True))
            return [Hit(payload(p), 1.0) for p in points]

    # -- search ---------------------------------------------------------------------------------
    def search(self, name: str, *, dense: Sequence[float] | None = None, sparse: SparseVector | None = None,
               limit: int, depth: int | None = None, fusion: Fusion = Fusion(),
               where: Where | None = None) -> list[Hit]:
        """One leg: its top `limit`. Both legs: each fetched `depth` deep (default `limit`), fused by
        weighted RRF in the engine, top `limit` returned. Payloads are fetched for those only (at
        50 payloads a query they cost 30x the search itself)."""
        legs: list[tuple[qe.Query, qe.SearchParams | None]] = []
        weights = []
        if dense is not None:
            legs.append((qe.Query.Nearest(list(dense), using=DENSE), qe.SearchParams(hnsw_ef=self.search_ef)))
            weights.append(fusion.dense_weight)
        if sparse is not None and sparse.indices:
            legs.append((qe.Query.Nearest(qe.SparseVector(indices=sparse.indices, values=sparse.values),
                                          using=SPARSE), None))
            weights.append(fusion.sparse_weight)
        if not legs:
            return []
        flt = _filter(where) if where else None
        if len(legs) == 1:
            (query, params), = legs
            request = qe.QueryRequest(limit=limit, query=query, params=params, filter=flt, with_payload=True)
        else:
            request = qe.QueryRequest(
                limit=limit, with_payload=True,
                prefetches=[qe.Prefetch(limit=max(depth or limit, limit), query=q, params=p, filter=flt)
                            for q, p in legs],
                query=qe.Fusion.Rrf(k=fusion.engine_k, weights=weights))  # type: ignore[arg-type]  # Rrf is a Fusion; the stub says otherwise
        with self._lock:
            return [Hit(payload(p), p.score) for p in self._shard(name).query(request)]

    # -- a store an earlier version built -----------------------------------------------------
    def _legacy_collection(self, name: str) -> Path | None:
        if self.legacy_path is None:
            return None
        folder = self.legacy_path / "collection" / name
        return folder if folder.exists() else None

    def _check_legacy(self, name: str) -> None:
        old = self._legacy_collection(name)
        if old is not None:
            raise OutdatedStore(
                f"{self.legacy_path} holds collection {name!r} in the format of an earlier version "
                f"(qdrant-client local mode); this version keeps collections in {self.root} (Qdrant Edge): "
                f"run `rag ingest --rebuild PATH` with the folder(s) you ingested to rebuild it "
                "(it removes the old copy), or set RAG_STORE_BACKEND=local to keep using the old, slower one")

    def _drop_legacy(self, name: str) -> None:
        if self._legacy_collection(name) is None:
            return
        from qdrant_client import QdrantClient  # only ever needed to clean up after an earlier version

        client = QdrantClient(path=str(self.legacy_path))
        try:
            client.delete_collection(name)
            left = client.get_collections().collections
        finally:
            client.close()
        if not left:
            shutil.rmtree(self.legacy_path, ignore_errors=True)  # type: ignore[arg-type]  # set when legacy points were found
        log.info("removed collection %r of the earlier local-mode store %s", name, self.legacy_path)


def _filter(where: Where) -> Any:
    return where_filter(qe, where)


def _point(p: StoredPoint) -> Any:
    return qe.Point(id=p.id, vector=vectors_of(qe, p), payload=p.payload)
