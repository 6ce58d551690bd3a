"""Retrieval: dense and BM25 legs fused by weighted reciprocal rank (RRF) inside the engine (one
store.search call with two prefetches), then the article a question cites put first.

`rrf_fuse` is the same fusion as a pure function, for code that fuses rankings of its own.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from rag_app.text import sparse
from rag_app.text import find_article_refs
from rag_app.store import CollectionInfo, Fusion, Hit, SparseVector, VectorStore, Where, matches
from rag_app.core import Chunk, ScoredChunk


def rrf_fuse(rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int = 60) -> dict[str, float]:
    """score(id) = sum_i w_i / (k + rank_i(id)), ranks from 1. Pure; order-independent."""
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
    return scores


def short_names(title: str) -> list[str]:
    """How people cite a law: full title, without 中华人民共和国, and (for 民法典 etc.) the same."""
    names = {title}
    if title.startswith("中华人民共和国"):
        names.add(title[len("中华人民共和国"):])
    return [n for n in names if len(n) >= 2]


def cited_laws(question: str, titles: list[str]) -> list[str]:
    """Titles the question names. A match inside a longer match is dropped (保险法 in 社会保险法)."""
    pattern, owners = _title_matcher(tuple(titles))
    spans = [(m.start(), m.start() + len(m.group(1)), t) for m in pattern.finditer(question)
             for t in owners[m.group(1)]] if owners else []
    keep = {t for s, e, t in spans if not any(s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, _ in spans)}
    return sorted(keep)


@lru_cache(maxsize=8)
def _title_matcher(titles: tuple[str, ...]) -> tuple[re.Pattern, dict[str, list[str]]]:
    """One regex over every name of every title, built once per title list rather than one scan of
    the question per title: at each position the longest name matches (a shorter one starting there
    lies inside it and would be dropped anyway), so the cost no longer grows with the library."""
    owners: dict[str, list[str]] = {}
    for t in titles:
        for name in short_names(t):
            owners.setdefault(name, []).append(t)
    names = sorted(owners, key=len, reverse=True)
    return re.compile("(?=(" + "|".join(map(re.escape, names)) + "))"), owners


def citation_hits(store: VectorStore, info: CollectionInfo, question: str, limit: int = 5) -> list[Hit]:
    """Chunks holding the exact (law, article) the question cites: 《民法典》第一千零四十三条, 刑法第264条."""
    keys = list(dict.fromkeys(find_article_refs(question)))
    if not keys:
        return []
    laws = cited_laws(sparse.normalize_query(question), store.titles(info.name))
    return store.find_articles(info.name, laws, keys, limit) if laws else []


def legs_for(mode: str, info: CollectionInfo) -> tuple[bool, bool]:
    """(use_dense, use_sparse) — a dense leg the collection dropped is never queried."""
    dense = mode in ("hybrid", "dense") and info.dense_enabled
    use_sparse = mode in ("hybrid", "bm25") or not dense
    return dense, use_sparse


def retrieve(store: VectorStore, info: CollectionInfo, question: str, query_vector: list[float] | None,
             *, mode: str, top_k: int, rrf_k: int = 60, dense_weight: float = 1.0,
             sparse_weight: float = 1.0, cite: bool = True, where: Where | None = None) -> list[ScoredChunk]:
    """`where`: a payload filter (a scope) every leg applies in the engine."""
    use_dense, use_sparse = legs_for(mode, info)
    hits = store.search(info.name, dense=query_vector if use_dense else None,
                        sparse=SparseVector(*sparse.query_vector(question)) if use_sparse else None,
                        limit=top_k, depth=max(top_k * 2, 50),  # fuse over deeper legs than we return
                        fusion=Fusion(rrf_k, dense_weight, sparse_weight), where=where)
    payloads = {h.payload["chunk_id"]: h.payload for h in hits}
    ordered = [(h.payload["chunk_id"], h.score) for h in hits]
    return ranked_chunks(store, info, question, ordered, payloads, top_k, cite, where)


def put_first(ordered: list[tuple[str, float]], ids: list[str]) -> list[tuple[str, float]]:
    """`ids` (in their order) ahead of the rest of `ordered`, scored one above its best; no duplicates."""
    top = ordered[0][1] if ordered else 1.0
    first = dict.fromkeys(ids)
    return [(cid, top + 1.0) for cid in first] + [(cid, sc) for cid, sc in ordered if cid not in first]


def ranked_chunks(store: VectorStore, info: CollectionInfo, question: str, ordered: list[tuple[str, float]],
                  payloads: dict[str, dict], top_k: int, cite: bool = True,
                  where: Where | None = None) -> list[ScoredChunk]:
    """(chunk id, score) in rank order -> the top-k ScoredChunks; with `cite`, the article the question
    names goes first, ahead of anything similar-sounding. With `where` (a scope), whatever a lever or
    the citation lookup brought in from outside it is left out."""
    if cite:
        exact = citation_hits(store, info, question)
        payloads = {**payloads, **{h.payload["chunk_id"]: h.payload for h in exact}}
        ordered = put_first(ordered, [h.payload["chunk_id"] for h in exact])
    if where:
        ordered = [(cid, sc) for cid, sc in ordered if matches(payloads[cid], where)]
    return [ScoredChunk(Chunk.from_payload(payloads[cid]), score, rank)
            for rank, (cid, score) in enumerate(ordered[:top_k], 1)]
