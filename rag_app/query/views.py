"""Candidate views: independent ways to propose chunks for one question, each a ranking of its own.

A view is what a fusion step or a ranker could be shown; whether a question's gold is in any of them
bounds what ordering alone can reach. Every view reads the store's public query API and the levers'
helpers, and none of them was written from read questions:

- bm25: the user's own words (tokenised as the index is).
- bm25+colloquial: the default's BM25 leg (the user's words and the everyday-word rows at their weight).
- dense: the rescore embedder's nearest chunks over the whole collection (the vectors ingest's pass made).
- cite: the article a question cites (《民法典》第一千零四十三条), as citation boosting finds it.
- charge: the criminal-law chunks that define the charges a case description names, best first.
- named: the default's BM25 leg within the documents the question names (the `named` lever's scope).
- expand: BM25 with the defined terms mined from the corpus's own definitions (本法所称X，是指Y).

`default_pool` is the union the default pipeline's fusion sees (levers.search_with_usage): the BM25 leg's
top `depth` (and the same within a named scope), the cited articles and the charge chunks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag_app.core.usage import EmbedUsage
from rag_app.query import charges, colloquial
from rag_app.query.levers import (LeverParams, _query_terms, _to_vector, corpus_definitions, expansion_terms,
                                  rescore_text, wide_matrix)
from rag_app.query.retrieval import citation_hits
from rag_app.query.scope import catalogue, named_in
from rag_app.store import matches

VIEWS = ("bm25", "bm25+colloquial", "dense", "cite", "charge", "named", "expand")


@dataclass(frozen=True)
class Views:
    """{view name: [(chunk id, score), ...] best first} and the payload of every chunk proposed."""

    ranked: dict[str, list[tuple[str, float]]]
    payloads: dict[str, dict]
    charge_picks: tuple[str, ...] = ()  # the chunk the charge lever puts first for each named charge
    named_docs: tuple[str, ...] = ()  # ids of the documents the question names (the `named` scope)
    cosine: dict[str, float] | None = None  # every proposed chunk's similarity to the question (with an embedder)
    embedded: EmbedUsage = EmbedUsage()  # what embedding the question cost (the dense view)

    def ids(self, view: str, k: int | None = None) -> list[str]:
        return [cid for cid, _ in self.ranked.get(view, [])[:k]]


def _sparse(store, name: str, terms: dict[str, float], depth: int, where=None) -> tuple[list[tuple[str, float]], dict]:
    hits = store.search_sparse(name, *_to_vector(terms), depth, where)
    return [(h.payload["chunk_id"], h.score) for h in hits], {h.payload["chunk_id"]: h.payload for h in hits}


def charge_ranking(store, name: str, question: str, per_charge: int = 5) -> list[tuple[str, float]]:
    """Up to `per_charge` chunks per named charge, by charges.score (best first, charges interleaved)."""
    named = charges.named_charges(question)
    if not named:
        return []
    index = charges.charge_index(store, name)
    lists = []
    for charge in named:
        best: dict[str, float] = {}
        for para in index.candidates(charge):
            s = charges.score(charge, para)
            best[para.chunk_id] = max(best.get(para.chunk_id, 0.0), s)
        lists.append(sorted(best.items(), key=lambda kv: -kv[1])[:per_charge])
    out: dict[str, float] = {}
    for rank in range(per_charge):
        for lst in lists:
            if rank < len(lst) and lst[rank][0] not in out:
                out[lst[rank][0]] = lst[rank][1]
    return list(out.items())


def candidate_views(store, info, question: str, *, depth: int = 100, embeddings=None,
                    params: LeverParams = LeverParams(), embed_missing: bool = True,
                    views: tuple[str, ...] = VIEWS, where=None) -> Views:
    """Every view of `views` for one question, each cut at `depth`. `dense` needs `embeddings` (the
    rescore embedder); without it the view is left out. `where` (a scope): every view keeps to it."""
    name = info.name
    ranked: dict[str, list[tuple[str, float]]] = {}
    payloads: dict[str, dict] = {}
    picks: tuple[str, ...] = ()
    named_docs: tuple[str, ...] = ()
    words = _query_terms(question)
    with_everyday = {**words, **colloquial.expansion_terms(question, words, params.colloquial_weight)}
    if "bm25" in views:
        ranked["bm25"], p = _sparse(store, name, words, depth, where)
        payloads.update(p)
    if "bm25+colloquial" in views:
        ranked["bm25+colloquial"], p = _sparse(store, name, with_everyday, depth, where)
        payloads.update(p)
    if "expand" in views:
        terms = {**words, **expansion_terms(words, corpus_definitions(store, name), params.expand_min_overlap,
                                            params.expand_min_share, params.expand_weight)}
        ranked["expand"], p = _sparse(store, name, terms, depth, where)
        payloads.update(p)
    if "named" in views and where is None:
        within = named_in(question, catalogue(store, name))
        ranked["named"], p = _sparse(store, name, with_everyday, depth, within.where) if within else ([], {})
        payloads.update(p)
        named_docs = tuple(within.where["doc_id"]) if within else ()
    if "cite" in views:
        hits = citation_hits(store, info, question, limit=depth)
        ranked["cite"] = [(h.payload["chunk_id"], float(len(hits) - i)) for i, h in enumerate(hits)]
        payloads.update({h.payload["chunk_id"]: h.payload for h in hits})
    if "charge" in views:
        ranked["charge"] = charge_ranking(store, name, question)
        if ranked["charge"]:
            index = charges.charge_index(store, name)
            payloads.update({c: index.payloads[c] for c, _ in ranked["charge"]})
            picks = tuple(charges.charge_chunk_ids(question, index))
    if where is not None:  # a lever's additions obey a scope like every leg does
        for view in ("cite", "charge"):
            if view in ranked:
                ranked[view] = [(c, sc) for c, sc in ranked[view] if matches(payloads[c], where)]
        picks = tuple(c for c in picks if matches(payloads[c], where))
    cosine, used = None, EmbedUsage()
    if embeddings is not None:
        vector, used = embeddings.embed_query_with_stats(rescore_text(question, params.rescore_query_chars))
        qv = np.asarray(vector, dtype=np.float32)
        ids, every, matrix = wide_matrix(store, name, embeddings, embed_missing)
        sims = matrix @ qv if ids else np.zeros(0, dtype=np.float32)
        if where is not None:
            sims = np.where([matches(every[c], where) for c in ids], sims, -np.inf) if ids else sims
        if "dense" in views and ids:
            top = [i for i in np.argsort(-sims, kind="stable")[:depth] if np.isfinite(sims[i])]
            ranked["dense"] = [(ids[i], float(sims[i])) for i in top]
            payloads.update({ids[i]: every[ids[i]] for i in top})
        row = {c: i for i, c in enumerate(ids)}
        cosine = {c: float(sims[row[c]]) for c in payloads if c in row}
    return Views(ranked, payloads, picks, named_docs, cosine, used)


def default_pool(v: Views, depth: int = 50, top_k: int = 20) -> set[str]:
    """The chunks the default pipeline's fusion sees (stages.retrieve, levers.search_with_usage): its BM25
    leg's top `depth`, the cited articles and each named charge's chunk. When the question names
    documents, that leg runs within them, and the whole library's leg follows only when they hold
    fewer than `top_k` of its chunks; cited and charge chunks from outside a named scope are left out."""
    every = set(v.ids("bm25+colloquial", depth)) | set(v.ids("cite", 5)) | set(v.charge_picks)
    if not v.named_docs:
        return every
    inside = set(v.named_docs)
    pool = {c for c in set(v.ids("named", depth)) | every if v.payloads[c]["doc_id"] in inside}
    if len(pool) < top_k:
        pool |= every
    return pool
