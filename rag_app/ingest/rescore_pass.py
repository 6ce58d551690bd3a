"""Ingest's embedding pass: the rescore lever's vector of every chunk, made once, so that a question
embeds only itself. A new question used to embed 18-21 of its 20 BM25 candidates (~8 s of CPU on this
2-core machine); answering each dev question once embedded 77% of the corpus anyway.

Resumable by construction: vectors go to the embedding cache (model + sha256 of the text) a batch at a
time, and a pass starts by looking up what the cache already holds, so an interrupted pass (Ctrl-C, a
killed process, a full disk) continues where it stopped the next time `rag ingest` runs. A chunk whose
text did not change is never embedded again, whatever collection or run it came from.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from rag_app.core import Embedder
from rag_app.store import VectorStore
from rag_app.core import Chunk
from rag_app.core import EmbedUsage

log = logging.getLogger(__name__)
PHASE = "rescore"  # the progress phase name (`rag ingest` labels it)


def chunk_texts(store: VectorStore, collection: str, unit: str = "chunk") -> list[str]:
    """The texts rescore embeds, once each: each chunk's indexed text (as levers.dense_order reads it), or
    with unit `article` (RAG_RESCORE_UNIT, the default) each chunk's articles instead: rescore, the
    whole-corpus `wide` view and the query adapter's training then all read a chunk as its best article,
    so a chunk of several articles needs no vector of its own (a chunk of one is its own text)."""
    texts: dict[str, None] = {}
    for p in store.all_payloads(collection):
        texts.update(dict.fromkeys(Chunk.from_payload(p).dense_texts(unit)))
    return list(texts)


def fill_rescore_vectors(store: VectorStore, collection: str, embeddings: Embedder,
                         progress: Callable[[str, int, int], None] | None = None, batch: int = 32,
                         lock: threading.Lock | None = None, stop: threading.Event | None = None,
                         unit: str = "chunk") -> EmbedUsage:
    """Embed every chunk of `collection` that has no cached vector yet; returns what was done (texts,
    cache hits = already there, tokens embedded now). `lock`: held per batch (levers.embed_lock), so a
    question asked meanwhile waits at most one batch for the engine. `stop`: set, the pass ends after
    the batch it is in (what it embedded is kept)."""
    texts = chunk_texts(store, collection, unit)
    have, _ = embeddings.cached_with_stats(texts)
    missing = [t for t in texts if t not in have]
    total = EmbedUsage(texts=len(texts), cache_hits=len(texts) - len(missing))
    if progress:
        progress(PHASE, total.cache_hits, len(texts))
    # similar lengths per batch: the engine packs windows without padding, but a batch is as slow as
    # its slowest part on the last core
    missing.sort(key=len)
    done = total.cache_hits
    for i in range(0, len(missing), batch):
        if stop is not None and stop.is_set():
            break
        part = missing[i:i + batch]
        held: AbstractContextManager[object] = lock if lock is not None else nullcontext()
        with held:
            _, used = embeddings.embed_array_with_stats(part)
        total += EmbedUsage(tokens=used.tokens, cache_misses=used.cache_misses)
        done += len(part)
        if progress:
            progress(PHASE, done, len(texts))
    return total
