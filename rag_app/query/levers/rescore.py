"""rescore: a dense leg over the BM25 candidates only (embed the candidates, not the corpus; the
embedding cache keeps them), fused by RRF (or, with rescore_fusion=linear, by scaled scores). Lets a
Chinese-reading embedder help without a full-corpus embedding pass at ingest."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from rag_app.core import Embedder
from rag_app.core import Chunk
from rag_app.core import EmbedUsage
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers._contract import Candidates, Lever, Ordered, Payload, SearchRequest
from rag_app.query.levers._embedder import QuestionVector, _embedder


def dense_texts(payload: Payload, unit: str = "chunk") -> list[str]:
    """What the rescore embedder reads of one chunk: its indexed text, or (unit `article`) each of its
    articles, the chunk scored by the best of them (RAG_RESCORE_UNIT)."""
    return Chunk.from_payload(payload).dense_texts(unit)


def dense_order(question: str, payloads: dict[str, Payload], ids: list[str], embeddings: Embedder,
                query_vector: np.ndarray | list[float] | QuestionVector | None, wait_s: float | None = None,
                embed_missing: bool = True, unit: str = "chunk") -> tuple[Ordered, EmbedUsage]:
    """(candidate, cosine similarity), most similar first, and what was embedded for it (tokens, cache
    hits and misses), so the retrieve row can show the work rescore did.

    `query_vector`: the question's vector, one under way (a QuestionVector), or None (embedded here).
    `embed_missing=False` (ask and serve, RAG_RESCORE_VECTORS=ingest): only candidates whose vector
    ingest's pass already made are ordered; the rest are left out of the dense leg (BM25 still ranks
    them) and counted as `not_embedded`. A question then costs one short query embedding, never a
    batch of passages: a new question used to embed 18-21 of its 20 candidates (~8 s of CPU).
    `unit` article: a chunk is as similar as its most similar article (a chunk holds 2-3 articles, and
    its one vector blurs them), and is ordered only when every article has a vector."""
    pieces = [dense_texts(payloads[c], unit) for c in ids]
    if not pieces:
        return [], EmbedUsage()
    found: dict[str, np.ndarray] | None = None
    used = EmbedUsage()
    if not embed_missing:
        found, used, ids, pieces = _only_embedded(embeddings, ids, pieces)
        if not pieces:  # nothing to order: the question's vector is not needed either
            return [], used
    texts = _distinct(pieces)
    qv, vectors, embedded = _vectors(question, texts, embeddings, query_vector, found, wait_s)
    by_text = dict(zip(texts, (vectors @ qv).tolist()))
    sims = np.array([max(by_text[t] for t in p) for p in pieces], dtype=np.float32)
    return [(ids[i], float(sims[i])) for i in np.argsort(-sims, kind="stable")], used + embedded


def _distinct(pieces: list[list[str]]) -> list[str]:
    """Every text of the pieces once, in first-seen order."""
    return list(dict.fromkeys(t for p in pieces for t in p))


def _only_embedded(embeddings: Embedder, ids: list[str], pieces: list[list[str]]
                   ) -> tuple[dict[str, np.ndarray], EmbedUsage, list[str], list[list[str]]]:
    """The cached vectors of the pieces' texts, and the candidates every text of which has one; those
    left out are counted as `not_embedded`, whatever the unit."""
    found, used = embeddings.cached_with_stats(_distinct(pieces))
    kept = [(c, p) for c, p in zip(ids, pieces) if all(t in found for t in p)]
    used = replace(used, not_embedded=len(ids) - len(kept))
    return found, used, [c for c, _ in kept], [p for _, p in kept]


def _vectors(question: str, texts: list[str], embeddings: Embedder,
             query_vector: np.ndarray | list[float] | QuestionVector | None,
             found: dict[str, np.ndarray] | None, wait_s: float | None
             ) -> tuple[np.ndarray, np.ndarray, EmbedUsage]:
    """The question's vector and the texts' vectors (`found`: already cached), embedding under the
    embedder's bounded wait only what is still missing; what that embedding used."""
    used = EmbedUsage()
    if isinstance(query_vector, QuestionVector):
        query_vector, used = query_vector.result()
    if query_vector is None or found is None:  # something to embed
        with _embedder(wait_s):
            if query_vector is None:
                query_vector, q_used = embeddings.embed_query_with_stats(question)
                used += q_used
            if found is None:
                vectors, p_used = embeddings.embed_array_with_stats(texts)
                used += p_used
    if found is not None:
        vectors = np.stack([found[t] for t in texts])
    return np.asarray(query_vector, dtype=np.float32), vectors, used


def rescore_text(question: str, max_chars: int) -> str:
    """What rescore embeds of a question: all of it, or past `max_chars` its first and last halves (the
    head+tail cut of long-text classification). Long questions are case descriptions whose charge and
    prosecutor's conclusion come last; embedding all of one (up to 512 tokens) took 100-170 ms."""
    if not max_chars or len(question) <= max_chars:
        return question
    half = max_chars // 2
    return question[:half] + "…" + question[-(max_chars - half):]


def _min_max(scores: dict[str, float]) -> dict[str, float]:
    if not scores:  # nothing to scale: a scoped question BM25 found nothing for
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in scores.items()}


def linear_fuse(sparse_hits: Ordered, dense: Ordered, alpha: float) -> Ordered:
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


class Rescore(Lever, name="rescore", stage="candidates", order=20):  # after wide: it orders what wide proposed too
    def label(self, params: QueryKnobs, version: str | None = None) -> str:
        from rag_app.query.adapter import query_adapter

        adapter = query_adapter(params)  # loaded once per process; the row names the version that moved the question
        unit = "/article" if params.rescore_unit == "article" else ""
        return f"rescore({params.rescore_model}{unit}{f'+adapter({adapter.version})' if adapter else ''})"

    def begin(self, req: SearchRequest, c: Candidates) -> Candidates:
        # the question's vector is started before the search, so it is embedded while BM25 runs (wide reads it
        # too); a collection's own dense vector may be another model's, so is unused
        if req.embeddings is None or req.dense_leg:
            return c
        return replace(c, question_vector=QuestionVector(self.text(req), req.embeddings, req.rescore_wait_s))

    def more(self, req: SearchRequest, c: Candidates) -> Candidates:
        if req.embeddings is None:
            return c
        depth = req.params.rescore_depth
        pool = list(dict.fromkeys([*(cid for r in c.rankings for cid in r[:depth]), *c.proposed]))
        # the question's vector: wide's, or under way since before the search, or the collection's own when
        # its dense leg is searched; else None (embedded in dense_order)
        qv = c.question_vector if c.question_vector is not None else req.query_vector if req.dense_leg else None
        dense, used = dense_order(self.text(req), dict(c.payloads), pool, req.embeddings, qv, req.rescore_wait_s,
                                  req.embed_missing, req.params.rescore_unit)
        c = replace(c.with_ranking([cid for cid, _ in dense], req.params.rescore_weight), embedded=used + c.embedded)
        if req.params.rescore_fusion == "linear" and len(c.legs) == 1:
            c = replace(c, fused=linear_fuse([(h.payload["chunk_id"], h.score) for h in c.legs[0]], dense,
                                             req.params.rescore_alpha))
        return c

    @staticmethod
    def text(req: SearchRequest) -> str:
        """What rescore embeds of the question (with the rewrite's words when that lever acts)."""
        return rescore_text(req.search_text, req.params.rescore_query_chars)


LEVER = Rescore()
