"""Retrieval: dense and BM25 legs from Qdrant, fused by weighted reciprocal rank (RRF).

Fusion is done here rather than in Qdrant so each leg's weight is configurable and each leg's
contribution can be reported; both legs' vectors live in Qdrant.
"""
from __future__ import annotations

from collections.abc import Sequence

from rag_app import sparse
from rag_app.store import CollectionInfo, Hit, QdrantStore
from rag_app.types import Chunk, ScoredChunk


def rrf_fuse(rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int = 60) -> dict[str, float]:
    """score(id) = sum_i w_i / (k + rank_i(id)), ranks from 1. Pure; order-independent."""
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
    return scores


def legs_for(mode: str, info: CollectionInfo) -> tuple[bool, bool]:
    """(use_dense, use_sparse) — a dense leg the collection dropped is never queried."""
    dense = mode in ("hybrid", "dense") and info.dense_enabled
    use_sparse = mode in ("hybrid", "bm25") or not dense
    return dense, use_sparse


def retrieve(store: QdrantStore, info: CollectionInfo, question: str, query_vector: list[float] | None,
             *, mode: str, top_k: int, rrf_k: int = 60, dense_weight: float = 1.0,
             sparse_weight: float = 1.0) -> list[ScoredChunk]:
    use_dense, use_sparse = legs_for(mode, info)
    legs: list[list[Hit]] = []
    weights: list[float] = []
    depth = max(top_k * 2, 50)  # fuse over deeper lists than we return
    if use_dense and query_vector is not None:
        legs.append(store.search_dense(info.name, query_vector, depth))
        weights.append(dense_weight)
    if use_sparse:
        idx, val = sparse.query_vector(question)
        legs.append(store.search_sparse(info.name, idx, val, depth))
        weights.append(sparse_weight)
    payloads = {h.payload["chunk_id"]: h.payload for leg in legs for h in leg}
    if len(legs) == 1:
        ordered = [(h.payload["chunk_id"], h.score) for h in legs[0]]
    else:
        fused = rrf_fuse([[h.payload["chunk_id"] for h in leg] for leg in legs], weights, rrf_k)
        ordered = sorted(fused.items(), key=lambda kv: -kv[1])
    return [ScoredChunk(Chunk.from_payload(payloads[cid]), score, rank)
            for rank, (cid, score) in enumerate(ordered[:top_k], 1)]
