"""Extractive answers price what an LLM reply would have cost, prompt *and* output, and say how."""
from __future__ import annotations

import sqlite3

from langchain_core.runnables import RunnableLambda

from chains.rag import report, stage
from rag_app.query.context import PackedContext
from rag_app.query.pipeline import QueryConfig
from rag_app.query.stages import generate
from rag_app.core.usage import StageUsage
from tracing.observe import CostTracer
from tracing.pricing import LedgerPricer
from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable
from tracing.ledger import LedgerReplyStats

EXTRACTIVE = QueryConfig(use_llm=False, llm_model="gpt-4o-mini", llm_max_tokens=512)
NOTHING = PackedContext([], 1000, 0, 0, 0, 0)


def shadow_usage(ledger, config=EXTRACTIVE) -> StageUsage:
    _, (usage,) = generate("劳动合同应当以什么形式订立？", NOTHING, config=config, chat_model=lambda: None,
                           reply_stats=LedgerReplyStats(LedgerWriter(ledger).target))
    return LedgerPricer(PriceTable()).price(usage)


def test_no_history_uses_max_tokens_as_an_upper_bound(tmp_path):
    writer = LedgerWriter(tmp_path / "l.sqlite")
    u = shadow_usage(tmp_path / "l.sqlite")
    assert (u.status, u.output_tokens, u.price.cost_nano, u.billing) == ("skipped", 512, 0, "shadow")
    assert u.price.shadow_nano == u.input_tokens * 150 + 512 * 600  # gpt-4o-mini $0.15 in, $0.60 out per million
    assert u.usage_source == "estimated:o200k_base" and "upper bound" in u.note
    assert u.input_tokens > 20  # the prompt was counted in the model's own unit, not left at 0
    writer.close()


def test_history_gives_the_models_mean_reported_output(tmp_path):
    writer = LedgerWriter(tmp_path / "l.sqlite")
    for out, source in ((100, "provider"), (200, "provider"), (5000, "estimated:o200k_base")):
        writer.put("stage_calls", {"query_id": "old", "stage": "generate", "status": "ok", "model": "gpt-4o-mini",
                                   "output_tokens": out, "usage_source": source, "started_at": "t"})
    writer.flush()
    u = shadow_usage(tmp_path / "l.sqlite")
    assert u.output_tokens == 150  # mean of the two *reported* replies; estimates are not evidence
    assert u.price.shadow_nano == u.input_tokens * 150 + 150 * 600
    assert "mean of gpt-4o-mini's reported replies" in u.note
    writer.close()


def test_no_history_and_no_max_tokens_says_the_output_is_not_estimated(tmp_path):
    writer = LedgerWriter(tmp_path / "l.sqlite")
    u = shadow_usage(tmp_path / "l.sqlite", EXTRACTIVE.with_(llm_max_tokens=None))
    assert u.output_tokens == 0 and "not estimated" in u.note
    writer.close()


def test_every_stage_row_says_where_its_counts_came_from(tmp_path):
    writer = LedgerWriter(tmp_path / "l.sqlite")
    pricer = LedgerPricer(PriceTable(), embed_rate_per_1k=0.00002)
    tracer = CostTracer(writer, pricer, llm_max_tokens=512)

    def embed(inp, config):
        report(pricer, (StageUsage("embed_query", model="bge", input_tokens=20, billing="shadow", price_basis="embed"),),
               config)
        return inp

    def retrieve(inp, config):
        report(pricer, (StageUsage("retrieve", model="qdrant:bm25"),), config)
        return inp
    (RunnableLambda(lambda x: x) | stage("embed_query", embed) | stage("retrieve", retrieve)).with_config(
        run_name="rag_query").invoke({}, {"callbacks": [tracer], "metadata": {"query_id": "q3"}})
    writer.flush()
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    rows = {r[0]: r[1:] for r in conn.execute("SELECT stage, usage_source, cost_nano_usd, shadow_cost_nano_usd "
                                              "FROM stage_calls")}
    assert rows == {"embed_query": ("local", 0, 400), "retrieve": ("local", 0, None)}  # 20 tokens x $0.02/M
    conn.close()
    writer.close()
