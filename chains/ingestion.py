"""The ingestion chain: parse_chunk -> embed_documents (vectors + upsert) -> embed_rescore (the rescore
lever's vector of every chunk, when the collection's retrieval uses it), traced like a query so the
ledger shows what indexing cost (embedding tokens, cache hits) under a `kind=ingest` id."""
from __future__ import annotations

import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig

from chains.rag import report, stage, timed
from rag_app.chunking import build_chunker
from rag_app.ingest import prepare_limited
from rag_app.ingest import (FileOutcome, IngestReport, Progress, check_collection, decide_collection,
                                     expand_paths, index_documents, parse_and_chunk, stored_versions,
                                     unchanged_by_hash)
from rag_app.query.levers import embed_lock as rescore_lock
from rag_app.query.levers import levers_for
from rag_app.ingest import fill_rescore_vectors
from rag_app.core import Embedder, Pricer
from rag_app.core import Chunk, ParsedDocument
from rag_app.core import EmbedUsage, StageUsage
from rag_app.models import LocalEmbeddings

if TYPE_CHECKING:  # names for the types only: the chain reaches settings and the store through `app`
    from rag_app.config import Settings
    from rag_app.store import CollectionInfo, VectorStore

Parsed = list[tuple[ParsedDocument, list[Chunk]]]


class IngestApp(Protocol):
    """What the chain reads of the composition root (rag_app.app.RagApp), and no more: a Protocol rather
    than RagApp itself, so chains/ does not import the module that imports it."""

    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> VectorStore: ...
    @property
    def pricer(self) -> Pricer: ...
    @property
    def tracer(self) -> BaseCallbackHandler: ...
    def embeddings(self) -> LocalEmbeddings: ...
    def rescorer(self) -> Embedder | None: ...


def run_ingestion(app: IngestApp, paths: list[Path], *, progress: Progress | None = None,
                  doc_types: tuple[tuple[str, str], ...] = ()) -> IngestReport:
    """`app`: the composition root (rag_app.app.RagApp): settings, store, embedder loader, pricer, tracer.
    `doc_types`: (glob, type) overrides of the document-type classification."""
    s = app.settings
    result = IngestReport()

    def parse_chunk(inp: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        files, missing = expand_paths(inp["paths"])
        result.outcomes.extend(missing)
        chunker = build_chunker(s.chunker, s, app.embeddings() if s.semantic_backend == "embedding" else None,
                                doc_types)
        prepare = partial(prepare_limited, timeout_s=s.parse_timeout_s, max_mb=s.parse_max_mb)
        existing = app.store.info(s.collection)
        unchanged = unchanged_by_hash(stored_versions(app.store, existing.name), doc_types) if existing else None
        (parsed, failed), usage = timed(lambda: (parse_and_chunk(files, chunker, progress, prepare=prepare,
                                                                 unchanged=unchanged),
                                                 StageUsage("parse_chunk", model=f"{chunker.name}@{chunker.version}")))
        result.outcomes.extend(failed)
        report(app.pricer, (usage,), config)
        return {"parsed": parsed, "chunker": chunker}

    def embed_documents(inp: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        parsed = inp["parsed"]
        info = app.store.info(s.collection)
        embeddings = None
        if info is None and parsed:
            embeddings = app.embeddings()
            info = decide_collection(s.collection, inp["chunker"], embeddings,
                                     [c for _, cs in parsed for c in cs], s.embed_max_unk_rate)
            app.store.create(info)
        elif info is not None:
            embeddings = check_collection(app.store, info, app.embeddings)
        result.collection = info
        if info is None:
            report(app.pricer, (StageUsage("embed_documents", status="skipped", error="no document produced chunks"),),
                   config)
            return inp
        (outcomes, stats), usage = timed(lambda: _indexed(app.store, info, parsed, embeddings, progress))
        result.outcomes.extend(outcomes)
        result.embed = stats
        result.embed_model = info.embed_model
        report(app.pricer, (usage,), config)
        return inp

    def embed_rescore(inp: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        info = result.collection
        if info is None or s.rescore_vectors != "ingest" or "rescore" not in levers_for(s.retrieval_levers, info):
            return inp  # nothing to do, and no model loaded for it
        rescorer = app.rescorer()
        if rescorer is None:  # could not load (warned): questions fall back to BM25 and say so
            return inp
        stats, usage = timed(lambda: _rescore_vectors(app.store, info, rescorer, s.rescore_model, progress,
                                                      s.rescore_unit))
        result.rescore = stats
        report(app.pricer, (usage,), config)
        return inp

    chain = (stage("parse_chunk", parse_chunk) | stage("embed_documents", embed_documents)
             | stage("embed_rescore", embed_rescore)).with_config(run_name="rag_ingest")
    chain.invoke({"paths": paths, "question": None}, config={"callbacks": [app.tracer], "metadata": {
        "query_id": f"ingest-{uuid.uuid4()}", "kind": "ingest", "variant": s.variant,
        "experiment": s.experiment}})
    return result


def _rescore_vectors(store: VectorStore, info: CollectionInfo, rescorer: Embedder, model: str,
                     progress: Progress | None, unit: str = "chunk") -> tuple[EmbedUsage, StageUsage]:
    stats = fill_rescore_vectors(store, info.name, rescorer, progress, lock=rescore_lock, unit=unit)
    return stats, StageUsage("embed_rescore", model=model, input_tokens=stats.tokens, cache_hits=stats.cache_hits,
                             cache_misses=stats.cache_misses, billing="shadow", price_basis="embed")


def _indexed(store: VectorStore, info: CollectionInfo, parsed: Parsed, embeddings: LocalEmbeddings | None,
             progress: Progress | None) -> tuple[tuple[list[FileOutcome], EmbedUsage], StageUsage]:
    outcomes, stats = index_documents(store, info, parsed, embeddings, progress)
    usage = StageUsage("embed_documents", model=info.embed_model, status="ok" if info.dense_enabled else "skipped",
                       input_tokens=stats.tokens, cache_hits=stats.cache_hits, cache_misses=stats.cache_misses,
                       billing="shadow", price_basis="embed",
                       error=None if info.dense_enabled else info.dense_disabled_reason)
    return (outcomes, stats), usage
