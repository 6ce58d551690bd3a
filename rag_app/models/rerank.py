"""Cross-encoder rerank with FlagEmbedding's FlagReranker (bge-reranker), by hub id or path.

When no reranker can be loaded the stage is `skipped` — retrieval order kept — and the ledger
says so; it never silently pretends to have reranked. A reranker returns its usage with its scores
(`ports.Reranker`); `rerank_candidates` turns that into the stage's full ranking and `StageUsage`.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from rag_app.core import ModelLoadError, RagError
from rag_app.models.weights import resolve_model_path
from rag_app.core import Reranker
from rag_app.core import ScoredChunk
from rag_app.core import PriceBasis, RerankUsage, StageUsage

log = logging.getLogger(__name__)


class FlagCrossEncoder:
    billing = "shadow"  # local work: priced at RAG_RERANK_PRICE_PER_1K as what a hosted reranker would bill

    def __init__(self, model: str):
        path = resolve_model_path(model)  # before the ~4 s FlagEmbedding import: fail fast offline
        try:
            from FlagEmbedding import FlagReranker

            self.model = FlagReranker(str(path), use_fp16=False, devices="cpu", normalize=True)
        except Exception as e:
            raise ModelLoadError(f"cannot load reranker {model!r} from {path}: {e}") from e
        self.model_name = model

    def score(self, query: str, passages: Sequence[str]) -> tuple[list[float], RerankUsage]:
        scores = self.model.compute_score([[query, p] for p in passages], normalize=True)
        tok = self.model.tokenizer
        tokens = sum(len(tok(query, p, truncation=True, max_length=512)["input_ids"]) for p in passages)
        return [float(s) for s in (scores if isinstance(scores, list) else [scores])], RerankUsage(tokens)


def load_reranker(model: str | None, settings: Any = None) -> tuple[Reranker | None, str | None]:
    """(reranker, None) or (None, reason it is skipped). With RAG_RERANK_URL set, the HTTP endpoint."""
    if settings is not None and settings.rerank_url:
        from rag_app.models.rerank_http import HttpReranker

        return HttpReranker(settings.rerank_url, model or "rerank", api_key=settings.rerank_api_key,
                            timeout_s=settings.rerank_timeout_s), None
    if not model:
        return None, "reranker disabled (RAG_RERANK_MODEL=none)"
    try:
        return FlagCrossEncoder(model), None
    except ModelLoadError as e:
        log.warning("rerank stage skipped: %s", e)
        return None, str(e)


def rerank_candidates(question: str, candidates: Sequence[ScoredChunk], reranker: Reranker | None, *,
                      model: str | None, table_weight: float = 1.5,
                      skip_reason: str | None = None) -> tuple[list[ScoredChunk], StageUsage]:
    """Every candidate in rerank order (the packer takes the top RAG_TOP_N; `rag eval` scores the whole
    ranking), and the stage's usage. `model`: what the row names when no reranker is loaded."""
    basis: PriceBasis = "rerank_http" if reranker is not None and reranker.billing == "billed" else "rerank"
    name = reranker.model_name if reranker is not None else model
    if reranker is None or not candidates:
        return list(candidates), StageUsage("rerank", model=name, status="skipped", billing="shadow",
                                            price_basis="rerank", error=skip_reason or "no candidates")
    try:
        raw, used = reranker.score(question, [c.chunk.text for c in candidates])
    except RagError as e:  # an HTTP endpoint down or refusing: keep retrieval order, say why
        log.warning("rerank failed, retrieval order kept: %s", e)
        return list(candidates), StageUsage("rerank", model=name, status="error", billing="shadow",
                                            price_basis="rerank", error=str(e))
    # Tables are dense with facts but score low against a prose question; weight them up.
    weighted = [s * (table_weight if c.chunk.kind == "table" else 1.0) for s, c in zip(raw, candidates)]
    order = sorted(range(len(candidates)), key=lambda i: -weighted[i])
    ranked = [ScoredChunk(candidates[i].chunk, candidates[i].score, candidates[i].retrieval_rank, weighted[i])
              for i in order]
    return ranked, StageUsage("rerank", model=name, input_tokens=used.tokens, usage_source=used.source,
                              billing="billed" if basis == "rerank_http" else "shadow", price_basis=basis,
                              search_units=used.search_units, raw=used.raw)
