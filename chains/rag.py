"""The query chain: [rewrite ->] embed_query -> retrieve -> rerank -> generate (pack + generate), each a named
Runnable stage whose `metadata["stage"]` the CostTracer keys on. Wiring only: the work is in
rag_app/query/stages.py. Each stage's `StageUsage` is timed and priced here, once, handed to the tracer as
the custom event `USAGE_EVENT` and kept on the `Answer`, so what a front door shows is what the ledger
holds.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from langchain_core.callbacks import dispatch_custom_event
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from rag_app.query import stages
from rag_app.core import utcnow
from rag_app.core import LLMError
from rag_app.query import Pipeline
from rag_app.core import Pricer
from rag_app.quality import quality_of
from rag_app.query import Scope
from rag_app.query import Retrieved
from rag_app.core import Answer, ScoredChunk
from rag_app.core import USAGE_EVENT, StageUsage

R = TypeVar("R")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueryState:
    """What has been worked out so far for one question, passed from stage to stage."""

    query_id: str
    question: str
    scope: Scope | None = None  # documents the caller restricts the question to
    rewritten: str = ""  # the rewrite lever's words (RAG_QUERY_REWRITE), added to the question's for retrieval
    query_vector: list[float] | None = None
    retrieved: Retrieved | None = None
    ranked: tuple[ScoredChunk, ...] = ()
    usage: tuple[StageUsage, ...] = ()


def stage(name: str, fn: Callable[[Any, RunnableConfig], Any]) -> Runnable[Any, Any]:
    return RunnableLambda(fn).with_config(run_name=name, metadata={"stage": name})


def report(pricer: Pricer, usages: tuple[StageUsage, ...], config: RunnableConfig) -> tuple[StageUsage, ...]:
    """Price each usage once and hand it to whatever observes this run (the CostTracer writes it)."""
    priced = tuple(pricer.price(u) for u in usages)
    for u in priced:
        dispatch_custom_event(USAGE_EVENT, u, config=config)
    return priced


def timed(work: Callable[[], tuple[R, StageUsage]]) -> tuple[R, StageUsage]:
    started, t0 = utcnow(), time.perf_counter()
    result, usage = work()
    return result, usage.timed(started, utcnow(), round((time.perf_counter() - t0) * 1000, 3))


def build_rag(pipeline: Pipeline) -> Runnable[dict[str, Any], Answer]:
    """`chain.invoke({"question": ..., "scope": Scope?}, config)` -> Answer, with `metadata["query_id"]`
    naming the query."""
    cfg = pipeline.config

    def start(inp: dict[str, Any], config: RunnableConfig) -> QueryState:
        query_id = (config.get("metadata") or {}).get("query_id") or str(uuid.uuid4())
        scope = inp.get("scope")
        return QueryState(str(query_id), str(inp["question"]), scope if isinstance(scope, Scope) else None)

    def rewrite(q: QueryState, config: RunnableConfig) -> QueryState:
        chat_model = pipeline.rewrite_model or pipeline.chat_model
        try:
            words, usages = stages.rewrite(q.question, config=cfg, chat_model=chat_model.get, run_config=config)
        except Exception as e:  # a rewrite never fails the query: it is searched as asked, and its row says why
            log.exception("rewrite failed for query %s; searching the question as asked", q.query_id)
            usages = (StageUsage(stages.REWRITE_STAGE, status="error", error=f"{type(e).__name__}: {e}"[:500],
                                 note="the question was searched as asked"),)
            return replace(q, usage=q.usage + report(pipeline.pricer, usages, config))
        return replace(q, rewritten=words, usage=q.usage + report(pipeline.pricer, usages, config))

    def embed_query(q: QueryState, config: RunnableConfig) -> QueryState:
        vector, usage = timed(lambda: stages.embed_query(q.question, pipeline.collection.get(), cfg, pipeline.embedder.get,
                                                         q.rewritten))
        return replace(q, query_vector=vector, usage=q.usage + report(pipeline.pricer, (usage,), config))

    def retrieve(q: QueryState, config: RunnableConfig) -> QueryState:
        found, usage = timed(lambda: stages.retrieve(q.question, q.query_vector, store=pipeline.store,
                                                     info=pipeline.collection.get(), config=cfg,
                                                     rescorer=pipeline.rescorer.get, scope=q.scope,
                                                     rewritten=q.rewritten))
        return replace(q, retrieved=found, usage=q.usage + report(pipeline.pricer, (usage,), config))

    def rerank(q: QueryState, config: RunnableConfig) -> QueryState:
        reranker, reason = pipeline.reranker.get()
        candidates = q.retrieved.candidates if q.retrieved else ()
        ranked, usage = timed(lambda: stages.rerank(q.question, candidates, reranker, config=cfg, skip_reason=reason))
        return replace(q, ranked=tuple(ranked), usage=q.usage + report(pipeline.pricer, (usage,), config))

    def generate(q: QueryState, config: RunnableConfig) -> Answer:
        packed, _ = stages.pack(q.ranked, store=pipeline.store, info=pipeline.collection.get(), config=cfg)
        started, t0 = utcnow(), time.perf_counter()
        try:
            made, usages = stages.generate(q.question, packed, config=cfg, chat_model=pipeline.chat_model.get,
                                           reply_stats=pipeline.reply_stats, run_config=config)
        except LLMError as e:  # every attempt is a row; the stage itself has none
            report(pipeline.pricer, e.usages, config)
            raise
        if made.mode == "extractive":  # attempts are timed by their recorder; the shadow row here
            usages = tuple(u.timed(started, utcnow(), round((time.perf_counter() - t0) * 1000, 3)) for u in usages)
        priced = report(pipeline.pricer, usages, config)
        answer = Answer(q.query_id, q.question, made.text, made.citations, made.mode, tuple(packed.contexts),
                        passages=made.passages, usage=q.usage + priced, ranked=q.ranked,
                        levers=q.retrieved.levers if q.retrieved else (),
                        scope=q.retrieved.scope if q.retrieved else None)
        return replace(answer, quality=quality_of(answer))  # the tracer records it on the query's rows

    first = RunnableLambda(start).with_config(run_name="question")
    if cfg.rewrites:  # off (the default): no step, no row
        first = first | stage(stages.REWRITE_STAGE, rewrite)
    chain = (first | stage("embed_query", embed_query)
             | stage("retrieve", retrieve) | stage("rerank", rerank) | stage("generate", generate))
    return chain.with_config(run_name="rag_query")
