"""Re-pricing appends, never overwrites; `rag prices check` finds what today's table cannot price."""
from __future__ import annotations

import json
import sqlite3

from typer.testing import CliRunner

from rag_app.cli import app
from tracing import rollups
from tracing.ledger import connect
from tracing.pricing import PriceTable
from tracing.reports import build_report
from tracing.reprice import reprice, unpriced_models

OLD = "genai-prices@0.2.3"  # the table the rows were first priced with


def seed(path):
    conn = connect(path)
    rows = [  # (query, model, in, out, cached, recorded cost, source)
        ("q1", "deepseek-chat", 1500, 200, 1000, 1000 * 70 + 500 * 270 + 200 * 1100, "genai-prices"),  # pre-Sept-2025 list
        ("q2", "house-llm-7b", 1000, 100, 0, None, "unpriced"),
        ("q3", "gpt-4o-mini", 2000, 300, 0, 2000 * 150 + 300 * 600, "genai-prices"),
    ]
    for qid, model, tin, tout, cached, cost, source in rows:
        conn.execute("INSERT INTO queries (query_id, kind, status, started_at) VALUES (?, 'query', 'ok', '2026-11-01T00:00:00')",
                     (qid,))
        conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, cached_tokens, "
                     "cost_nano_usd, price_version, price_source, usage_source, started_at) "
                     "VALUES (?, 'generate', 'ok', ?, ?, ?, ?, ?, ?, ?, 'provider', '2026-11-01T00:00:00')",
                     (qid, model, tin, tout, cached, cost, OLD, source))
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, cost_nano_usd, shadow_cost_nano_usd, "
                 "price_version, price_source, started_at) VALUES ('q3', 'embed_query', 'ok', 'bge', 20, 0, 400, 'rate:embed', "
                 "'rate', '2026-11-01T00:00:00')")
    rollups.rebuild(conn)  # rows written around the ledger writer: recompute the report totals
    conn.commit()
    return conn


def overrides(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"version": "house-1", "models": {
        "house-llm-7b": {"input_per_mtok": "0.10", "output_per_mtok": "0.40"}}}))
    return f


def test_reprice_keeps_history_and_reports_show_either(tmp_path):
    conn = seed(tmp_path / "l.sqlite")
    before = [tuple(r) for r in conn.execute("SELECT * FROM stage_calls ORDER BY id")]
    table = PriceTable.load(overrides(tmp_path))
    res = reprice(conn, table)
    assert (res.rows, res.unpriced_before, res.unpriced_after) == (3, 1, 0)  # the rate row is not table-priced
    assert [tuple(r) for r in conn.execute("SELECT * FROM stage_calls ORDER BY id")] == before  # never overwritten
    new = dict(conn.execute("SELECT s.query_id, r.cost_nano_usd FROM repricings r JOIN stage_calls s ON s.id = r.stage_call_id"))
    # by hand: DeepSeek V3.2 list (bundled) 500 x 280 + 1000 x 28 + 200 x 420; house-llm from the override
    assert new == {"q1": 500 * 280 + 1000 * 28 + 200 * 420, "q2": 1000 * 100 + 100 * 400, "q3": 2000 * 150 + 300 * 600}
    assert {r[0] for r in conn.execute("SELECT price_version FROM repricings")} == {table.version}
    original, repriced = build_report(conn).totals, build_report(conn, prices="repriced").totals
    assert original["unpriced_rows"] == 1 and repriced["unpriced_rows"] == 0
    assert round(original["cost_usd"] * 1e9) == 1000 * 70 + 500 * 270 + 200 * 1100 + 2000 * 150 + 300 * 600
    assert round(repriced["cost_usd"] * 1e9) == sum(new.values())
    # a second run appends again; the latest wins in the repriced view, history stays
    reprice(conn, PriceTable())
    assert conn.execute("SELECT COUNT(*) FROM repricings").fetchone()[0] == 6
    assert build_report(conn, prices="repriced").totals["unpriced_rows"] == 1


def test_unpriced_models_lists_what_todays_table_cannot_price(tmp_path):
    conn = seed(tmp_path / "l.sqlite")
    assert [m["model"] for m in unpriced_models(conn, PriceTable())] == ["house-llm-7b"]
    assert unpriced_models(conn, PriceTable.load(overrides(tmp_path))) == []


def test_cli_prices_check_and_reprice(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    seed(data / "ledger.sqlite").close()
    monkeypatch.setenv("RAG_DATA_DIR", str(data))
    runner = CliRunner()
    res = runner.invoke(app, ["prices", "check"])
    assert res.exit_code == 1 and "house-llm-7b" in res.output
    res = runner.invoke(app, ["prices", "deepseek-chat", "--json"])
    info = json.loads(res.output)
    assert res.exit_code == 0 and info["source"] == "bundled" and info["tiers"][0]["output_per_mtok"] == "0.42"
    assert info["checked"] and info["url"].startswith("https://")
    monkeypatch.setenv("RAG_PRICE_OVERRIDES", str(overrides(tmp_path)))
    assert runner.invoke(app, ["prices", "check"]).exit_code == 0
    res = runner.invoke(app, ["reprice", "--model", "house-llm-7b"])
    assert res.exit_code == 0 and "re-priced 1 rows" in res.output and "unpriced rows 1 -> 0" in res.output
    conn = sqlite3.connect(data / "ledger.sqlite")
    assert conn.execute("SELECT cost_nano_usd, price_source FROM repricings").fetchall() == [(140000, "override")]
