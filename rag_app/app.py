"""RagApp: the composition root. It opens what one process needs (store, ledger writer, price table,
tracer, OTel exporter), builds each part of the query path once (a `Lazy` provider over the part's own
loader: rag_app/core/lazy.py), and hands them to the query path (`pipeline()`), which `rag ask`,
`rag serve` and `rag eval` all run through chains/rag.py. A question asks the parts, never this module.

This module and the front doors (cli.py, service/, the report commands) are where the domain meets
the observer: stages and chains never import `tracing`; they get a Pricer and ReplyStats from here.

Models load on first use (inside their provider) so that `rag report` never pays for torch, and a
BM25-only collection never loads an embedder; `warm_up` loads them before a service's first question. A RagApp that fails while opening releases everything it had opened already (a
locked store stays lockable by the next try in the same process).
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from rag_app.config import Settings
from rag_app.core import Lazy
from rag_app.models import LocalEmbeddings, cached_embeddings
from rag_app.core import ConfigError
from rag_app.ingest import IngestReport, opened_collection
from rag_app.config import LedgerURLError
from rag_app.models import build_chat_model, build_rewrite_model
from rag_app.query.levers import rescore_embeddings
from rag_app.query import Pipeline, QueryConfig
from rag_app.core import Reranker
from rag_app.models import load_reranker
from rag_app.query import Scope
from rag_app.store import CollectionInfo, VectorStore, open_store
from rag_app.core import Answer
from tracing.observe import CostTracer
from tracing.pricing import LedgerPricer
from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable
from tracing.ledger import LedgerReplyStats
from tracing.ledger import queries_row

log = logging.getLogger(__name__)


class RagApp:
    # opened by _open(), or shared with another RagApp (a service's variants share one of each)
    store: VectorStore
    writer: LedgerWriter
    prices: PriceTable
    tracer: CostTracer
    pricer: LedgerPricer
    reply_stats: LedgerReplyStats
    otel: Any
    judge: Any  # rag_app.quality.judge.JudgeWorker when RAG_JUDGE_MODEL is set, else None
    _embeddings: Lazy[LocalEmbeddings]

    def __init__(self, settings: Settings, *, chat_model: Any = None, reranker: Reranker | None = None,
                 embeddings: LocalEmbeddings | None = None, shared: RagApp | None = None):
        """`shared`: another RagApp whose store, ledger writer and tracer this one reuses (variants
        of one service share them: an embedded store has one owner per process)."""
        self.settings = settings
        if settings.rewrites:  # the rewrite lever's prompt: a missing version fails here, not on a question
            from rag_app.query import check_rewrite_prompt

            check_rewrite_prompt(settings.query_rewrite_prompt_version)
        self._owner = shared is None
        if shared is None:
            self._open(settings)
        else:
            self.store, self.writer, self.prices, self.tracer = shared.store, shared.writer, shared.prices, shared.tracer
            self.pricer, self.reply_stats, self.otel = shared.pricer, shared.reply_stats, shared.otel
            self.judge = shared.judge
        self._build_parts(settings, shared, chat_model, reranker, embeddings)
        self._rag: Any = None
        self._stopping = threading.Event()  # tells a background rescore pass to stop at its next batch

    def _open(self, settings: Settings) -> None:
        with ExitStack() as opened:  # a failure below closes whatever was opened before it
            self.prices = PriceTable.load(settings.price_overrides, base_url=settings.openai_base_url)  # fails before any lock
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            self.store = open_store(settings)
            opened.callback(self.store.close)
            try:
                self.writer = LedgerWriter(settings.ledger, max_buffer=settings.ledger_buffer_rows,
                                           spill_dir=settings.ledger_spill_dir or settings.data_dir / "spill",
                                           spill_fallback_dir=settings.ledger_spill_fallback_dir,
                                           direct_timeout_s=settings.ledger_direct_timeout_s)
            except LedgerURLError as e:  # wrong password / database: no retry fixes it
                raise ConfigError(str(e)) from None
            opened.callback(self.writer.close)
            self.pricer = LedgerPricer.from_settings(settings, self.prices)
            self.reply_stats = LedgerReplyStats(settings.ledger)
            self.tracer = CostTracer(self.writer, self.pricer, llm_max_tokens=settings.llm_max_tokens)
            self.otel = None
            if settings.otel_endpoint:  # spans built from the rows the tracer hands the ledger
                from tracing.observe import OtelExporter

                self.otel = OtelExporter.from_settings(settings)
                opened.callback(self.otel.close)
                self.tracer.row_observers.append(self.otel.on_row)
            self.judge = self._open_judge(settings)
            if self.judge is not None:
                opened.callback(self.judge.close)
            opened.pop_all()

    def _open_judge(self, settings: Settings) -> Any:
        """The LLM judge's worker when RAG_JUDGE_MODEL is set (its prompt checked now), else None."""
        if not settings.judge_model:
            return None
        from rag_app.models import build_judge_model
        from rag_app.quality import Judge, JudgeWorker

        judge = Judge(build_judge_model(settings), model=settings.judge_model,
                      prompt_version=settings.judge_prompt_version, max_retries=settings.llm_max_retries,
                      retry_base_s=settings.llm_retry_base_s, max_tokens=settings.judge_max_tokens,
                      callbacks=[self.tracer])
        return JudgeWorker(judge, share=settings.judge_sample, queue_size=settings.judge_queue)

    # -- the parts, built once; models load inside their provider on first use -------------------------
    def _build_parts(self, settings: Settings, shared: RagApp | None, chat_model: Any, reranker: Reranker | None,
                     embeddings: LocalEmbeddings | None) -> None:
        """Each part of the query path as a provider over its own loader. A variant shares the base's dense
        embedder when it reads the same model (one load per process); a part handed in is used as given (a
        chat model handed in answers the rewrite too)."""
        same_embedder = shared is not None and (shared.settings.embed_model, shared.settings.cache_path,
                                                shared.settings.embed_batch_size) == (
            settings.embed_model, settings.cache_path, settings.embed_batch_size)
        self._embeddings = (Lazy.of(embeddings) if embeddings is not None
                            else shared._embeddings if shared is not None and same_embedder
                            else Lazy(partial(cached_embeddings, settings.embed_model, settings.cache_path,
                                              settings.embed_batch_size)))
        self._reranker: Lazy[tuple[Reranker | None, str | None]] = (
            Lazy.of((reranker, None)) if reranker is not None else Lazy(partial(load_reranker, settings.rerank_model,
                                                                               settings)))
        self._chat: Lazy[Any] = Lazy.of(chat_model) if chat_model is not None else Lazy(partial(build_chat_model, settings))
        self._rewrite_chat: Lazy[Any] = (Lazy.of(chat_model) if chat_model is not None
                                         else Lazy(partial(build_rewrite_model, settings)))
        # checked against the models when first asked; asked again after an ingest changes it (`reset`)
        self._collection: Lazy[CollectionInfo] = Lazy(partial(opened_collection, self.store, settings.collection,
                                                              self._embeddings.get))
        self.uses_llm: bool = chat_model is not None or settings.use_llm

    def _rescorer(self, required: bool) -> Lazy[LocalEmbeddings | None]:
        """The rescore lever's embedder (rag_app/query/levers: loaded once per process); None when it cannot
        load, unless `required` (evaluation), where the error is raised."""
        return Lazy(partial(rescore_embeddings, self.settings.rescore_model, self.settings.cache_path,
                            required=required))

    def embeddings(self) -> LocalEmbeddings:
        return self._embeddings.get()

    def reranker(self) -> tuple[Reranker | None, str | None]:
        return self._reranker.get()

    def rescorer(self, required: bool = False) -> LocalEmbeddings | None:
        return self._rescorer(required).get()

    def fill_rescore_vectors_in_background(self) -> threading.Thread | None:
        """`rag serve` at start-up: finish an embedding pass that ingest did not (interrupted, or a
        collection from before 0.5.0) in a daemon thread, a small batch at a time, so the questions
        asked meanwhile wait at most one batch for the embedder and are answered from the vectors that
        exist (their retrieve rows say how many candidates had none). None when there is nothing to do."""
        from rag_app.query.levers import embed_lock, levers_for
        from rag_app.ingest import fill_rescore_vectors

        info = self.store.info(self.settings.collection)
        if (info is None or self.settings.rescore_vectors != "ingest"
                or "rescore" not in levers_for(self.settings.retrieval_levers, info)):
            return None

        def run() -> None:
            try:
                rescorer = self.rescorer()
                if rescorer is None:
                    return
                done = fill_rescore_vectors(self.store, info.name, rescorer, batch=8, lock=embed_lock,
                                            stop=self._stopping, unit=self.settings.rescore_unit)
                if done.cache_misses:
                    log.info("rescore vectors: %d chunks embedded in the background", done.cache_misses)
                    self.store.forget_derived(info.name)  # `wide`'s matrix was built from fewer vectors
            except Exception as e:  # a background pass never takes the service down; the next ingest resumes it
                log.warning("background rescore pass stopped: %s", e)

        thread = threading.Thread(target=run, name="rescore-pass", daemon=True)
        thread.start()
        return thread

    def chat_model(self) -> Any:
        return self._chat.get()

    def rewrite_model(self) -> Any:
        """The rewrite lever's chat model (rag_app/models/llm.py build_rewrite_model), built on first use."""
        return self._rewrite_chat.get()

    @property
    def collection(self) -> CollectionInfo:
        return self._collection.get()

    def checked_collection(self, name: str) -> CollectionInfo:
        """`name`'s description, checked as RAG_COLLECTION's is (ingest/indexing.py opened_collection)."""
        return opened_collection(self.store, name, self._embeddings.get)

    # -- the query path ---------------------------------------------------------------------------
    def query_config(self) -> QueryConfig:
        return QueryConfig.from_settings(self.settings).with_(use_llm=self.uses_llm)

    def pipeline(self, config: QueryConfig | None = None, collection: CollectionInfo | None = None,
                 rescore_required: bool = False) -> Pipeline:
        """The query path over this app's parts (the providers themselves: a question asks them, never this
        app); `config` and `collection` default to the settings' (rag eval passes its own collection and
        retriever)."""
        return Pipeline(config or self.query_config(), self.store,
                        Lazy.of(collection) if collection is not None else self._collection,
                        self._embeddings, self._rescorer(rescore_required), self._reranker, self._chat,
                        self.pricer, self.reply_stats, self._rewrite_chat)

    def ask(self, question: str, *, query_id: str | None = None, variant: str | None = None,
            experiment: str | None = None, extra: dict | None = None, scope: Scope | None = None,
            callbacks: Sequence[Any] = ()) -> Answer:
        """`extra`: more query-row fields for the ledger (user_id, session_id, arm, sticky, shadow_of, and
        origin: live | cli | replay | eval | shadow, default cli; comparisons read live rows only).
        `scope`: documents to search within (an unknown name raises UnknownDocument, listing close ones)."""
        if not question or not question.strip():
            raise ValueError("question is empty; pass the question text")
        from chains import build_rag

        self._collection.get()  # fail before the chain starts on a missing collection or model mismatch
        if self._rag is None:
            self._rag = build_rag(self.pipeline())
        query_id = query_id or str(uuid.uuid4())
        metadata = {"query_id": query_id, "kind": "query", "variant": variant or self.settings.variant,
                    "experiment": experiment or self.settings.experiment, "origin": "cli",
                    "collection": self.settings.collection, **(extra or {})}
        config = {"callbacks": [self.tracer, *callbacks], "metadata": metadata}
        answer: Answer = self._rag.invoke({"question": question.strip(), "scope": scope}, config=config)
        if self.judge is not None and metadata["origin"] == "live":  # after the answer: never its latency
            from rag_app.quality import JudgeJob

            self.judge.offer(JudgeJob.of(answer, metadata["variant"], metadata["experiment"],
                                         metadata.get("user_id"), metadata.get("api_key_id")))
        return answer

    def warm_up(self, origin: str = "cli") -> float | None:
        """Load what the query path will use (the collection's checks and dense embedder, BM25's
        dictionary, the token counters, the rescore lever's embedder, the charge lever's index, the
        document catalogue, the reranker, the chat model) before the first question, so that question's
        latency is its own. The load time is booked apart, as a `kind=startup` ledger row (reports and
        comparisons count `kind=query` rows only). None, and nothing booked, when there is no collection."""
        import time

        from langchain_core.callbacks.manager import CallbackManager

        from rag_app.query import colloquial

        from rag_app.text import sparse
        from rag_app.core import utcnow
        from rag_app.query import charge_index
        from rag_app.core import RagError
        from rag_app.query.levers import levers_for
        from rag_app.models import tokenizer_for
        from rag_app.query import legs_for
        from rag_app.query import catalogue
        from rag_app.text import encoding
        from rag_app.core import StageUsage

        t0, started = time.perf_counter(), utcnow()
        try:
            info = self.collection
        except RagError:
            return None
        config = self.query_config()
        levers = levers_for(config.retrieval_levers, info)
        # each of these was loaded by the first question of a process: `rag ask`'s one question took
        # 1.7 s to retrieve and 0.75 s to answer extractively, against ~10 ms and ~5 ms once loaded
        if legs_for(config.retriever, info)[1]:
            sparse.warm()  # jieba's dictionary (BM25's question terms)
        encoding()  # cl100k: packing and excerpts count with it
        tokenizer_for(config.llm_model)  # the prompt's count, for its cost or shadow cost (o200k: ~1.5 s)
        catalogue(self.store, info.name)  # the documents a question or scope names (`named`, --doc)
        if self._rag is None:  # the chain's own imports (langchain_core's runnables: ~1.5 s of CPU here)
            from chains import build_rag

            self._rag = build_rag(self.pipeline())
        # the price table's first lookup (~0.4 s), else inside the first question's row
        self.pricer.price(StageUsage("generate", model=config.llm_model, billing="shadow", price_basis="llm"))
        CallbackManager.configure()  # its first call imports the tracers a run may need (~0.1 s)
        if not config.use_llm:  # the extractive answer's shadow reply: the ledger's mean, read once a minute
            self.reply_stats.mean_output_tokens(config.llm_model)
        if "rescore" in levers:
            from rag_app.query import one_thread

            with one_thread():  # finds the BLAS library once (threadpoolctl), else inside the first question
                pass
            rescorer = self.rescorer()
            if "wide" in levers and rescorer is not None:  # the whole collection's vectors, read once (~0.3 s)
                from rag_app.query import query_adapter
                from rag_app.query.levers import wide_matrix

                query_adapter(config)  # the adapter's file, loaded once
                wide_matrix(self.store, info.name, rescorer, False, config.rescore_unit)  # as asked
        if "charge" in levers:  # the criminal law's paragraphs: ~150 ms, else paid by the first case question
            charge_index(self.store, info.name)
        if "colloquial" in levers:
            colloquial.table()
        self.reranker()
        if self.uses_llm:
            self.chat_model()
        if config.rewrites:
            self.rewrite_model()
        row = queries_row(f"startup-{uuid.uuid4()}", "startup", "ok", started, t0, variant=self.settings.variant,
                          origin=origin)
        self.writer.put("queries", row)
        return row["latency_ms"]

    def ingest(self, paths: list[Path], *, rebuild: bool = False, progress: Any = None,
               doc_types: tuple[tuple[str, str], ...] = ()) -> IngestReport:
        """`doc_types`: (glob, type) pairs that override the document-type classification per file."""
        from chains import run_ingestion

        self.require_space(_input_bytes(paths))  # before the first byte reaches the store
        if rebuild:
            self.store.drop(self.settings.collection)
            self._collection.reset()
        report = run_ingestion(self, paths, progress=progress, doc_types=doc_types)
        self._collection.reset()
        return report

    def ingest_uploads(self, paths: list[Path]) -> IngestReport:
        """Ingest uploaded files; an upload named like exactly one document ingested from elsewhere (an
        amended law uploaded under the name `rag ingest folder/` gave it) replaces that document, so the
        answers cite one text, not both. Several documents of that name: none is guessed; the outcome
        warns and all are kept."""
        before = self.store.documents(self.settings.collection) if self.store.info(self.settings.collection) else []
        report = self.ingest(paths)
        for o in report.outcomes:
            if o.status not in ("written", "unchanged"):
                continue
            mine = Path(o.path).resolve()
            same = [d for d in before if d.get("source_path") and Path(d["source_path"]).name == mine.name
                    and Path(d["source_path"]).resolve() != mine]
            if len(same) == 1:
                self.store.replace_document(self.settings.collection, same[0]["doc_id"], "", [])  # all its chunks out
                o.replaced = {"doc_id": same[0]["doc_id"], "source": Path(same[0]["source_path"]).name}
            elif len(same) > 1:
                note = (f"{len(same)} documents ingested from elsewhere are also named {mine.name}: all kept beside "
                        "this upload (re-ingest their folder without the one this replaces)")
                o.warning = f"{o.warning}; {note}" if o.warning else note
        if any(o.replaced for o in report.outcomes):
            self.store.commit(self.settings.collection)
            self._collection.reset()
        return report

    def documents_named(self, file_name: str) -> list[tuple[str, str]]:
        """(doc_id, source path) of each document of the collection whose file is named `file_name`: what
        an upload of that name would replace (a previous upload of it, or a document ingested from
        elsewhere under that name; see ingest_uploads)."""
        if self.store.info(self.settings.collection) is None:
            return []
        from rag_app.query import catalogue

        return [(d.doc_id, d.source_path) for d in catalogue(self.store, self.settings.collection).docs
                if d.source_path and d.file_name == file_name]

    def require_space(self, new_bytes: int) -> None:
        """DiskFull (nothing written) unless the data dir's disk can take `new_bytes` of documents into
        the embedded store (rag_app/store/space.py says what that needs). A Qdrant server keeps its own
        disk: only the copies kept under the data dir count then."""
        from rag_app.store import require_free, write_need

        embedded = getattr(self.store, "_dir", None) is not None
        need = write_need(new_bytes) if embedded else 2 * new_bytes
        require_free(self.settings.data_dir, need, f"adding {new_bytes:,} bytes of documents")

    def close(self) -> None:
        self._stopping.set()
        if self._owner:
            if self.judge is not None:  # its last rows go through the writer: before the writer closes
                self.judge.close()
            self.writer.close()
            self.reply_stats.close()
            self.store.close()
            if self.otel is not None:
                self.otel.close()

    def __enter__(self) -> RagApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _input_bytes(paths: list[Path]) -> int:
    """What the documents to ingest take on disk (files, and the files under folders)."""
    total = 0
    for p in map(Path, paths):
        try:
            if p.is_dir():
                total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            elif p.exists():
                total += p.stat().st_size
        except OSError:
            pass  # unreadable: its own error comes with its outcome
    return total
