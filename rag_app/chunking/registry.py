"""Chunkers by name. Every chunker maps a ParsedDocument to Chunks whose offsets index its text."""
from __future__ import annotations

from typing import Protocol

from rag_app.chunking.legal import LegalChunker
from rag_app.chunking.merge import Budget
from rag_app.errors import ConfigError
from rag_app.types import Chunk, ParsedDocument


class Chunker(Protocol):
    name: str
    version: str

    def chunk(self, doc: ParsedDocument) -> list[Chunk]: ...


def build_chunker(name: str, settings, embeddings=None) -> Chunker:
    budget = Budget(settings.chunk_target_min, settings.chunk_target_max, settings.chunk_hard_max,
                    settings.chunk_min_tokens)
    if name == "legal":
        if settings.semantic_backend == "embedding" and embeddings is not None:
            return LegalChunker(budget, settings.semantic_threshold, vectorize=embeddings.embed_array)
        return LegalChunker(budget, settings.semantic_threshold)
    raise ConfigError(f"unknown chunker {name!r}; available: legal")
