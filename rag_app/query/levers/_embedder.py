"""The rescore embedder's lock, and a question's vector in its space (made now or on another thread):
what the rescore and wide levers share."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from rag_app.core import Embedder
from rag_app.core import EmbedUsage


class RescoreBusy(RuntimeError):
    """The rescore embedder stayed busy with other questions longer than the caller would wait."""


# One rescore embedding at a time per process: the engine already uses every core for one batch, and
# concurrent asks usually share candidates, so the next one finds them in the cache. A question that
# would wait longer than `wait_s` (rag serve under load) gets RescoreBusy and is answered from BM25
# alone: 8 concurrent clients on 2 busy cores otherwise waited ~40 s each behind a cold batch.
embed_lock = threading.Lock()


@contextmanager
def _embedder(wait_s: float | None, since: float | None = None) -> Iterator[None]:
    """The rescore embedder, held; RescoreBusy once `wait_s` passes (None: wait as long as it takes),
    counted from `since` (time.monotonic(); default now)."""
    left = None if wait_s is None else max(0.0, wait_s - (time.monotonic() - since if since is not None else 0.0))
    if not embed_lock.acquire(timeout=-1 if left is None else left):
        raise RescoreBusy(f"rescore skipped: its embedder was busy for {wait_s:g} s (RAG_RESCORE_WAIT_S)")
    try:
        yield
    finally:
        embed_lock.release()


def question_vector(question: str, embeddings: Embedder, wait_s: float | None,
                    since: float | None = None) -> tuple[np.ndarray, EmbedUsage]:
    """The question's vector in the rescore embedder's space, made under the embedder's lock."""
    with _embedder(wait_s, since):
        vector, used = embeddings.embed_query_with_stats(question)
    return np.asarray(vector, dtype=np.float32), used


# Threads that embed questions while the main thread runs BM25 and reads the candidates' vectors: the
# engine releases the GIL, so on two cores a new question waits for max(embedding, search), not the sum.
_ahead = ThreadPoolExecutor(max_workers=32, thread_name_prefix="question-vector")


class QuestionVector:
    """A question's rescore vector, being embedded on another thread since the search began. Its wait
    for the embedder counts from the start, so RAG_RESCORE_WAIT_S bounds the whole wait as before."""

    def __init__(self, question: str, embeddings: Embedder, wait_s: float | None):
        self._future = _ahead.submit(question_vector, question, embeddings, wait_s, time.monotonic())

    def result(self) -> tuple[np.ndarray, EmbedUsage]:
        return self._future.result()  # RescoreBusy, or the embedder's own error, is raised here


class Bounded:
    """The rescore embedder, its question embeddings made under the embedder's lock and given up (RescoreBusy)
    once `wait_s` passes: for code that embeds a question through the Embedder interface (the learned
    ranker's candidate views), so RAG_RESCORE_WAIT_S bounds its wait as it bounds rescore's."""

    def __init__(self, embeddings: Embedder, wait_s: float | None):
        self._embeddings, self._wait_s = embeddings, wait_s
        self.model_name = embeddings.model_name

    def embed_query_with_stats(self, text: str) -> tuple[list[float], EmbedUsage]:
        with _embedder(self._wait_s):
            return self._embeddings.embed_query_with_stats(text)

    def embed_array_with_stats(self, texts: list[str]) -> tuple[np.ndarray, EmbedUsage]:
        return self._embeddings.embed_array_with_stats(texts)  # wide_matrix holds the lock itself

    def cached_with_stats(self, texts: list[str]) -> tuple[dict[str, np.ndarray], EmbedUsage]:
        return self._embeddings.cached_with_stats(texts)
