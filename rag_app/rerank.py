"""Cross-encoder rerank with FlagEmbedding's FlagReranker (bge-reranker), by hub id or path.

When no reranker can be loaded the stage is `skipped` — retrieval order kept — and the ledger
says so; it never silently pretends to have reranked.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from rag_app.errors import ModelLoadError
from rag_app.models import resolve_model_path
from rag_app.types import ScoredChunk

log = logging.getLogger(__name__)


class Reranker(Protocol):
    model_name: str

    def score(self, query: str, passages: list[str]) -> list[float]: ...
    def count_tokens(self, query: str, passages: list[str]) -> int: ...


class FlagCrossEncoder:
    def __init__(self, model: str):
        path = resolve_model_path(model)  # before the ~4 s FlagEmbedding import: fail fast offline
        try:
            from FlagEmbedding import FlagReranker

            self.model = FlagReranker(str(path), use_fp16=False, devices="cpu", normalize=True)
        except Exception as e:
            raise ModelLoadError(f"cannot load reranker {model!r} from {path}: {e}") from e
        self.model_name = model

    def score(self, query, passages):
        scores = self.model.compute_score([[query, p] for p in passages], normalize=True)
        return [float(s) for s in (scores if isinstance(scores, list) else [scores])]

    def count_tokens(self, query, passages):
        tok = self.model.tokenizer
        return sum(len(tok(query, p, truncation=True, max_length=512)["input_ids"]) for p in passages)


def load_reranker(model: str | None) -> tuple[Reranker | None, str | None]:
    """(reranker, None) or (None, reason it is skipped)."""
    if not model:
        return None, "reranker disabled (RAG_RERANK_MODEL empty)"
    try:
        return FlagCrossEncoder(model), None
    except ModelLoadError as e:
        log.warning("rerank stage skipped: %s", e)
        return None, str(e)


@dataclass(frozen=True)
class RerankResult:
    contexts: list[ScoredChunk]
    status: str  # ok | skipped
    tokens: int
    note: str | None = None


def rerank(question: str, candidates: list[ScoredChunk], reranker: Reranker | None, *, top_n: int,
           table_weight: float = 1.5, skip_reason: str | None = None) -> RerankResult:
    if reranker is None or not candidates:
        return RerankResult(candidates[:top_n], "skipped", 0, skip_reason or "no candidates")
    passages = [c.chunk.text for c in candidates]
    raw = reranker.score(question, passages)
    # Tables are dense with facts but score low against a prose question; weight them up.
    weighted = [s * (table_weight if c.chunk.kind == "table" else 1.0) for s, c in zip(raw, candidates)]
    order = sorted(range(len(candidates)), key=lambda i: -weighted[i])[:top_n]
    out = [ScoredChunk(candidates[i].chunk, candidates[i].score, candidates[i].retrieval_rank, weighted[i])
           for i in order]
    return RerankResult(out, "ok", reranker.count_tokens(question, passages))
