"""Re-pricing appends, never overwrites; each row is re-priced by the price in force when it was made,
a row whose price did not change is left alone, and every change says why. `rag prices check` finds
what today's table cannot price. Figures by hand in nano-dollars ($/M x 1000 per token)."""
from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone

from typer.testing import CliRunner

from rag_app.cli.main import app
from tests.fakes.sql_ledger import SqlLedger
from tracing.pricing import PriceTable
from tracing.pricing import reprice

OLD = "genai-prices@0.2.3"  # the table the rows were first priced with


def add_row(conn, qid, model, tin, tout, cached, cost, source, version=OLD, started="2026-03-02T08:00:00.000+00:00",
            endpoint="api.openai.com", provider=None):
    conn.execute("INSERT OR IGNORE INTO queries (query_id, kind, status, started_at) VALUES (?, 'query', 'ok', ?)",
                 (qid, started))
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, cached_tokens, "
                 "cost_nano_usd, price_version, price_source, usage_source, started_at, endpoint, provider) "
                 "VALUES (?, 'generate', 'ok', ?, ?, ?, ?, ?, ?, ?, 'provider', ?, ?, ?)",
                 (qid, model, tin, tout, cached, cost, version, source, started, endpoint, provider))


def seed(path):
    conn = SqlLedger(path)
    # deepseek-chat made 2026-03-02, while the V3.2 list was in force, recorded with the pre-Sept-2025 list
    add_row(conn, "q1", "deepseek-chat", 1500, 200, 1000, 1000 * 70 + 500 * 270 + 200 * 1100, "genai-prices")
    add_row(conn, "q2", "house-llm-7b", 1000, 100, 0, None, "unpriced")
    add_row(conn, "q3", "gpt-4o-mini", 2000, 300, 0, 2000 * 150 + 300 * 600, "genai-prices")
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, cost_nano_usd, shadow_cost_nano_usd, "
                 "price_version, price_source, started_at) VALUES ('q3', 'embed_query', 'ok', 'bge', 20, 0, 400, 'rate:embed', "
                 "'rate', '2026-03-02T08:00:00')")
    conn.commit()
    return conn


def overrides(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"version": "house-1", "models": {
        "house-llm-7b": {"input_per_mtok": "0.10", "output_per_mtok": "0.40"}}}))
    return f


def reasons(conn) -> dict:
    return dict(conn.execute("SELECT s.query_id, r.reason FROM repricings r JOIN stage_calls s ON s.id = r.stage_call_id"))


def test_reprice_keeps_history_and_reports_show_either(tmp_path):
    conn = seed(tmp_path / "l.sqlite")
    before = [tuple(r) for r in conn.execute("SELECT * FROM stage_calls ORDER BY id")]
    table = PriceTable.load(overrides(tmp_path))
    res = reprice(conn, table)
    assert (res.rows, res.changed, res.unchanged) == (3, 2, 1)  # the rate row is not table-priced
    assert (res.unpriced_before, res.unpriced_after) == (1, 0)
    assert [tuple(r) for r in conn.execute("SELECT * FROM stage_calls ORDER BY id")] == before  # never overwritten
    new = dict(conn.execute("SELECT s.query_id, r.cost_nano_usd FROM repricings r JOIN stage_calls s ON s.id = r.stage_call_id"))
    # by hand: DeepSeek V3.2 list 500 x 280 + 1000 x 28 + 200 x 420; house-llm from the override;
    # gpt-4o-mini's figure did not change, so it gets no repricing at all
    assert new == {"q1": 500 * 280 + 1000 * 28 + 200 * 420, "q2": 1000 * 100 + 100 * 400}
    why = reasons(conn)
    assert why["q1"].startswith(f"new price version ({OLD} -> {table.version}): bundled deepseek/deepseek-chat from 2025-09-29")
    assert why["q2"] == "priced now: override house-llm-7b from any date"
    assert {r[0] for r in conn.execute("SELECT price_version FROM repricings")} == {table.version}
    original, repriced = conn.report().totals, conn.report(prices="repriced").totals
    assert original["unpriced_rows"] == 1 and repriced["unpriced_rows"] == 0
    assert round(original["cost_usd"] * 1e9) == 1000 * 70 + 500 * 270 + 200 * 1100 + 2000 * 150 + 300 * 600
    assert round(repriced["cost_usd"] * 1e9) == sum(new.values()) + 2000 * 150 + 300 * 600
    assert conn.repriced_rows() == 2 and conn.repriced_rows(["q3"]) == 0
    # a second run without the override: only house-llm changes (back to unpriced), appended; q1 stays
    res = reprice(conn, PriceTable())
    assert (res.changed, dict(res.reasons)) == (1, {"unpriced now": 1})
    assert conn.execute("SELECT COUNT(*) FROM repricings").fetchone()[0] == 3
    assert conn.report(prices="repriced").totals["unpriced_rows"] == 1


MONDAY_PEAK = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)  # 10:00 Beijing, a working Monday: peak
SATURDAY = "2026-11-28T03:00:00.000+00:00"                     # 11:00 Beijing, Saturday: off-peak all day
FLASH_OFF_PEAK = 500 * 150 + 1000 * 3 + 200 * 600               # deepseek-flash $0.15 / $0.003 / $0.60 = 198,000


def test_reprice_never_changes_a_row_whose_price_did_not_change(tmp_path):
    # The bug of 0.4.0: re-pricing at the hour it runs turned this off-peak row into a peak one
    # (changed=1 with the same price_version). Priced by the call's own start it is unchanged,
    # whatever hour the re-pricing runs at.
    table = PriceTable(clock=lambda: MONDAY_PEAK)
    conn = SqlLedger(tmp_path / "l.sqlite")
    add_row(conn, "q1", "deepseek-flash", 1500, 200, 1000, FLASH_OFF_PEAK, "bundled", table.version, SATURDAY)
    conn.commit()
    for _ in range(2):
        res = reprice(conn, table)
        assert (res.rows, res.changed, res.unchanged, res.new_nano) == (1, 0, 1, FLASH_OFF_PEAK)
    assert conn.execute("SELECT COUNT(*) FROM repricings").fetchone()[0] == 0


def test_a_row_priced_at_the_wrong_hour_is_fixed_as_a_new_rule(tmp_path):
    # what 0.4.0's reprice wrote for that Saturday row when run on a weekday at 10:00 Beijing
    table = PriceTable(clock=lambda: MONDAY_PEAK)
    conn = SqlLedger(tmp_path / "l.sqlite")
    add_row(conn, "q1", "deepseek-flash", 1500, 200, 1000, 2 * FLASH_OFF_PEAK, "bundled", table.version, SATURDAY)
    conn.commit()
    res = reprice(conn, table)
    assert (res.changed, res.old_nano, res.new_nano) == (1, 2 * FLASH_OFF_PEAK, FLASH_OFF_PEAK)
    assert reasons(conn)["q1"] == ("new rule: bundled deepseek/deepseek-flash from 2026-09-19, "
                                   "off-peak: Sat 2026-11-28 11:00 Asia/Shanghai (weekend)")


def test_rows_either_side_of_an_effective_date(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"version": "house-2", "models": {"house-llm": {"prices": [
        {"from": "2026-01-01", "input_per_mtok": "0.10", "output_per_mtok": "0.40"},
        {"from": "2026-06-01T00:00:00Z", "input_per_mtok": "0.20", "output_per_mtok": "0.80"}]}}}))
    conn = SqlLedger(tmp_path / "l.sqlite")
    old_price = 1000 * 100 + 100 * 400  # both recorded at the January price by an older table
    add_row(conn, "before", "house-llm", 1000, 100, 0, old_price, "override", "house-1", "2026-05-31T23:59:59.999+00:00")
    add_row(conn, "after", "house-llm", 1000, 100, 0, old_price, "override", "house-1", "2026-06-01T00:00:00.000+00:00")
    # and DeepSeek's own history, either side of the V3.2 cut (2025-09-29, Beijing midnight)
    v32 = 500 * 280 + 1000 * 28 + 200 * 420
    add_row(conn, "v31", "deepseek-chat", 1500, 200, 1000, v32, "bundled", "house-1", "2025-09-28T15:59:59.000+00:00")
    add_row(conn, "v32", "deepseek-chat", 1500, 200, 1000, v32, "bundled", "house-1", "2025-09-28T16:00:00.000+00:00")
    conn.commit()
    table = PriceTable.load(f)
    res = reprice(conn, table)
    assert (res.rows, res.changed) == (4, 2)
    new = dict(conn.execute("SELECT s.query_id, r.cost_nano_usd FROM repricings r JOIN stage_calls s ON s.id = r.stage_call_id"))
    assert new == {"after": 1000 * 200 + 100 * 800, "v31": 500 * 560 + 1000 * 70 + 200 * 1680}  # 280,000; 686,000
    why = reasons(conn)
    assert why["after"] == f"new price version (house-1 -> {table.version}): override house-llm from 2026-06-01T00:00:00Z"
    assert "bundled deepseek/deepseek-chat from 2025-09-05T16:00:00Z" in why["v31"]


def test_unpriced_models_lists_what_todays_table_cannot_price(tmp_path):
    conn = seed(tmp_path / "l.sqlite")
    assert [m["model"] for m in conn.unpriced_models(PriceTable())] == ["house-llm-7b"]
    assert conn.unpriced_models(PriceTable.load(overrides(tmp_path))) == []


def test_cli_prices_check_and_reprice(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    seed(data / "ledger.sqlite").close()
    monkeypatch.setenv("RAG_DATA_DIR", str(data))
    runner = CliRunner()
    res = runner.invoke(app, ["prices", "check"])
    assert res.exit_code == 1 and "house-llm-7b" in res.output
    res = runner.invoke(app, ["prices", "deepseek-chat", "--json", "--at", "2026-03-02"])
    info = json.loads(res.output)
    assert res.exit_code == 0 and info["source"] == "bundled" and info["tiers"][0]["output_per_mtok"] == "0.42"
    assert info["checked"] and info["url"].startswith("https://") and info["effective_from"] == "2025-09-29"
    assert info["retired"] == "2026-07-24T15:59:00Z" and len(info["history"]) == 4
    res = runner.invoke(app, ["prices", "deepseek-chat", "--json", "--at", "2026-08-01"])
    assert res.exit_code == 1 and json.loads(res.output)["source"] == "unpriced"  # retired: says so, exit 1
    assert runner.invoke(app, ["prices", "deepseek-chat", "--at", "yesterday"]).exit_code != 0
    monkeypatch.setenv("RAG_PRICE_OVERRIDES", str(overrides(tmp_path)))
    assert runner.invoke(app, ["prices", "check"]).exit_code == 0
    res = runner.invoke(app, ["reprice", "--model", "house-llm-7b"])
    assert res.exit_code == 0 and "re-priced 1 of 1 rows" in res.output and "unpriced rows 1 -> 0" in res.output
    assert "1 changed, 0 unchanged, 0 left" in res.output and "1 priced now" in res.output
    conn = sqlite3.connect(data / "ledger.sqlite")
    assert conn.execute("SELECT cost_nano_usd, price_source FROM repricings").fetchall() == [(140000, "override")]
