"""Chunkers by name. Every chunker maps a ParsedDocument to Chunks whose offsets index its text."""
from __future__ import annotations

from typing import Protocol

from rag_app.chunking.baselines import (FixedTokenChunker, RecursiveChunker, SemanticWindowChunker,
                                        SentencePackChunker)
from rag_app.chunking.contract import ContractChunker
from rag_app.chunking.legal import LegalChunker
from rag_app.chunking.merge import Budget
from rag_app.chunking.routing import ANY, RoutedChunker
from rag_app.core import ConfigError
from rag_app.core import Chunk, ParsedDocument


class Chunker(Protocol):
    name: str
    version: str

    def chunk(self, doc: ParsedDocument) -> list[Chunk]: ...


def build_chunker(name: str, settings, embeddings=None, doc_types=()) -> RoutedChunker:
    """The chunker `name` as a RoutedChunker (every document classified and its type recorded);
    `doc_types`: per-file overrides of the classification, (glob, type) pairs."""
    if name == "legal":  # the default: each document type to its own chunker
        statute = _statute(settings, embeddings)
        return RoutedChunker("legal", "3", {"contract": _contract(settings), ANY: statute}, doc_types)
    single = _single(name, settings, embeddings)
    return RoutedChunker(single.name, single.version, {ANY: single}, doc_types)


def _statute(settings, embeddings) -> LegalChunker:
    budget = Budget(target_max=settings.chunk_target_max, hard_max=settings.chunk_hard_max,
                    min_tokens=settings.chunk_min_tokens)
    if settings.semantic_backend == "embedding" and embeddings is not None:
        return LegalChunker(budget, settings.semantic_threshold, vectorize=embeddings.embed_array)
    return LegalChunker(budget, settings.semantic_threshold)


def _contract(settings) -> ContractChunker:
    return ContractChunker(settings.contract_chunk_max, settings.contract_chunk_hard_max)


def _single(name: str, settings, embeddings) -> Chunker:
    if name == "statute":  # the statute rules for every document (the default of 0.4.0 and before)
        return _statute(settings, embeddings)
    if name == "contract":
        return _contract(settings)
    if name == "fixed-512":
        return FixedTokenChunker(512)
    if name == "fixed-256":
        return FixedTokenChunker(256)
    if name == "recursive":
        return RecursiveChunker(500, 50)
    if name == "sentence-256":
        return SentencePackChunker(256, 0.2)
    if name == "semantic-window":
        if embeddings is None:
            raise ConfigError("semantic-window needs an embedding model (paragraph embeddings)")
        return SemanticWindowChunker(embeddings.embed_array)
    raise ConfigError(f"unknown chunker {name!r}; available: {', '.join(CHUNKERS)}")


CHUNKERS = ("legal", "statute", "contract", "fixed-512", "fixed-256", "recursive", "sentence-256", "semantic-window")
NEEDS_EMBEDDINGS = {"semantic-window"}
