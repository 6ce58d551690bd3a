"""Rows say why they cost what they cost, and a time rule says when its calendar runs out.

DeepSeek's peak (Beijing Mon-Fri 09:00-12:00 and 14:00-18:00, x2) needs the CN holiday calendar, which
knows 2025 and 2026 only: a 2027 call in peak hours is priced at peak (the upper bound) and says so on
the row, in what `rag ask` prints, in the log, in `rag prices --at` and in `rag prices check`.
Nano-dollars by hand: deepseek-flash 1,500 in (1,000 hits) / 200 out = 198,000 off-peak."""
from __future__ import annotations

import json
import logging

from rich.console import Console
from typer.testing import CliRunner

from rag_app.cli.main import app
from rag_app.core.usage import StageUsage
from rag_app.present.cost_render import stage_table
from tests.fakes.sql_ledger import SqlLedger
from tracing.pricing import LedgerPricer
from tracing.ledger import LedgerWriter, stage_json
from tracing.pricing import PriceTable
from tracing.ledger import stage_row

OFF = 198_000
MON_2027 = "2027-01-04T03:00:00.000+00:00"      # Monday 11:00 Beijing, 2027: no calendar for the year
NATIONAL_DAY = "2026-10-01T03:00:00.000+00:00"  # Thursday 11:00 Beijing, a CN public holiday
SAT = "2026-11-28T03:00:00.000+00:00"           # Saturday 11:00 Beijing
NO_2027 = "no CN holiday calendar for 2027"


def generate(at: str) -> StageUsage:
    return StageUsage("generate", "deepseek-flash", input_tokens=1500, output_tokens=200, cached_tokens=1000,
                      usage_source="provider", billing="billed", price_basis="llm", started_at=at, ended_at=at,
                      latency_ms=900.0)


def rendered(stages: list[dict]) -> str:
    console = Console(record=True, width=80)
    console.print(stage_table(stages, "cost"))
    return " ".join(console.export_text().split())


def test_a_2027_peak_call_warns_on_the_row_in_rag_ask_and_in_the_log(caplog):
    pricer = LedgerPricer(PriceTable())
    with caplog.at_level(logging.WARNING, logger="tracing.pricing"):
        u = pricer.price(generate(MON_2027))
        pricer.price(generate("2027-01-05T03:00:00.000+00:00"))  # the same warning is logged once
    p = u.price
    assert (p.cost_nano, p.rule, p.effective_from) == (2 * OFF, "peak", "2026-09-19")
    assert p.warning.startswith(NO_2027)
    row = stage_row(u, query_id="q")
    assert row["price_warning"] == p.warning and row["price_rule"] == "peak"
    assert f"! generate price: {NO_2027}" in rendered([stage_json(row)])  # what `rag ask` prints
    logged = [r.getMessage() for r in caplog.records if NO_2027 in r.getMessage()]
    assert len(logged) == 1 and "deepseek" in logged[0]


def test_rows_record_the_rule_the_dated_price_and_say_so_on_read(tmp_path):
    pricer = LedgerPricer(PriceTable())
    writer = LedgerWriter(tmp_path / "l.sqlite")
    for qid, at in (("holiday", NATIONAL_DAY), ("weekend", SAT), ("y2027", MON_2027)):
        writer.put("queries", {"query_id": qid, "kind": "query", "status": "ok", "started_at": at})
        writer.put("stage_calls", stage_row(pricer.price(generate(at)), query_id=qid))
    writer.close()
    conn = SqlLedger(tmp_path / "l.sqlite")
    got = {q: stage_json(conn.stage_rows(q)[0]) for q in ("holiday", "weekend", "y2027")}  # GET /v1/queries/{id}
    assert {q: (s["price_rule"], s["price_effective_from"], s["cost_usd"]) for q, s in got.items()} == {
        "holiday": ("holiday", "2026-09-19", OFF / 1e9), "weekend": ("off-peak", "2026-09-19", OFF / 1e9),
        "y2027": ("peak", "2026-09-19", 2 * OFF / 1e9)}
    assert got["holiday"]["price_warning"] is None and got["y2027"]["price_warning"].startswith(NO_2027)
    assert got["y2027"]["endpoint"] is None  # no endpoint given to this pricer
    conn.close()


def test_rag_prices_at_says_whether_it_was_peak_and_warns(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("RAG_PRICE_OVERRIDES", raising=False)
    runner = CliRunner()

    def info(at):
        res = runner.invoke(app, ["prices", "deepseek-flash", "--json", "--at", at])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    i = info(MON_2027)
    assert (i["peak"], i["rule_applied"]) == (True, "peak") and i["warning"].startswith(NO_2027)
    assert (info(SAT)["peak"], info(SAT)["warning"]) == (False, None)
    assert (info(NATIONAL_DAY)["peak"], info(NATIONAL_DAY)["rule_applied"]) == (False, "holiday")
    text = " ".join(runner.invoke(app, ["prices", "deepseek-flash", "--at", MON_2027]).output.split())
    assert "peak then: bundled deepseek/deepseek-flash" in text and f"warning: {NO_2027}" in text


def test_rag_prices_check_lists_rows_priced_with_a_warning(tmp_path, monkeypatch):
    pricer = LedgerPricer(PriceTable())
    writer = LedgerWriter(tmp_path / "ledger.sqlite")
    writer.put("queries", {"query_id": "q", "kind": "query", "status": "ok", "started_at": MON_2027})
    writer.put("stage_calls", stage_row(pricer.price(generate(MON_2027)), query_id="q"))
    writer.close()
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("RAG_PRICE_OVERRIDES", raising=False)
    runner = CliRunner()
    text = " ".join(runner.invoke(app, ["prices", "check"]).output.split())
    assert f"warning on 1 deepseek-flash rows (2027-01-04 to 2027-01-04): {NO_2027}" in text
    assert "today's table still warns" in text
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"version": "cn-2027", "holidays": {"CN": {"2027": {"source": "test",
                                                                                  "days_off": ["2027-01-01"]}}}}))
    monkeypatch.setenv("RAG_PRICE_OVERRIDES", str(cal))
    text = " ".join(runner.invoke(app, ["prices", "check"]).output.split())
    assert "today's table no longer warns: run `rag reprice`" in text
