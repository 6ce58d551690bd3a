"""A corrected price keeps history: an override covers only the dates it lists (before its first `from`
the bundled table, then genai-prices, still answers with its own rules), and any override file, a
calendar-only or FX-only one too, changes the table's version. Figures by hand in nano-dollars
($/M x 1000 per token); DeepSeek's peak is Beijing time Mon-Fri 09:00-12:00 and 14:00-18:00, x2."""
from __future__ import annotations

import json

from tests.fakes.sql_ledger import SqlLedger
from tracing.pricing import PriceTable
from tracing.pricing import reprice

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
    # the docs' recipe: a dated correction of one model's figures, from 2026-11-30, saying nothing of its rule
    return write(tmp_path, {"version": "fix-1", "models": {"deepseek/deepseek-flash": {"prices": [
        {"from": "2026-11-30", "input_per_mtok": "0.2", "output_per_mtok": "0.8", "cache_read_per_mtok": "0.004"}]}}})


FIX_OFF = 500 * 200 + 1000 * 4 + 200 * 800  # the corrected figures, off-peak: 264,000


def test_a_dated_override_keeps_the_bundled_history_and_its_peak_rule(tmp_path):
    table = PriceTable.load(flash_override(tmp_path))
    for at, nano, rule in ((SAT, FLASH_OFF, "off-peak"), (NATIONAL_DAY, FLASH_OFF, "off-peak"),
                           (FRI_PEAK, 2 * FLASH_OFF, "peak")):
        q = table.quote("deepseek-flash", *T, at=at)
        assert (q.cost_nano, q.source, q.rule) == (nano, "bundled", rule), at
        assert q.basis.startswith("bundled deepseek/deepseek-flash from 2026-09-19")
    # from its date the override answers with its figures ($0.2 / $0.004 / $0.8 off-peak) and keeps the
    # bundled time rule (0.9.x dropped it: -50% on every peak-hour call after the date, #45)
    q = table.quote("deepseek-flash", *T, at=AFTER)
    assert (q.cost_nano, q.source, q.rule) == (2 * FIX_OFF, "override", "peak")
    assert "time rule of bundled deepseek/deepseek-flash from 2026-09-19" in q.basis
    assert table.quote("deepseek-flash", *T, at="2026-12-05T03:00:00Z").cost_nano == FIX_OFF  # Saturday
    info = table.describe("deepseek-flash", at=AFTER)
    assert info["peak"] and info["rule"].startswith("x2 Mon-Fri") and info["rule_source"].startswith("inherited from")
    assert [line.split(":")[0] for line in table.override_rules(at=AFTER)] == [
        "price override deepseek/deepseek-flash (from 2026-11-30)"]


def test_an_override_that_says_peak_null_has_no_rule_and_says_so(tmp_path):
    f = write(tmp_path, {"version": "fix-3", "models": {"deepseek/deepseek-flash": {"prices": [
        {"from": "2026-11-30", "input_per_mtok": "0.2", "output_per_mtok": "0.8", "cache_read_per_mtok": "0.004",
         "peak": None}]}}})
    table = PriceTable.load(f)
    q = table.quote("deepseek-flash", *T, at=AFTER)
    assert (q.cost_nano, q.rule) == (FIX_OFF, None)
    info = table.describe("deepseek-flash", at=AFTER)
    assert info["rule"] is None and info["rule_source"].startswith('none: the override sets "peak": null')
    assert "no time rule" in table.override_rules(at=AFTER)[0]
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
    assert new == {"after": 2 * FIX_OFF}  # a peak-hour call: the corrected figures at the bundled rule


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


# -- a row is priced where it was sent ----------------------------------------------------------------
QWEN_FLASH = (2000, 300, 0, 0)
BEIJING_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
SINGAPORE_URL = "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"
NOV = "2026-11-02T08:00:00.000+00:00"


def generate_usage(model: str, tokens, at: str):
    from rag_app.core.usage import StageUsage

    return StageUsage("generate", model, input_tokens=tokens[0], output_tokens=tokens[1], cached_tokens=tokens[2],
                      usage_source="provider", billing="billed", price_basis="llm", started_at=at)


def test_a_row_records_the_endpoint_and_provider_it_was_sent_to():
    from rag_app.config.settings import load_settings
    from tracing.pricing import LedgerPricer

    settings = load_settings(openai_base_url=BEIJING_URL, llm_model="qwen-flash")
    pricer = LedgerPricer.from_settings(settings, PriceTable.load(base_url=BEIJING_URL))
    p = pricer.price(generate_usage("qwen-flash", QWEN_FLASH, NOV)).price
    assert (p.provider, p.endpoint, p.source) == ("alibaba-cn", "dashscope.aliyuncs.com", "bundled")
    # OpenAI's own API (no base URL): the endpoint is recorded; the provider is whatever the name says
    p = LedgerPricer.from_settings(load_settings(openai_base_url=None), PriceTable()).price(
        generate_usage("gpt-4o-mini", QWEN_FLASH, NOV)).price
    assert (p.provider, p.endpoint) == (None, "api.openai.com")


def beijing_ledger(tmp_path, name: str = "l.sqlite"):
    """A mainland qwen-flash row as `rag ask` wrote it with OPENAI_BASE_URL on Beijing, and a row of a ledger
    written before endpoints were recorded."""
    cost = PriceTable.load(base_url=BEIJING_URL).quote("qwen-flash", *QWEN_FLASH, at=NOV).cost_nano
    assert cost is not None
    conn = SqlLedger(tmp_path / name)
    for qid, provider, endpoint in (("sent", "alibaba-cn", "dashscope.aliyuncs.com"), ("old", None, None)):
        conn.execute("INSERT INTO queries (query_id, kind, status, started_at) VALUES (?, 'query', 'ok', ?)", (qid, NOV))
        conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, "
                     "cached_tokens, cost_nano_usd, price_version, price_source, usage_source, started_at, provider, "
                     "endpoint) VALUES (?, 'generate', 'ok', 'qwen-flash', ?, ?, 0, ?, ?, 'bundled', 'provider', ?, ?, ?)",
                     (qid, QWEN_FLASH[0], QWEN_FLASH[1], cost, PriceTable().version, NOV, provider, endpoint))
    conn.commit()
    return conn, cost


def test_reprice_prices_each_row_where_it_was_sent_never_by_the_shells_endpoint(tmp_path):
    conn, cost = beijing_ledger(tmp_path)
    # the operator's shell points at Singapore, where qwen-flash costs USD 0.05 / 0.4, not Beijing's yuan
    shell = PriceTable.load(base_url=SINGAPORE_URL)
    assert shell.quote("qwen-flash", *QWEN_FLASH, at=NOV).cost_nano == 2000 * 50 + 300 * 400 != cost
    res = reprice(conn, shell)
    assert (res.rows, res.changed, res.unchanged, res.left) == (2, 0, 1, 1)
    assert dict(res.reasons) == {"left as recorded: no endpoint on the row (written before endpoints were recorded; "
                                 "--assume-provider)": 1}
    assert conn.execute("SELECT COUNT(*) FROM repricings").fetchone()[0] == 0
    # named by the operator, the old row is priced as sent there: the same figure, so nothing changes
    res = reprice(conn, shell, assume_provider="alibaba-cn")
    assert (res.changed, res.left, res.new_nano) == (0, 0, 2 * cost)


def test_cli_reprice_says_how_many_rows_record_no_endpoint(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rag_app.cli.main import app

    data = tmp_path / "data"
    data.mkdir()
    beijing_ledger(data, "ledger.sqlite")[0].close()
    monkeypatch.setenv("RAG_DATA_DIR", str(data))
    monkeypatch.setenv("OPENAI_BASE_URL", SINGAPORE_URL)
    monkeypatch.delenv("RAG_LLM_PROVIDER", raising=False)
    res = CliRunner().invoke(app, ["reprice"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "re-priced 1 of 2 rows" in text and "0 changed, 1 unchanged, 1 left as recorded" in text
    assert "1 left as recorded: no endpoint on the row" in text


def test_a_row_sent_through_a_gateway_keeps_the_price_it_was_written_with(tmp_path):
    # glm-4.6 through a local gateway: the endpoint names no provider of ours, so the name's usual one
    # (z.ai, USD) priced it; a shell pointing at bigmodel.cn (CNY) must not re-price it
    conn = SqlLedger(tmp_path / "l.sqlite")
    at, tokens = "2026-11-02T08:00:00.000+00:00", (10000, 500, 6400, 0)
    cost = PriceTable().quote("glm-4.6", *tokens, at=at).cost_nano
    conn.execute("INSERT INTO queries (query_id, kind, status, started_at) VALUES ('g', 'query', 'ok', ?)", (at,))
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, cached_tokens, "
                 "cost_nano_usd, price_version, price_source, usage_source, started_at, endpoint) VALUES "
                 "('g', 'generate', 'ok', 'glm-4.6', ?, ?, ?, ?, ?, 'bundled', 'provider', ?, '127.0.0.1:4000')",
                 (*tokens[:3], cost, PriceTable().version, at))
    conn.commit()
    shell = PriceTable.load(base_url="https://open.bigmodel.cn/api/paas/v4")
    assert shell.quote("glm-4.6", *tokens, at=at).cost_nano != cost
    res = reprice(conn, shell)
    assert (res.rows, res.changed, res.left, res.new_nano) == (1, 0, 0, cost)
