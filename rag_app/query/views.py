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

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag_app.core import EmbedUsage
from rag_app.query import charges, colloquial
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers import (query_terms, to_vector, corpus_definitions, expansion_terms, rescore_text,
                                  wide_matrix)
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
    hits = store.search_sparse(name, *to_vector(terms), depth, where)
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
                    params: QueryKnobs = QueryKnobs(), embed_missing: bool = True,
                    views: tuple[str, ...] = VIEWS, where=None) -> Views:
    """Every view of `views` for one question, each cut at `depth`. `dense` needs `embeddings` (the
    rescore embedder); without it the view is left out. `where` (a scope): every view keeps to it."""
    words = query_terms(question)
    q = _Question(store, info, question, depth, params, where, words,
                  {**words, **colloquial.expansion_terms(question, words, params.colloquial_weight)})
    g = _Gathered()
    for view, propose in _SPARSE_AND_LEVER_VIEWS:
        if view in views:
            propose(q, g)
    if where is not None:
        g.keep_to(where)
    cosine, used = None, EmbedUsage()
    if embeddings is not None:
        cosine, used = _dense(q, g, embeddings, embed_missing, "dense" in views)
    return Views(g.ranked, g.payloads, g.picks, g.named_docs, cosine, used)


@dataclass(frozen=True)
class _Question:
    """What every view of `candidate_views` reads: the store, the question, its words and the levers' knobs."""

    store: Any
    info: Any
    text: str
    depth: int
    params: QueryKnobs
    where: Any
    words: dict[str, float]
    with_everyday: dict[str, float]  # the words and the everyday-word rows at their weight

    @property
    def name(self) -> str:
        return self.info.name

    def sparse(self, terms: dict[str, float], where=None) -> tuple[list[tuple[str, float]], dict]:
        return _sparse(self.store, self.name, terms, self.depth, where)


@dataclass
class _Gathered:
    """The views found so far, the payload of every chunk they propose and the levers' own picks."""

    ranked: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    payloads: dict[str, dict] = field(default_factory=dict)
    picks: tuple[str, ...] = ()
    named_docs: tuple[str, ...] = ()

    def add(self, view: str, ranking: list[tuple[str, float]], payloads: dict) -> None:
        self.ranked[view] = ranking
        self.payloads.update(payloads)

    def keep_to(self, where) -> None:
        """A lever's additions obey a scope like every leg does."""
        for view in ("cite", "charge"):
            if view in self.ranked:
                self.ranked[view] = [(c, sc) for c, sc in self.ranked[view] if matches(self.payloads[c], where)]
        self.picks = tuple(c for c in self.picks if matches(self.payloads[c], where))


def _bm25_view(q: _Question, g: _Gathered) -> None:
    g.add("bm25", *q.sparse(q.words, q.where))


def _colloquial_view(q: _Question, g: _Gathered) -> None:
    g.add("bm25+colloquial", *q.sparse(q.with_everyday, q.where))


def _expand_view(q: _Question, g: _Gathered) -> None:
    p = q.params
    terms = {**q.words, **expansion_terms(q.words, corpus_definitions(q.store, q.name), p.expand_min_overlap,
                                          p.expand_min_share, p.expand_weight)}
    g.add("expand", *q.sparse(terms, q.where))


def _named_view(q: _Question, g: _Gathered) -> None:
    if q.where is not None:  # only without a scope from outside
        return
    within = named_in(q.text, catalogue(q.store, q.name))
    g.add("named", *(q.sparse(q.with_everyday, within.where) if within else ([], {})))
    g.named_docs = tuple(within.where["doc_id"]) if within else ()


def _cite_view(q: _Question, g: _Gathered) -> None:
    hits = citation_hits(q.store, q.info, q.text, limit=q.depth)
    g.add("cite", [(h.payload["chunk_id"], float(len(hits) - i)) for i, h in enumerate(hits)],
          {h.payload["chunk_id"]: h.payload for h in hits})


def _charge_view(q: _Question, g: _Gathered) -> None:
    ranking = charge_ranking(q.store, q.name, q.text)
    g.ranked["charge"] = ranking
    if ranking:
        index = charges.charge_index(q.store, q.name)
        g.payloads.update({c: index.payloads[c] for c, _ in ranking})
        g.picks = tuple(charges.charge_chunk_ids(q.text, index))


# in this order: a chunk's payload is the last view's that proposed it, as before
_SPARSE_AND_LEVER_VIEWS = (("bm25", _bm25_view), ("bm25+colloquial", _colloquial_view), ("expand", _expand_view),
                           ("named", _named_view), ("cite", _cite_view), ("charge", _charge_view))


def _dense(q: _Question, g: _Gathered, embeddings, embed_missing: bool,
           with_view: bool) -> tuple[dict[str, float], EmbedUsage]:
    """The question's similarity to every proposed chunk, and (`with_view`) the dense view itself."""
    ids, every, sims, used = _similarities(q, embeddings, embed_missing)
    if with_view and ids:
        top = [i for i in np.argsort(-sims, kind="stable")[:q.depth] if np.isfinite(sims[i])]
        g.add("dense", [(ids[i], float(sims[i])) for i in top], {ids[i]: every[ids[i]] for i in top})
    row = {c: i for i, c in enumerate(ids)}
    return {c: float(sims[row[c]]) for c in g.payloads if c in row}, used


def _similarities(q: _Question, embeddings, embed_missing: bool):
    """Every chunk's id, payload and cosine to the question (-inf outside a scope), and what embedding it cost."""
    vector, used = embeddings.embed_query_with_stats(rescore_text(q.text, q.params.rescore_query_chars))
    qv = np.asarray(vector, dtype=np.float32)
    view = wide_matrix(q.store, q.name, embeddings, embed_missing, q.params.rescore_unit)
    ids, every = view.ids, view.payloads
    sims = view.chunk_scores(qv) if ids else np.zeros(0, dtype=np.float32)
    if q.where is not None and ids:
        sims = np.where([matches(every[c], q.where) for c in ids], sims, -np.inf)
    return ids, every, sims, used


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
