"""wide (with rescore): the rescore embedder over the whole corpus, from the vectors ingest's pass made
(rag_app/ingest/rescore_pass.py): its nearest chunks join BM25's candidates before rescoring, so a chunk
BM25 never ranked can still be found (most misses on validate had no gold in BM25's top 20)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from rag_app.core.ports import Embedder
from rag_app.core.types import Chunk
from rag_app.query.levers._contract import Candidates, Lever, Payload, SearchRequest
from rag_app.query.levers._embedder import _embed_lock, question_vector
from rag_app.query.levers.rescore import Rescore
from rag_app.store import VectorStore


def wide_candidates(store: VectorStore, name: str, embeddings: Embedder, qv: np.ndarray, n: int,
                    embed_missing: bool) -> tuple[list[str], dict[str, Payload]]:
    """The `n` chunks of the whole collection nearest the question by the rescore embedder, and their
    payloads (see wide_matrix)."""
    ids, payloads, matrix = wide_matrix(store, name, embeddings, embed_missing)
    if not ids:
        return [], {}
    sims = matrix @ qv
    top = np.argsort(-sims, kind="stable")[:n]
    near = [ids[i] for i in top]
    return near, {c: payloads[c] for c in near}


def wide_matrix(store: VectorStore, name: str, embeddings: Embedder,
                embed_missing: bool) -> tuple[list[str], dict[str, Payload], np.ndarray]:
    """(chunk ids, their payloads, one row per chunk: its rescore vector). Built once per collection and
    process (the store drops it when the collection is written). `embed_missing` (rag eval): chunks
    ingest's pass did not embed are embedded now, once; else (ask, serve) only the vectors already made
    take part."""
    def build() -> tuple[list[str], dict[str, Payload], np.ndarray]:
        payloads = store.all_payloads(name)
        texts = [Chunk.from_payload(p).indexed_text() for p in payloads]
        if embed_missing:
            with _embed_lock:
                matrix = embeddings.embed_array_with_stats(texts)[0]
            return [p["chunk_id"] for p in payloads], {p["chunk_id"]: p for p in payloads}, matrix
        found, _ = embeddings.cached_with_stats(texts)
        kept = [(p, found[t]) for p, t in zip(payloads, texts) if t in found]
        matrix = np.stack([v for _, v in kept]) if kept else np.zeros((0, 0), dtype=np.float32)
        return [p["chunk_id"] for p, _ in kept], {p["chunk_id"]: p for p, _ in kept}, matrix

    return store.derived(name, f"wide:{embeddings.model_name}:{int(embed_missing)}", build)


class Wide(Lever, name="wide", stage="candidates", order=10):  # before rescore, which orders what it proposes
    def more(self, req: SearchRequest, c: Candidates) -> Candidates:
        if "rescore" not in req.levers or req.embeddings is None:  # it widens rescore's pool; alone it does nothing
            return c
        qv, used = question_vector(Rescore.text(req), req.embeddings, req.rescore_wait_s)
        near, payloads = wide_candidates(req.store, req.info.name, req.embeddings, qv, req.params.wide_depth,
                                         req.embed_missing)
        return replace(c, payloads={**payloads, **c.payloads}, proposed=(*c.proposed, *near), question_vector=qv,
                       embedded=c.embedded + used)


LEVER = Wide()
