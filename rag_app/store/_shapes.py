"""The filter and point shapes both Qdrant APIs share. qdrant-client's `models` and `qdrant_edge` name
them alike (FieldCondition, MatchValue, MatchAny, Filter, SparseVector), so each store passes its API
module and gets the same conditions built once."""
from __future__ import annotations

from types import ModuleType
from typing import Any

from rag_app.store.base import DENSE, SPARSE, StoredPoint, Where


def match(api: ModuleType, field: str, value: Any) -> Any:
    """One payload condition: a string is one value to match, anything else a list of values (any of)."""
    if isinstance(value, str):
        return api.FieldCondition(key=field, match=api.MatchValue(value=value))
    return api.FieldCondition(key=field, match=api.MatchAny(any=list(value)))


def where_filter(api: ModuleType, where: Where) -> Any:
    return api.Filter(must=[match(api, k, v) for k, v in where.items()])


def stale_of(api: ModuleType, doc_id: str, content_hash: str) -> Any:
    """A document's points from an earlier version of it: its id, another content hash."""
    return api.Filter(must=[match(api, "doc_id", doc_id)], must_not=[match(api, "content_hash", content_hash)])


def vectors_of(api: ModuleType, p: StoredPoint) -> dict[str, Any]:
    out: dict[str, Any] = {SPARSE: api.SparseVector(indices=p.sparse.indices, values=p.sparse.values)}
    if p.dense is not None:
        out[DENSE] = list(p.dense)
    return out


def payload(point: Any) -> dict[str, Any]:
    """A point's payload (asked for with every scroll and query here, so never absent)."""
    return point.payload or {}
