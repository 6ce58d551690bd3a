"""One question's search with its levers: the legs (the collection's dense leg; BM25 with the term
levers), the candidate levers, the fusion, the ranking levers; the cited article first."""
from __future__ import annotations

from typing import Any

from rag_app.core import ScoredChunk
from rag_app.core import EmbedUsage
from rag_app.query.levers._contract import Candidates, Ordered, Ranking, SearchRequest
from rag_app.query.levers._registry import of_stage
from rag_app.query.levers._terms import query_terms, to_vector
from rag_app.query.retrieval import legs_for, ranked_chunks, retrieve, rrf_fuse
from rag_app.store import Hit

def search_with_usage(req: SearchRequest) -> tuple[list[ScoredChunk], EmbedUsage]:
    """The top-k chunks and what the levers embedded for them. Raises RescoreBusy when rescore is asked
    for and its embedder stays busy past req.rescore_wait_s."""
    if not any(of_stage(req.levers, stage) for stage in ("terms", "feedback", "candidates", "ranking")):
        return retrieve(req.store, req.info, req.question, req.query_vector, mode=req.mode, top_k=req.top_k,
                        rrf_k=req.rrf_k, dense_weight=req.dense_weight, sparse_weight=req.sparse_weight, cite=req.cite,
                        where=req.where), EmbedUsage()
    c = Candidates()
    for lever in of_stage(req.levers, "candidates"):
        c = lever.begin(req, c)
    c = _legs(req, c)
    for lever in of_stage(req.levers, "candidates"):
        c = lever.more(req, c)
    r = Ranking(_fused(req, c), c.payloads)
    for lever in of_stage(req.levers, "ranking"):
        r = lever.rerank(req, r)
    return ranked_chunks(req.store, req.info, req.question, r.ordered, dict(r.payloads), req.top_k, req.cite,
                         req.where), c.embedded

def search(*args: Any, **kwargs: Any) -> list[ScoredChunk]:
    """The ranking alone, for `SearchRequest(*args, **kwargs)`: the old keyword form, kept for tests and
    benchmarks that call it as `search(store, info, question, None, mode="bm25", levers=..., top_k=3)`."""
    return search_with_usage(SearchRequest(*args, **kwargs))[0]

def _legs(req: SearchRequest, c: Candidates) -> Candidates:
    use_dense, use_sparse = legs_for(req.mode, req.info)
    if use_dense and req.query_vector is not None:
        c = c.with_leg(req.store.search_dense(req.info.name, req.query_vector, req.depth, req.where), req.dense_weight)
    if use_sparse:
        c = c.with_leg(_bm25(req), req.sparse_weight)
    return c

def _bm25(req: SearchRequest) -> list[Hit]:
    """The BM25 leg: the user's words and what the term levers add; searched again with the feedback
    levers' terms when they are on and the first search found something."""
    terms = query_terms(req.question)
    for lever in of_stage(req.levers, "terms"):
        terms = {**terms, **lever.more_terms(req, terms, ())}
    hits = req.store.search_sparse(req.info.name, *to_vector(terms), req.depth, req.where)
    feedback = of_stage(req.levers, "feedback")
    if feedback and hits:
        for lever in feedback:
            terms = {**terms, **lever.more_terms(req, terms, hits)}
        hits = req.store.search_sparse(req.info.name, *to_vector(terms), req.depth, req.where)
    return hits

def _fused(req: SearchRequest, c: Candidates) -> Ordered:
    if c.fused is not None:
        return c.fused
    if len(c.rankings) == 1:
        return [(h.payload["chunk_id"], h.score) for h in c.legs[0]]
    return sorted(rrf_fuse(c.rankings, c.weights, req.rrf_k).items(), key=lambda kv: -kv[1])
