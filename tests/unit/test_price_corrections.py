"""A corrected price keeps history: an override covers only the dates it lists (before its first `from`
the bundled table, then genai-prices, still answers with its own rules), and any override file, a
calendar-only or FX-only one too, changes the table's version. Figures by hand in nano-dollars
($/M x 1000 per token); DeepSeek's peak is Beijing time Mon-Fri 09:00-12:00 and 14:00-18:00, x2."""
from __future__ import annotations

import json

from tests.fakes.sql_ledger import SqlLedger
from tracing.pricing import PriceTable
from tracing.reprice import reprice

T = (1500, 200, 1000, 0)  # input (1,000 of them cache hits), output, cache hits, cache writes
# bundled deepseek-flash: $0.15 miss / $0.003 hit / $0.60 out off-peak
FLASH_OFF = 500 * 150 + 1000 * 3 + 200 * 600  # 198,000
SAT = "2026-11-28T03:00:00Z"            # Saturday 11:00 Beijing: off-peak (weekend)
NATIONAL_DAY = "2026-10-01T03:00:00Z"   # Thursday 11:00 Beijing, a CN public holiday: off-peak
FRI_PEAK = "2026-11-27T03:00:00Z"       # Friday 11:00 Beijing: peak
AFTER = "2026-12-04T03:00:00Z"          # Friday 11:00 Beijing, under the override


def write(tmp_path, data: dict, name: str = "prices.json"):
    f = tmp_path / name
    f.write_text(json.dumps(data))
    return f


def flash_override(tmp_path):
    # the docs' recipe: a dated correction of one model, from 2026-11-30, no time rule of its own
    return write(tmp_path, {"version": "fix-1", "models": {"deepseek/deepseek-flash": {"prices": [
        {"from": "2026-11-30", "input_per_mtok": "0.2", "output_per_mtok": "0.8", "cache_read_per_mtok": "0.004"}]}}})


def test_a_dated_override_keeps_the_bundled_history_and_its_peak_rule(tmp_path):
    table = PriceTable.load(flash_override(tmp_path))
    for at, nano, rule in ((SAT, FLASH_OFF, "off-peak"), (NATIONAL_DAY, FLASH_OFF, "off-peak"),
                           (FRI_PEAK, 2 * FLASH_OFF, "peak")):
        q = table.quote("deepseek-flash", *T, at=at)
        assert (q.cost_nano, q.source, q.rule) == (nano, "bundled", rule), at
        assert q.basis.startswith("bundled deepseek/deepseek-flash from 2026-09-19")
    # from its date the override answers, with no rule of its own: $0.2 / $0.004 / $0.8
    q = table.quote("deepseek-flash", *T, at=AFTER)
    assert (q.cost_nano, q.source, q.rule) == (500 * 200 + 1000 * 4 + 200 * 800, "override", None)
    # the v4-flash name, billed as deepseek-flash, follows the same dates
    assert table.quote("deepseek-v4-flash", *T, at=SAT).cost_nano == FLASH_OFF


def test_an_override_of_one_model_never_makes_its_earlier_rows_unpriced(tmp_path):
    f = write(tmp_path, {"version": "fix-2", "models": {"qwen-plus": {"prices": [
        {"from": "2026-12-02", "input_per_mtok": "0.5", "output_per_mtok": "1.5"}]}}})
    table = PriceTable.load(f)
    before = table.quote("qwen-plus", 1000, 100, at="2026-11-01T00:00:00Z")
    # bundled Model Studio (Singapore) qwen-plus: $0.40 in / $1.20 out
    assert (before.cost_nano, before.source) == (1000 * 400 + 100 * 1200, "bundled")
    assert table.quote("qwen-plus", 1000, 100, at="2026-12-03T00:00:00Z").cost_nano == 1000 * 500 + 100 * 1500
    info = table.describe("qwen-plus", at="2026-11-01T00:00:00Z")
    assert info["source"] == "bundled" and info["tiers"][0]["input_per_mtok"] == "0.4"
    assert {h["layer"] for h in info["history"]} == {"override", "bundled"}
    assert table.describe("qwen-plus", at="2026-12-03T00:00:00Z")["source"] == "override"


def test_reprice_under_a_dated_override_changes_only_rows_from_its_date(tmp_path):
    conn = SqlLedger(tmp_path / "l.sqlite")
    for qid, at, nano in (("sat", SAT, FLASH_OFF), ("holiday", NATIONAL_DAY, FLASH_OFF),
                          ("after", AFTER, 2 * FLASH_OFF)):
        conn.execute("INSERT INTO queries (query_id, kind, status, started_at) VALUES (?, 'query', 'ok', ?)", (qid, at))
        conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, "
                     "cached_tokens, cost_nano_usd, price_version, price_source, usage_source, started_at, provider) "
                     "VALUES (?, 'generate', 'ok', 'deepseek-flash', ?, ?, ?, ?, ?, 'bundled', 'provider', ?, 'deepseek')",
                     (qid, T[0], T[1], T[2], nano, PriceTable().version, at))
    conn.commit()
    res = reprice(conn, PriceTable.load(flash_override(tmp_path)))
    assert (res.rows, res.changed) == (3, 1)
    new = dict(conn.execute("SELECT s.query_id, r.cost_nano_usd FROM repricings r JOIN stage_calls s ON s.id = r.stage_call_id"))
    assert new == {"after": 500 * 200 + 1000 * 4 + 200 * 800}


def test_calendar_only_and_fx_only_overrides_change_the_version(tmp_path):
    plain = PriceTable().version
    cal = PriceTable.load(write(tmp_path, {"version": "cal-2027", "holidays": {"CN": {"2027": {
        "source": "test", "days_off": ["2027-01-01"]}}}}, "cal.json"))
    fx = PriceTable.load(write(tmp_path, {"version": "fx-dec", "fx": {"CNY": [
        {"from": "2026-12-01", "per_usd": "7.05", "source": "my bank"}]}}, "fx.json"))
    assert cal.version == f"{plain}+overrides:cal-2027"
    assert fx.version == f"{plain}+overrides:fx-dec"
    # and the calendar-only file is what it says: 2027-01-01 (a Friday) is a holiday, so 11:00 is off-peak
    q = cal.quote("deepseek-flash", *T, at="2027-01-01T03:00:00Z")
    assert (q.cost_nano, q.rule, q.warning) == (FLASH_OFF, "off-peak", None)
