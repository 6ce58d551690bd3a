"""One exception tree for the whole app. Messages say what went wrong *and how to fix it*.

    RagError
    ├── ConfigError             a setting is missing or malformed
    ├── IngestError             one input file could not be turned into text
    │   ├── UnsupportedFormat
    │   └── EmptyDocument       a file that yields no text (never "zero chunks" in silence)
    ├── StoreError              Qdrant collection problems
    │   ├── ModelMismatch       querying a collection with another embedding model
    │   ├── StoreInUse          another process holds the embedded store (names the holder)
    │   └── OutdatedStore       a store an earlier version built; says what to run
    ├── ModelLoadError          an embedder / reranker could not be loaded
    └── StageError              a pipeline stage failed at query time (carries the stage)
        └── LLMError            the chat model failed after all attempts
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class RagError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(RagError):
    pass


class IngestError(RagError):
    def __init__(self, path: str, reason: str, fix: str = ""):
        self.path, self.reason, self.fix = path, reason, fix
        msg = f"{path}: {reason}"
        super().__init__(f"{msg} — {fix}" if fix else msg)


class UnsupportedFormat(IngestError):
    pass


class EmptyDocument(IngestError):
    pass


class StoreError(RagError):
    pass


class ModelMismatch(StoreError):
    pass


class StoreInUse(StoreError):
    pass


class OutdatedStore(StoreError):
    pass


class ModelLoadError(RagError):
    pass


class StageError(RagError):
    def __init__(self, stage: str, message: str):
        self.stage = stage
        super().__init__(f"[{stage}] {message}")


class LLMError(StageError):
    def __init__(self, message: str, *, attempts: int, usages: Sequence[Any] = (), stage: str = "generate"):
        self.attempts = attempts
        self.usages = tuple(usages)  # each attempt's StageUsage (what the failed call may have cost)
        super().__init__(stage, f"{message} (after {attempts} attempt(s))")
