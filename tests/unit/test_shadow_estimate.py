"""Extractive answers price what an LLM reply would have cost, prompt *and* output, and say how."""
from __future__ import annotations

import sqlite3

from langchain_core.callbacks import dispatch_custom_event
from langchain_core.runnables import RunnableLambda

from tracing.cost_tracer import USAGE_EVENT, CostTracer
from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable


def extractive_generate(tracer, qid):
    def generate(inp, config):
        dispatch_custom_event(USAGE_EVENT, {"status": "skipped", "model": "gpt-4o-mini", "input_tokens": 1000,
                                            "shadow_llm": True}, config=config)
        return "answer"
    stage = RunnableLambda(generate).with_config(run_name="generate", metadata={"stage": "generate"})
    chain = (RunnableLambda(lambda x: x) | stage).with_config(run_name="rag_query")  # the query root, then the stage
    chain.invoke({}, {"callbacks": [tracer], "metadata": {"query_id": qid}})
    tracer.writer.flush()


def row(path, qid):
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    r = dict(conn.execute("SELECT * FROM stage_calls WHERE query_id = ? AND stage = 'generate'", (qid,)).fetchone())
    conn.close()
    return r


def test_no_history_uses_max_tokens_as_an_upper_bound(tmp_path):
    writer = LedgerWriter(tmp_path / "l.sqlite")
    tracer = CostTracer(writer, PriceTable(), llm_max_tokens=512)
    extractive_generate(tracer, "q1")
    r = row(tmp_path / "l.sqlite", "q1")
    assert (r["input_tokens"], r["output_tokens"], r["cost_nano_usd"]) == (1000, 512, 0)
    assert r["shadow_cost_nano_usd"] == 1000 * 150 + 512 * 600  # gpt-4o-mini $0.15 in, $0.60 out per million
    assert r["usage_source"] == "estimated:o200k_base" and "upper bound" in r["estimate_note"]
    writer.close()


def test_history_gives_the_models_mean_reported_output(tmp_path):
    writer = LedgerWriter(tmp_path / "l.sqlite")
    for out, source in ((100, "provider"), (200, "provider"), (5000, "estimated:o200k_base")):
        writer.put("stage_calls", {"query_id": "old", "stage": "generate", "status": "ok", "model": "gpt-4o-mini",
                                   "output_tokens": out, "usage_source": source, "started_at": "t"})
    writer.flush()
    tracer = CostTracer(writer, PriceTable(), llm_max_tokens=512)
    extractive_generate(tracer, "q2")
    r = row(tmp_path / "l.sqlite", "q2")
    assert r["output_tokens"] == 150  # mean of the two *reported* replies; estimates are not evidence
    assert r["shadow_cost_nano_usd"] == 1000 * 150 + 150 * 600
    assert "mean of gpt-4o-mini's reported replies" in r["estimate_note"]
    writer.close()


def test_every_stage_row_says_where_its_counts_came_from(tmp_path):
    writer = LedgerWriter(tmp_path / "l.sqlite")
    tracer = CostTracer(writer, PriceTable(), embed_rate_per_1k=0.00002, llm_max_tokens=512)

    def embed(inp, config):
        dispatch_custom_event(USAGE_EVENT, {"model": "bge", "input_tokens": 20, "rate": "embed"}, config=config)
        return inp

    def retrieve(inp, config):
        dispatch_custom_event(USAGE_EVENT, {"model": "qdrant:bm25"}, config=config)
        return inp
    stages = [RunnableLambda(f).with_config(run_name=n, metadata={"stage": n})
              for n, f in (("embed_query", embed), ("retrieve", retrieve))]
    (RunnableLambda(lambda x: x) | stages[0] | stages[1]).with_config(run_name="rag_query").invoke(
        {}, {"callbacks": [tracer], "metadata": {"query_id": "q3"}})
    writer.flush()
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    assert dict(conn.execute("SELECT stage, usage_source FROM stage_calls")) == {"embed_query": "local", "retrieve": "local"}
    conn.close()
    writer.close()
