"""The store interface every backend implements, and the values that cross it."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from rag_app.core import ModelMismatch, StoreError
from rag_app.core import Chunk

DENSE, SPARSE = "dense", "bm25"
# Payload fields that citation lookups, document replacement and scopes filter on: both backends index them.
# Not content_hash: it is only compared among one document's chunks, which the doc_id index finds; its
# index was ~20% of the engine's indexing pass at commit (issue 20 item 4, bench/edge_writes.py).
INDEXED_FIELDS = ("doc_id", "title", "article_nums", "doc_type")
# What `documents()` returns of each document: what a scope can name it by, and its type.
DOCUMENT_FIELDS = ("doc_id", "title", "source_path", "doc_type")
# A field filter: field -> one value (must equal) or a list (must equal any of them).
Where = Mapping[str, "str | Sequence[str]"]
T = TypeVar("T")


def matches(payload: Mapping[str, Any], where: Where) -> bool:
    """The store's filter rule as a pure function (for hits a lever adds from outside a search): a
    field equals the value, or any of the listed values; a list field matches when any element does."""
    for key, want in where.items():
        wanted = {want} if isinstance(want, str) else set(want)
        have = payload.get(key)
        values = have if isinstance(have, list) else [have]
        if not wanted.intersection(v for v in values if isinstance(v, str)):
            return False
    return True


class DerivedIndexes:
    """Indexes built from a collection's chunks (its titles, the charge paragraphs of its criminal law,
    the definitions its laws state), owned by the store that holds the collection and dropped by the
    write that makes them stale: re-ingesting an amended law rebuilds them on the next question, in this
    process, whatever the chunk count. A server that other processes also write is re-read after
    `ttl_s` (None: only this store writes, as the embedded store's lock guarantees).

    A build runs outside the lock (it reads the store, which has its own lock); a write that lands while
    it runs bumps the collection's generation, and the stale result is returned once but not kept."""

    def __init__(self, ttl_s: float | None = None):
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}
        self._built: dict[tuple[str, str], tuple[int, float, Any]] = {}

    def get(self, name: str, key: str, build: Callable[[], T]) -> T:
        with self._lock:
            gen = self._generation.get(name, 0)
            hit = self._built.get((name, key))
            if hit is not None and hit[0] == gen and (self.ttl_s is None or time.monotonic() - hit[1] < self.ttl_s):
                return hit[2]  # type: ignore[no-any-return]
        value = build()
        with self._lock:
            if self._generation.get(name, 0) == gen:
                self._built[(name, key)] = (gen, time.monotonic(), value)
        return value

    def drop(self, name: str) -> None:
        """The collection changed (a document replaced or deleted, the collection created or dropped)."""
        with self._lock:
            self._generation[name] = self._generation.get(name, 0) + 1
            for k in [k for k in self._built if k[0] == name]:
                del self._built[k]


@dataclass(frozen=True)
class CollectionInfo:
    """What a collection was built with; stored beside it and checked before every use."""
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

    @classmethod
    def from_metadata(cls, meta: Mapping) -> "CollectionInfo":
        """Raises ValueError naming the first field that is missing or of the wrong type: a junk
        description must not pass as a collection that then answers nothing."""
        if not isinstance(meta, Mapping):
            raise ValueError(f"expected a JSON object, found {type(meta).__name__}")
        for key, types in _METADATA_TYPES.items():
            value = meta.get(key)
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                raise ValueError(f"field {key!r} is {value!r}, expected {' or '.join(t.__name__ for t in types)}")
        if meta["dimension"] <= 0 or meta["avgdl"] <= 0:
            raise ValueError("dimension and avgdl must be > 0")
        fields: dict[str, Any] = {k: meta.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)


REBUILD = "rebuild it: `rag ingest --rebuild PATH` with the folder(s) you ingested"
_NONE = type(None)
_METADATA_TYPES = {"name": (str,), "embed_model": (str,), "dimension": (int,), "dense_enabled": (bool,),
                   "unk_rate": (int, float), "avgdl": (int, float), "chunker": (str,),
                   "dense_disabled_reason": (str, _NONE), "sparse_tokenizer": (str, _NONE)}


@dataclass(frozen=True)
class Hit:
    payload: dict
    score: float

    @property
    def chunk(self) -> Chunk:
        return Chunk.from_payload(self.payload)


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class StoredPoint:
    """One chunk as the store keeps it: id (a content-hash UUID), payload, BM25 and dense vectors."""
    id: str
    payload: dict
    sparse: SparseVector
    dense: list[float] | None = None


@dataclass(frozen=True)
class Fusion:
    """Weighted reciprocal-rank fusion, done by the engine. `k` is the classic RRF constant:
    with weight 1 a point at rank r (from 1) of a leg scores 1 / (k + r). Weights follow Qdrant:
    weight w counts rank r like rank r / w, i.e. 1 / (r / w + k)."""
    k: int = 60
    dense_weight: float = 1.0
    sparse_weight: float = 1.0

    @property
    def engine_k(self) -> int:
        return self.k + 1  # Qdrant scores 1 / (r / w + k_engine - 1)


@runtime_checkable
class VectorStore(Protocol):
    """What the app needs from a vector store. Collection names are plain ([A-Za-z0-9._-])."""

    # -- collections
    def info(self, name: str) -> CollectionInfo | None: ...
    def create(self, info: CollectionInfo) -> None: ...
    def drop(self, name: str) -> None: ...
    def count(self, name: str) -> int: ...
    def commit(self, name: str) -> None: ...
    def close(self) -> None: ...
    def missing(self, name: str) -> StoreError: ...  # the error for a collection not there
    def emptied(self, name: str) -> StoreError: ...  # ... and for one whose chunks are gone
    def __enter__(self) -> VectorStore: ...  # closes on leaving: `with open_store(settings) as store`
    def __exit__(self, *exc: object) -> None: ...

    # -- documents
    def document_hash(self, name: str, doc_id: str) -> str | None: ...
    def replace_document(self, name: str, doc_id: str, content_hash: str, points: Sequence[StoredPoint]) -> None: ...
    def all_payloads(self, name: str) -> list[dict]: ...
    def titles(self, name: str) -> list[str]: ...
    def documents(self, name: str) -> list[dict]: ...
    def derived(self, name: str, key: str, build: Callable[[], T]) -> T: ...
    def forget_derived(self, name: str) -> None: ...
    def release(self, name: str) -> None: ...  # what is held open of a collection goes; reopened on next use
    def find_articles(self, name: str, titles: Sequence[str], keys: Sequence[str], limit: int = 10,
                      doc_id: str | None = None) -> list[Hit]: ...

    # -- search
    def search(self, name: str, *, dense: Sequence[float] | None = None, sparse: SparseVector | None = None,
               limit: int, depth: int | None = None, fusion: Fusion = Fusion(),
               where: Where | None = None) -> list[Hit]: ...
    def search_dense(self, name: str, vector: Sequence[float], limit: int, where: Where | None = None) -> list[Hit]: ...
    def search_sparse(self, name: str, indices: list[int], values: list[float], limit: int,
                      where: Where | None = None) -> list[Hit]: ...

    # -- metadata checks
    def check_model(self, info: CollectionInfo, model: str, dimension: int | None = None) -> None: ...
    def check_tokenizer(self, info: CollectionInfo, current: str, reads: Collection[str] = ()) -> None: ...


def check_tokenizer(info: CollectionInfo, current: str, reads: Collection[str] = ()) -> None:
    """`reads`: earlier versions whose collections this one queries correctly (rag_app/sparse.READS)."""
    if info.sparse_tokenizer != current and info.sparse_tokenizer not in reads:
        raise StoreError(f"collection {info.name!r} was indexed with BM25 tokenizer {info.sparse_tokenizer!r}; "
                         f"this version uses {current!r}: re-ingest with `rag ingest --rebuild PATH`")


def check_model(info: CollectionInfo, model: str, dimension: int | None = None) -> None:
    if not info.dense_enabled:
        return
    if model != info.embed_model or (dimension is not None and dimension != info.dimension):
        raise ModelMismatch(
            f"collection {info.name!r} was built with embedding model {info.embed_model!r} "
            f"(dim {info.dimension}) but the query uses {model!r}"
            f"{f' (dim {dimension})' if dimension else ''}; set RAG_EMBED_MODEL={info.embed_model} "
            "or re-ingest with --rebuild")


MAX_COLLECTION_CHARS = 64  # a folder name (edge/<name>, uploads@<name>) within 255 bytes, in any script


def check_name(name: str) -> str:
    """Collection names become folder names of the embedded store: keep them plain and short enough for
    every file system (a 300-character name was the file system's "File name too long", a 500)."""
    if not name or not all(c.isalnum() or c in "._-" for c in name) or name.startswith("."):
        raise StoreError(f"collection name {name[:80]!r} must be letters, digits, '.', '_' or '-' "
                         "(set RAG_COLLECTION to such a name)")
    if len(name) > MAX_COLLECTION_CHARS:
        raise StoreError(f"collection name {name[:40]!r}… has {len(name)} characters; at most "
                         f"{MAX_COLLECTION_CHARS}")
    return name


class StoreChecks:
    """The metadata checks as methods, so callers can write `store.check_model(...)` on any backend,
    and the collection-owned indexes (`derived`) every backend keeps the same way."""
    check_tokenizer = staticmethod(check_tokenizer)
    check_model = staticmethod(check_model)
    derived_indexes: DerivedIndexes

    def derived(self, name: str, key: str, build: Callable[[], T]) -> T:
        """`build()`'s result for this collection, kept until this store next writes it."""
        return self.derived_indexes.get(name, key, build)

    def forget_derived(self, name: str) -> None:
        """Drop what was built from this collection: something it is built from changed outside the
        store (the rescore pass made vectors the `wide` lever's matrix did not have)."""
        self.derived_indexes.drop(name)

    def release(self, name: str) -> None:
        """Let go of what this process holds of a collection nobody uses now (what was built from it; the
        embedded store also closes its shard): memory stays bounded however many collections exist. The
        next use opens it again."""
        self.derived_indexes.drop(name)

    def missing(self, name: str) -> StoreError:
        """The error for a collection that is not there (backends name where they looked)."""
        return StoreError(f"collection {name!r} does not exist yet; run `rag ingest PATH` first")

    def emptied(self, name: str) -> StoreError:
        """The error for a collection whose description is there but whose chunks are gone."""
        return StoreError(f"collection {name!r} holds no chunks (its data was deleted or an ingest was "
                          f"interrupted) — {REBUILD}")

    def search_dense(self, name: str, vector: Sequence[float], limit: int, where: Where | None = None) -> list[Hit]:
        return self.search(name, dense=vector, limit=limit, where=where)  # type: ignore[attr-defined]

    def search_sparse(self, name: str, indices: list[int], values: list[float], limit: int,
                      where: Where | None = None) -> list[Hit]:
        if not indices:
            return []
        return self.search(name, sparse=SparseVector(indices, values), limit=limit, where=where)  # type: ignore[attr-defined]
