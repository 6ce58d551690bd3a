"""RagApp: the long-lived objects one process needs (store, models, tracer), loaded lazily.

`ask()` and `ingest()` are what the CLI and (later) the HTTP service call. Models load on first
use so that `rag report` never pays for torch, and a BM25-only collection never loads an embedder.
"""
from __future__ import annotations

import logging
import threading
import uuid
from pathlib import Path

from rag_app.config import Settings
from rag_app.embedding import LocalEmbeddings, load_embeddings
from rag_app.embedding_cache import EmbeddingCache
from rag_app.errors import ConfigError
from rag_app.indexing import IngestReport
from rag_app.rerank import Reranker, load_reranker
from rag_app.sparse import TOKENIZER_VERSION
from rag_app.store import CollectionInfo, VectorStore, open_store
from rag_app.types import Answer
from tracing.cost_tracer import CostTracer
from tracing.db import LedgerURLError
from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable

log = logging.getLogger(__name__)


class RagApp:
    def __init__(self, settings: Settings, *, chat_model=None, reranker: Reranker | None = None,
                 embeddings: LocalEmbeddings | None = None, shared: "RagApp | None" = None):
        """`shared`: another RagApp whose store, ledger writer and tracer this one reuses (variants
        of one service share them: an embedded store has one owner per process)."""
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self._owner = shared is None
        if shared is None:
            self.store: VectorStore = open_store(settings)
            try:
                self.writer = LedgerWriter(settings.ledger, max_buffer=settings.ledger_buffer_rows,
                                           spill_dir=settings.ledger_spill_dir,
                                           direct_timeout_s=settings.ledger_direct_timeout_s)
            except LedgerURLError as e:  # wrong password / database: no retry fixes it
                self.store.close()
                raise ConfigError(str(e)) from None
            self.prices = PriceTable.load(settings.price_overrides, base_url=settings.openai_base_url)
            self.tracer = CostTracer(self.writer, self.prices, embed_rate_per_1k=settings.embed_price_per_1k,
                                     rerank_rate_per_1k=settings.rerank_price_per_1k, provider=settings.llm_provider,
                                     llm_max_tokens=settings.llm_max_tokens)
            self.otel = None
            if settings.otel_endpoint:  # spans built from the rows the tracer hands the ledger
                from tracing.otel_export import OtelExporter

                self.otel = OtelExporter.from_settings(settings)
                self.tracer.row_observers.append(self.otel.on_row)
        else:
            self.store, self.writer, self.prices, self.tracer = shared.store, shared.writer, shared.prices, shared.tracer
            self.otel = shared.otel
            if embeddings is None and shared._embeddings is not None and shared.settings.embed_model == settings.embed_model:
                embeddings = shared._embeddings
        self._chat = chat_model
        self._embeddings = embeddings
        self._reranker = reranker
        self._reranker_loaded = reranker is not None
        self._skip_reason: str | None = None
        self._lock = threading.Lock()
        self._collection: CollectionInfo | None = None
        self._rag = None

    # -- lazily loaded parts --------------------------------------------------------------------
    def embeddings(self) -> LocalEmbeddings:
        with self._lock:
            if self._embeddings is None:
                self._embeddings = load_embeddings(self.settings.embed_model, EmbeddingCache(self.settings.cache_path),
                                                   batch_size=self.settings.embed_batch_size)
            return self._embeddings

    def reranker(self) -> tuple[Reranker | None, str | None]:
        with self._lock:
            if not self._reranker_loaded:
                self._reranker, self._skip_reason = load_reranker(self.settings.rerank_model, self.settings)
                self._reranker_loaded = True
            return self._reranker, self._skip_reason

    def chat_model(self):
        with self._lock:
            if self._chat is None:
                from rag_app.llm import build_chat_model

                self._chat = build_chat_model(self.settings)
            return self._chat

    @property
    def uses_llm(self) -> bool:
        return self._chat is not None or self.settings.use_llm

    @property
    def collection(self) -> CollectionInfo:
        if self._collection is None:
            info = self.store.info(self.settings.collection)
            if info is None:
                raise self.store.missing(self.settings.collection)
            if self.store.count(self.settings.collection) == 0:  # a store that lost its data answers nothing
                raise self.store.emptied(self.settings.collection)
            self.store.check_tokenizer(info, TOKENIZER_VERSION)
            if info.dense_enabled:
                emb = self.embeddings()
                self.store.check_model(info, emb.model_name, emb.dimension)
            self._collection = info
        return self._collection

    def count_prompt_tokens(self, messages) -> int:
        """Prompt tokens in the unit the configured LLM bills (its own tokenizer, not cl100k)."""
        from rag_app.model_tokens import tokenizer_for

        return tokenizer_for(self.settings.llm_model).count_messages(messages)

    # -- the two jobs ---------------------------------------------------------------------------
    def ask(self, question: str, *, query_id: str | None = None, variant: str | None = None,
            experiment: str | None = None, extra: dict | None = None) -> Answer:
        """`extra`: more query-row fields for the ledger (user_id, session_id, arm, sticky, shadow_of, and
        origin: live | cli | replay | eval | shadow, default cli; comparisons read live rows only)."""
        if not question or not question.strip():
            raise ValueError("question is empty; pass the question text")
        from chains.rag import build_rag

        _ = self.collection  # fail before the chain starts on a missing collection or model mismatch
        if self._rag is None:
            self._rag = build_rag(self)
        query_id = query_id or str(uuid.uuid4())
        config = {"callbacks": [self.tracer], "metadata": {
            "query_id": query_id, "kind": "query", "variant": variant or self.settings.variant,
            "experiment": experiment or self.settings.experiment, "origin": "cli", **(extra or {})}}
        return self._rag.invoke({"question": question.strip()}, config=config)

    def ingest(self, paths: list[Path], *, rebuild: bool = False, progress=None) -> IngestReport:
        from chains.ingestion import run_ingestion

        if rebuild:
            self.store.drop(self.settings.collection)
            self._collection = None
        report = run_ingestion(self, paths, progress=progress)
        self._collection = None
        return report

    def close(self) -> None:
        if self._owner:
            self.writer.close()
            self.store.close()
            if self.otel is not None:
                self.otel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
