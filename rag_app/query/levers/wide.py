"""wide (with rescore): the rescore embedder over the whole corpus, from the vectors ingest's pass made
(rag_app/ingest/rescore_pass.py): its nearest chunks join BM25's candidates before rescoring, so a chunk
BM25 never ranked can still be found (most misses on validate had no gold in BM25's top 20).

With RAG_RESCORE_UNIT=article (the default) a chunk is as near as its nearest article, the rule rescore
orders candidates by, so ingest embeds each article once and no chunk of several articles needs a vector
of its own (1.08x the chunk pass's text instead of 1.49x)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rag_app.core import Embedder
from rag_app.query.levers._contract import Candidates, Lever, Payload, SearchRequest
from rag_app.query.levers._embedder import QuestionVector, embed_lock, question_vector
from rag_app.query.levers.rescore import Rescore, dense_texts
from rag_app.store import VectorStore


@dataclass(frozen=True)
class DenseView:
    """Every chunk of a collection in the rescore embedder's space: `matrix` holds a row per text the
    embedder read (a chunk's own, or one per article), chunk i's rows are `starts[i]` up to `starts[i+1]`."""

    ids: list[str]
    payloads: dict[str, Payload]
    matrix: np.ndarray
    starts: np.ndarray  # int64, one per chunk, increasing

    @property
    def one_row_each(self) -> bool:
        return len(self.ids) == self.matrix.shape[0]

    def chunk_scores(self, vectors: np.ndarray) -> np.ndarray:
        """Each chunk's cosine to a question (its best row's): shape (chunks,) for one vector, (questions,
        chunks) for a row per question."""
        from rag_app.query.blas import one_thread

        q = np.asarray(vectors, dtype=np.float32)
        if q.ndim == 1:
            with one_thread():  # one question's product: threads cost more than they give (rag_app/query/blas.py)
                sims = self.matrix @ q
        else:  # many questions (training, the benches): every thread
            sims = q @ self.matrix.T
        if not self.ids or self.one_row_each:
            return sims
        return np.maximum.reduceat(sims, self.starts, axis=-1)

    def groups(self) -> list[list[int]]:
        """Each chunk's rows (what training's segment max reads)."""
        ends = [*self.starts[1:].tolist(), self.matrix.shape[0]]
        return [list(range(a, b)) for a, b in zip(self.starts.tolist(), ends)]


def wide_candidates(store: VectorStore, name: str, embeddings: Embedder, qv: np.ndarray, n: int,
                    embed_missing: bool, unit: str = "chunk") -> tuple[list[str], dict[str, Payload]]:
    """The `n` chunks of the whole collection nearest the question by the rescore embedder, and their
    payloads (see wide_matrix)."""
    view = wide_matrix(store, name, embeddings, embed_missing, unit)
    if not view.ids:
        return [], {}
    top = np.argsort(-view.chunk_scores(qv), kind="stable")[:n]
    near = [view.ids[i] for i in top]
    return near, {c: view.payloads[c] for c in near}


def wide_matrix(store: VectorStore, name: str, embeddings: Embedder, embed_missing: bool,
                unit: str = "chunk") -> DenseView:
    """The collection's DenseView for `unit` (chunk: a chunk's own vector; article: one per article, as
    rescore_pass.chunk_texts embeds them). Built once per collection and process (the store drops it when
    the collection is written). `embed_missing` (rag eval, training): texts ingest's pass did not embed
    are embedded now, once; else (ask, serve) only chunks whose every text has a vector take part."""
    def build() -> DenseView:
        payloads = store.all_payloads(name)
        pieces = [dense_texts(p, unit) for p in payloads]
        texts = list(dict.fromkeys(t for piece in pieces for t in piece))
        if embed_missing:
            with embed_lock:
                found = dict(zip(texts, embeddings.embed_array_with_stats(texts)[0]))
        else:
            found, _ = embeddings.cached_with_stats(texts)
        kept = [(p, piece) for p, piece in zip(payloads, pieces) if all(t in found for t in piece)]
        rows = [found[t] for _, piece in kept for t in piece]
        sizes = [len(piece) for _, piece in kept]
        matrix = np.stack(rows).astype(np.float32) if rows else np.zeros((0, 0), dtype=np.float32)
        starts = np.cumsum([0, *sizes[:-1]]).astype(np.int64) if kept else np.zeros(0, dtype=np.int64)
        return DenseView([p["chunk_id"] for p, _ in kept], {p["chunk_id"]: p for p, _ in kept}, matrix, starts)

    return store.derived(name, f"wide:{embeddings.model_name}:{unit}:{int(embed_missing)}", build)


class Wide(Lever, name="wide", stage="candidates", order=10):  # before rescore, which orders what it proposes
    def more(self, req: SearchRequest, c: Candidates) -> Candidates:
        if "rescore" not in req.levers or req.embeddings is None:  # it widens rescore's pool; alone it does nothing
            return c
        if isinstance(c.question_vector, QuestionVector):  # under way since before the search (rescore's begin)
            qv, used = c.question_vector.result()
        else:
            qv, used = question_vector(Rescore.text(req), req.embeddings, req.rescore_wait_s)
        # the whole collection is embedded on the spot only where nothing waits on it (rag eval: no wait bound);
        # a question asked in the lazy mode (RAG_RESCORE_VECTORS=query, `rag demo`) reads the vectors made so far
        embed_all = req.embed_missing and req.rescore_wait_s is None
        near, payloads = wide_candidates(req.store, req.info.name, req.embeddings, qv, req.params.wide_depth,
                                         embed_all, req.params.rescore_unit)
        return replace(c, payloads={**payloads, **c.payloads}, proposed=(*c.proposed, *near), question_vector=qv,
                       embedded=c.embedded + used)


LEVER = Wide()
