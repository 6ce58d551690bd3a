"""The one row mapper (tracing/ledger/rows.py): every field of a StageUsage lands in a ledger column or decides
its price, and a row written through the real writer reads back with every value it was given."""
from __future__ import annotations

import dataclasses
import json
import sqlite3
import time

import pytest

from rag_app.core.usage import AttemptInfo, Price, StageUsage
from tracing.pricing import LedgerPricer
from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable
from tracing.ledger.rows import (ATTEMPT_COLUMN_OF, COLUMN_OF, PRICE_COLUMN_OF, PRICING_INPUTS, UnpricedUsage, queries_row,
                          stage_row)

FULL = StageUsage(
    stage="generate", model="gpt-4o-mini", status="timeout", input_tokens=1234, output_tokens=56, cached_tokens=300,
    cache_write_tokens=20, reasoning_tokens=7, cache_hits=3, cache_misses=4, usage_source="estimated:o200k_base",
    billing="billed", price_basis="llm", search_units=2, error="ReadTimeout: cut", note="timeout: 56 output tokens",
    context_budget_tokens=1000, context_tokens=987, started_at="2026-12-01T01:02:03.004+00:00",
    ended_at="2026-12-01T01:02:05.004+00:00", latency_ms=2000.5,
    attempt=AttemptInfo("call-1", 2, "attempt-2", possibly_billed=True, output_at_risk_tokens=456),
    raw={"prompt_tokens": 1234, "prompt_tokens_details": {"cached_tokens": 300}},
    price=Price(111, 222, "v-test", "override", "openai"))


def test_every_field_is_a_column_or_a_price_input():
    usage_fields = {f.name for f in dataclasses.fields(StageUsage)}
    assert usage_fields == set(COLUMN_OF) | set(PRICING_INPUTS) | {"attempt", "price"}
    assert {f.name for f in dataclasses.fields(AttemptInfo)} == set(ATTEMPT_COLUMN_OF)
    assert {f.name for f in dataclasses.fields(Price)} == set(PRICE_COLUMN_OF)


def _written(tmp_path, table: str, row: dict) -> dict:
    """The row as the real writer stored it in a fresh SQLite ledger."""
    writer = LedgerWriter(tmp_path / "l.sqlite")
    writer.put(table, row)
    assert writer.flush()
    writer.close()
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    conn.row_factory = sqlite3.Row
    stored = dict(conn.execute(f"SELECT * FROM {table}").fetchone())
    conn.close()
    return stored


def test_a_written_row_reads_back_with_every_value(tmp_path):
    row = stage_row(FULL, query_id="q1", variant="v", experiment="e")
    stored = _written(tmp_path, "stage_calls", row)
    expected = {col: getattr(FULL, f) for f, col in COLUMN_OF.items()}
    expected["usage_raw"] = json.dumps(FULL.raw, ensure_ascii=False, sort_keys=True)
    expected.update({col: getattr(FULL.attempt, f) for f, col in ATTEMPT_COLUMN_OF.items()})
    expected["possibly_billed"] = 1
    expected.update({col: getattr(FULL.price, f) for f, col in PRICE_COLUMN_OF.items()})
    expected.update({"query_id": "q1", "variant": "v", "experiment": "e"})
    assert {k: stored[k] for k in expected} == expected
    assert set(row) <= set(stored)  # no key the schema lacks (it would be quarantined)


@pytest.mark.parametrize("field,other", [("billing", "shadow"), ("price_basis", "rerank_http"), ("search_units", 5),
                                         ("explicit_cache", True)])
def test_each_price_input_changes_the_price(field, other):
    pricer = LedgerPricer(PriceTable(), rerank_price_usd="0.002", rerank_price_unit="search")
    model = "qwen-plus" if field == "explicit_cache" else "gpt-4o-mini"  # Qwen prices an explicit cache's hits lower
    base = dataclasses.replace(FULL, price=None, price_basis="rerank_http" if field == "search_units" else "llm",
                               model=model, explicit_cache=None, cache_write_tokens=0)  # a write alone means explicit
    changed = dataclasses.replace(base, **{field: other})
    assert pricer.price(base).price != pricer.price(changed).price


def test_an_unpriced_usage_is_refused_not_written_as_free():
    with pytest.raises(UnpricedUsage):
        stage_row(dataclasses.replace(FULL, price=None), query_id="q1")


def test_a_queries_row_reads_back_with_every_value(tmp_path):
    """The one `queries` mapper (the tracer, an answer-cache hit and a start-up row all write through it)."""
    t0 = time.perf_counter() - 0.25  # started a quarter of a second ago
    row = queries_row("q1", "query", "ok", "2026-12-01T01:02:03.004+00:00", t0, question="q?", origin="cache",
                      cache_hit=1, saved_cost_nano_usd=1234)
    assert row["latency_ms"] >= 250 and row["ended_at"] > row["started_at"]
    stored = _written(tmp_path, "queries", row)
    assert {k: stored[k] for k in row} == row
