"""Cross-encoder rerank with FlagEmbedding's FlagReranker (bge-reranker), by hub id or path.

When no reranker can be loaded the stage is `skipped` — retrieval order kept — and the ledger
says so; it never silently pretends to have reranked.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from rag_app.errors import ModelLoadError, RagError
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


def load_reranker(model: str | None, settings=None) -> tuple[Reranker | None, str | None]:
    """(reranker, None) or (None, reason it is skipped). With RAG_RERANK_URL set, the HTTP endpoint."""
    if settings is not None and settings.rerank_url:
        from rag_app.rerank_http import HttpReranker

        return HttpReranker(settings.rerank_url, model or "rerank", api_key=settings.rerank_api_key,
                            timeout_s=settings.rerank_timeout_s, price_usd=settings.rerank_price_usd,
                            price_unit=settings.rerank_price_unit), None
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
    billing: dict | None = None  # what an HTTP reranker billed (rerank_http.RerankBilling.usage())


def rerank(question: str, candidates: list[ScoredChunk], reranker: Reranker | None, *, top_n: int,
           table_weight: float = 1.5, skip_reason: str | None = None) -> RerankResult:
    if reranker is None or not candidates:
        return RerankResult(candidates[:top_n], "skipped", 0, skip_reason or "no candidates")
    passages = [c.chunk.text for c in candidates]
    try:
        raw = reranker.score(question, passages)
    except RagError as e:  # an HTTP endpoint down or refusing: keep retrieval order, say why
        log.warning("rerank failed, retrieval order kept: %s", e)
        return RerankResult(candidates[:top_n], "error", 0, str(e))
    # Tables are dense with facts but score low against a prose question; weight them up.
    weighted = [s * (table_weight if c.chunk.kind == "table" else 1.0) for s, c in zip(raw, candidates)]
    order = sorted(range(len(candidates)), key=lambda i: -weighted[i])[:top_n]
    out = [ScoredChunk(candidates[i].chunk, candidates[i].score, candidates[i].retrieval_rank, weighted[i])
           for i in order]
    billing = reranker.billing_usage() if hasattr(reranker, "billing_usage") else None
    return RerankResult(out, "ok", reranker.count_tokens(question, passages), billing=billing)
