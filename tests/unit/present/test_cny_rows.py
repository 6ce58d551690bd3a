"""CNY as of the row: a yuan-priced call is converted at the rate in force at its own time (a dated table
with its source), the row keeps its own yuan, exact, and the rate used, and a report shows a query's
yuan at the rate of its day (0.7.0: one rate for every conversion, a 2025-12-01 row re-converted at the
latest rate, -0.85%; 0.01672 yuan shown as 0.0167199987996).

glm-5.3 on bigmodel.cn lists 8 yuan per million input tokens: 2,090 tokens are 0.01672 yuan, by hand."""
from __future__ import annotations

import json

from rich.console import Console

from rag_app.core.usage import StageUsage
from rag_app.present.cost_render import stage_table
from rag_app.present.report_export import with_currency
from tests.fakes.sql_ledger import SqlLedger
from tracing.pricing import LedgerPricer
from tracing.pricing import display_currency
from tracing.ledger import LedgerWriter, stage_json
from tracing.pricing import PriceTable
from tracing.ledger import stage_row

OCT = "2026-10-01T02:00:00.000+00:00"  # under the bundled 2026-09-16 rate, 6.7628
NOV = "2026-11-16T02:00:00.000+00:00"  # under the override's 2026-11-15 rate, 7.05


def _table(tmp_path) -> PriceTable:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"version": "fx-nov", "fx": {"CNY": [
        {"from": "2026-11-15", "per_usd": "7.05", "source": "my bank"}]}}))
    return PriceTable.load(path)


def generate(at: str) -> StageUsage:
    return StageUsage("generate", "glm-5.3", input_tokens=2090, output_tokens=0, usage_source="provider",
                      billing="billed", price_basis="llm", started_at=at, ended_at=at, latency_ms=500.0)


def test_a_yuan_row_keeps_its_yuan_and_the_rate_of_its_own_time(tmp_path):
    pricer = LedgerPricer(_table(tmp_path), provider="zhipuai")
    writer = LedgerWriter(tmp_path / "l.sqlite")
    for qid, at in (("oct", OCT), ("nov", NOV)):
        writer.put("queries", {"query_id": qid, "kind": "query", "status": "ok", "started_at": at})
        writer.put("stage_calls", stage_row(pricer.price(generate(at)), query_id=qid))
    writer.close()
    conn = SqlLedger(tmp_path / "l.sqlite")
    got = {q: stage_json(conn.stage_rows(q)[0]) for q in ("oct", "nov")}  # GET /v1/queries/{id}
    conn.close()
    oct_, nov = got["oct"], got["nov"]
    assert (oct_["price_currency"], oct_["native_cost"], nov["native_cost"]) == ("CNY", "0.01672", "0.01672")
    assert oct_["fx_rate"].startswith("6.7628 CNY/USD (2026-09-16, CFETS")
    assert nov["fx_rate"] == "7.05 CNY/USD (2026-11-15, my bank)"
    assert round(oct_["cost_usd"] * 1e9) == 2_472_349 and round(nov["cost_usd"] * 1e9) == 2_371_631  # 0.01672 / rate
    console = Console(record=True, width=80)
    console.print(stage_table([oct_], "cost"))  # what `rag ask` prints under its table
    assert "generate #1: 0.01672 CNY at 6.7628 CNY/USD (2026-09-16" in " ".join(console.export_text().split())


def test_a_report_in_yuan_converts_each_query_at_its_days_rate_and_exactly(tmp_path):
    cny = display_currency("CNY", _table(tmp_path).fx)
    assert cny.convert(0.002472349, OCT) == 0.01672  # the yuan it was booked from, not 0.0167199987996
    assert cny.convert(0.002371631, NOV) == 0.01672
    dec = with_currency({"started_at": "2025-12-01T02:00:00+00:00", "cost_usd": 0.002361715}, cny)
    assert dec["cost_cny"] == 0.01672  # 0.01672 / 7.0796, the rate of its day; the latest (7.05) read 0.01665
    total = with_currency({"cost_usd": 0.002472349}, cny)  # a total: the latest rate, named in the note
    assert total["cost_cny"] == round(0.002472349 * 7.05, 8) and "each query at the rate of its own day" in cny.note()


def test_the_report_table_shows_each_query_at_its_own_days_rate(tmp_path):
    """0.9.x's table converted every query at the latest rate (-0.85% for a 2025-12-01 query) while its CSV
    and JSON used the query's own day: the table now does as they do."""
    from rag_app.present.cost_render import report_tables
    from tests.fakes.sql_ledger import SqlLedger

    conn = SqlLedger(tmp_path / "r.sqlite")
    conn.execute("INSERT INTO queries (query_id, kind, question, mode, status, started_at, latency_ms) "
                 "VALUES ('dec', 'query', 'q?', 'llm', 'ok', '2025-12-01T02:00:00+00:00', 10)")
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, cost_nano_usd, price_source, started_at) "
                 "VALUES ('dec', 'generate', 'ok', 'glm-5.3', 2361715, 'bundled', '2025-12-01T02:00:00+00:00')")
    conn.commit()
    console = Console(record=True, width=80)
    console.print(report_tables(conn.report(), display_currency("CNY", PriceTable().fx)))
    conn.close()
    row = next(line for line in console.export_text().splitlines() if "2025-12-01" in line)
    assert "¥0.0167" in row  # 0.002361715 USD x 7.0796 (the rate of 2025-12-01), not x 6.7628 (¥0.016)
