from __future__ import annotations

import json
from decimal import Decimal

import pytest

from rag_app.core.errors import ConfigError
from tests.fakes.sql_ledger import SqlLedger
from rag_app.core.money import from_nano, to_nano
from tracing.pricing import PriceTable, rate_quote
from tracing.ledger import percentile


def test_known_model_priced_from_genai_prices():
    q = PriceTable().quote("gpt-4o-mini", 1_000_000, 1_000_000)
    assert q.source == "genai-prices" and q.version.startswith("genai-prices@")
    assert from_nano(q.cost_nano) == Decimal("0.75")  # $0.15 in + $0.60 out per million


def test_unknown_model_is_unpriced_not_zero(caplog):
    q = PriceTable().quote("my-private-llm", 1000, 100)
    assert q.cost_nano is None and q.source == "unpriced"
    assert "unpriced" in caplog.text


def test_override_file(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"version": "house-2026-11", "models": {
        "my-private-llm": {"input_per_mtok": "0.10", "output_per_mtok": "0.40", "cached_input_per_mtok": "0.05"}}}))
    t = PriceTable.load(f)
    q = t.quote("my-private-llm", 1000, 100, cached_tokens=400)
    # 600 * 0.10 + 400 * 0.05 + 100 * 0.40 per million = 0.00012
    assert from_nano(q.cost_nano) == Decimal("0.00012")
    assert q.version.endswith("overrides:house-2026-11") and q.source == "override"
    bad = tmp_path / "bad.json"
    bad.write_text('{"models": {"x": {"input_per_mtok": "1"}}}')
    with pytest.raises(ConfigError, match="bad.json"):
        PriceTable.load(bad)


def test_rate_quote_and_nano_precision():
    # 20 tokens at $0.02 per million would round to 0 micro-dollars; nano keeps it
    q = rate_quote(20, 0.00002, "embed")
    assert q.cost_nano == 400 and to_nano(Decimal("0.0000004")) == 400


def test_percentile_matches_numpy_linear():
    import numpy as np
    xs = [5, 1, 9, 3, 7, 2]
    for p in (0, 50, 95, 100):
        assert percentile(xs, p) == pytest.approx(np.percentile(xs, p))
    assert percentile([], 50) is None


def test_report_on_a_constructed_ledger(tmp_path):
    conn = SqlLedger(tmp_path / "l.sqlite")
    def q(qid, t):
        conn.execute("INSERT INTO queries (query_id, kind, question, variant, status, started_at, latency_ms) "
                     "VALUES (?, 'query', 'q', 'default', 'ok', ?, 10)", (qid, t))
    def s(qid, stage, status, cost, shadow=None, tin=0, tout=0, hits=None, misses=None, source="genai-prices"):
        conn.execute("INSERT INTO stage_calls (query_id, stage, status, cost_nano_usd, shadow_cost_nano_usd, "
                     "input_tokens, output_tokens, cache_hits, cache_misses, price_source, started_at) "
                     "VALUES (?,?,?,?,?,?,?,?,?,?, 't')", (qid, stage, status, cost, shadow, tin, tout, hits, misses, source))
    q("a", "2026-11-29T00:00:01"); q("b", "2026-11-29T00:00:02"); q("c", "2026-11-29T00:00:03")
    s("a", "embed_query", "ok", 0, 100, tin=10, hits=0, misses=1)
    s("a", "generate", "ok", 1000, tin=300, tout=50)
    s("b", "embed_query", "ok", 0, 100, tin=10, hits=1, misses=0)
    s("b", "generate", "retry", 0)
    s("b", "generate", "timeout", 500, tin=300)
    s("b", "generate", "ok", 1000, tin=300, tout=40)
    s("c", "generate", "ok", None, source="unpriced")
    conn.commit()
    rep = conn.report()
    t = rep.totals
    assert t["queries"] == 3
    assert t["cost_usd"] == pytest.approx(2500e-9) and t["cost_is_lower_bound"] is True
    # per-query costs: a=1000, b=1500; c is unpriced: left out of the statistics and counted, never $0
    assert (t["priced_queries"], t["unpriced_queries"]) == (2, 1)
    assert t["cost_per_query_p50_usd"] == pytest.approx(1250e-9)
    assert t["cost_per_query_p95_usd"] == pytest.approx((1000 + 0.95 * 500) * 1e-9)
    assert t["cost_per_1k_queries_usd"] == pytest.approx(1000 * 1250e-9)
    by_id = {r["query_id"]: r for r in rep.queries}
    assert by_id["c"]["cost_usd"] is None and by_id["c"]["unpriced_rows"] == 1
    assert by_id["c"]["generate_cost_usd"] is None and by_id["b"]["cost_usd"] == pytest.approx(1500e-9)
    view = dict(conn.execute("SELECT query_id, cost_nano_usd FROM query_costs").fetchall())
    assert view == {"a": 1000, "b": 1500, "c": None}  # the view itself keeps NULL: no COALESCE to 0
    assert t["retry_timeout_waste_usd"] == pytest.approx(500e-9)
    assert t["retry_timeout_waste_pct"] == 20.0
    assert (t["retries"], t["timeouts"], t["unpriced_rows"]) == (1, 1, 1)
    assert t["embedding_cache_hit_rate"] == 0.5
    assert t["stages"]["generate"]["input_tokens"] == 900 and t["stages"]["generate"]["rows"] == 5
    assert [r["query_id"] for r in rep.queries] == ["c", "b", "a"]
    assert conn.report(last=1).totals["queries"] == 1


def test_tiers_cache_writes_and_layers(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"version": "t1", "models": {
        "long-llm": {"tiers": [
            {"max_input_tokens": 32000, "input_per_mtok": "1", "output_per_mtok": "2", "cache_read_per_mtok": "0.1"},
            {"max_input_tokens": 128000, "input_per_mtok": "2", "output_per_mtok": "4", "cache_write_per_mtok": "2.5"}]},
        "deepseek-chat": {"input_per_mtok": "9", "output_per_mtok": "9"}}}))
    t = PriceTable.load(f)
    # first tier: 30,000 prompt tokens of which 10,000 cache reads; by hand in nano-dollars
    assert t.quote("long-llm", 30_000, 1_000, cached_tokens=10_000).cost_nano == 20_000 * 1000 + 10_000 * 100 + 1_000 * 2000
    # second tier (prompt above 32K): cache writes at the premium, reads at the input price (none listed)
    q = t.quote("long-llm", 40_000, 1_000, cached_tokens=5_000, cache_write_tokens=8_000)
    assert q.cost_nano == 27_000 * 2000 + 5_000 * 2000 + 8_000 * 2500 + 1_000 * 4000
    assert t.quote("long-llm", 200_000, 10).source == "unpriced"  # above the last tier: not guessed
    # the user's file beats the bundled table, which beats genai-prices' stale DeepSeek list
    assert t.quote("deepseek-chat", 1_000_000, 0).cost_nano == 9 * 10**9
    # a call made while DeepSeek's V3.2 list was in force (deepseek-chat is retired since 2026-07-24)
    bundled = PriceTable().quote("deepseek-chat", 1_000_000, 1_000_000, at="2026-03-02T08:00:00Z")
    assert (bundled.source, bundled.cost_nano) == ("bundled", (280_000 + 420_000) * 1000)
    assert PriceTable().quote("deepseek/deepseek-chat", 1_000_000, 0, at="2026-03-02").source == "bundled"  # router spelling
