"""The seams of the query path, as Protocols: every component returns its usage with its result and
keeps no per-call state on itself (two concurrent requests never read each other's counts).

Implementations: embedders in rag_app/models/embedding.py, rerankers in rag_app/models/rerank.py and
rag_app/models/rerank_http.py, chat models are LangChain chat models (rag_app/models/llm.py), the store is
rag_app/store (its own `VectorStore` Protocol). `Pricer` and `ReplyStats` are implemented over the
ledger and the price table in tracing/, and handed in by the composition root (rag_app/app.py): the
domain never imports the observer. A part that loads on first use is handed in as a `Provider` of it
(rag_app/core/lazy.py `Lazy`), never as a method of the composition root.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from rag_app.core.usage import EmbedUsage, RerankUsage, StageUsage

T_co = TypeVar("T_co", covariant=True)


class Provider(Protocol[T_co]):
    """A built part of the query path, or one that loads on first use (`rag report` never pays for torch,
    a BM25-only collection never loads an embedder): `get()` returns it, the same object every time."""

    def get(self) -> T_co: ...


class Embedder(Protocol):
    model_name: str

    def embed_query_with_stats(self, text: str) -> tuple[list[float], EmbedUsage]: ...
    def embed_array_with_stats(self, texts: list[str]) -> tuple[np.ndarray, EmbedUsage]: ...
    def cached_with_stats(self, texts: list[str]) -> tuple[dict[str, np.ndarray], EmbedUsage]: ...


class Reranker(Protocol):
    model_name: str
    billing: str  # "billed" (a hosted endpoint) | "shadow" (a local model)

    def score(self, query: str, passages: Sequence[str]) -> tuple[list[float], RerankUsage]: ...


class Pricer(Protocol):
    """Fills `StageUsage.price`. Never raises: a fault in the price table is an unpriced usage."""

    def price(self, usage: StageUsage) -> StageUsage: ...


class ReplyStats(Protocol):
    """What the ledger knows about a model's replies (for the shadow cost of an extractive answer)."""

    def mean_output_tokens(self, model: str) -> float | None: ...
