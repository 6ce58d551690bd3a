"""What a person reads: sensible precision, 80 columns, no truncated money, unpriced spelled out."""
from __future__ import annotations

import pytest
from rich.console import Console

from rag_app.present.cost_render import per_1k, report_tables, stage_table, usd
from rag_app.present.report_export import by_table
from tests.fakes.sql_ledger import SqlLedger


@pytest.mark.parametrize("value, shown", [
    (None, "unpriced"), (0, "$0"), (0.00012885, "$0.000129"), (0.0000004, "$0.0000004"), (0.04321, "$0.0432"),
    (0.5, "$0.5"), (1.0, "$1.00"), (12.3456, "$12.35"), (0.000000001, "$0.000000001"), (-0.00025, "-$0.00025"),
])
def test_usd_case_table(value, shown):
    assert usd(value) == shown


def test_per_1k_queries():
    assert per_1k(0.00012885) == "$0.129/1k q" and per_1k(None) == "unpriced"


def render(renderable) -> list[str]:
    console = Console(width=80, record=True, force_terminal=False, color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


def stage(stage, model, status="ok", attempt=1, tin=0, tout=0, cost=0.0, shadow=None, source="local", **kw):
    return {"stage": stage, "attempt": attempt, "status": status, "model": model, "input_tokens": tin,
            "output_tokens": tout, "cost_usd": cost, "shadow_cost_usd": shadow, "latency_ms": 1234.567,
            "usage_source": source, "estimate_note": kw.get("note"), "output_at_risk_tokens": kw.get("at_risk")}


def test_ask_cost_table_fits_80_columns_without_truncation():
    stages = [stage("embed_query", "BAAI/bge-small-zh-v1.5", tin=23, shadow=0.00000046),
              stage("retrieve", "qdrant:dense+bm25"),
              stage("rerank", "BAAI/bge-reranker-base", tin=1234, shadow=0.00002468),
              stage("generate", "gpt-4o-mini", "timeout", 1, 1510, 0, 0.0002265, source="estimated:o200k_base",
                    note="timeout before any reply", at_risk=512),
              stage("generate", "gpt-4o-mini", "ok", 2, 1510, 143, 0.00031230, source="provider"),
              stage("generate", "house-llm-7b", "ok", 3, 1510, 143, None, source="provider")]
    lines = render(stage_table(stages, "cost of query 3f1c2d4e-aaaa-bbbb-cccc-1234567890ab"))
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    for shown in ("embed_query", "$0.00000046", "$0.0000247", "$0.000227", "$0.000312", "unpriced",
                  "estimated:o200k_base", "up to 512 more output tokens"):
        assert shown in text, shown


def test_report_tables_fit_80_columns_and_show_unpriced(tmp_path):
    conn = SqlLedger(tmp_path / "l.sqlite")
    for i, (cost, source) in enumerate([(128850, "genai-prices"), (131000, "genai-prices"), (None, "unpriced")]):
        qid = f"query-{i:032d}"
        conn.execute("INSERT INTO queries (query_id, kind, question, variant, mode, status, started_at, latency_ms) "
                     "VALUES (?, 'query', ?, 'default', 'llm', 'ok', ?, 2345.6)",
                     (qid, "一人有限责任公司的股东对公司债务承担什么责任？请详细说明。", f"2026-11-30T10:00:0{i}.123+00:00"))
        conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, "
                     "cost_nano_usd, price_source, usage_source, started_at) "
                     "VALUES (?, 'generate', 'ok', 'gpt-4o-mini', 1510, 143, ?, ?, 'provider', 't')", (qid, cost, source))
    conn.commit()
    lines = render(report_tables(conn.report()))
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    assert "$0.000129" in text and "unpriced (1)" in text and "unpriced: 1 rows in 1 queries" in text
    assert "$0.13/1k q" in text  # mean of the two priced queries, per 1,000 queries
    assert "2026-11-30 10:00" in text  # the date with its year, as finance reads it
    # ... and it says so: the unpriced query is left out of the per-query figures, not counted as $0
    assert "(over the 2 priced queries; 1 unpriced left out)" in text
    day = render(by_table("day", conn.by("day")))
    assert max(len(line) for line in day) <= 80
    assert "$0.13*" in "\n".join(day) and "per 1k q* = over the priced queries only" in " ".join(day)


def test_report_in_cny_at_the_dated_rate_shown(tmp_path):
    """RAG_REPORT_CURRENCY=CNY: every amount x 6.7628 (the table's latest CNY rate, 2026-09-16),
    the rate and its date in the summary; JSON keeps USD and adds a `_cny` twin and the rate."""
    import io
    import json

    from rag_app.present.report_export import write_report
    from tracing.pricing import display_currency
    from tracing.pricing import load_bundled_table

    cny = display_currency("CNY", load_bundled_table().fx)
    conn = SqlLedger(tmp_path / "l.sqlite")
    conn.execute("INSERT INTO queries (query_id, kind, question, variant, mode, status, started_at, latency_ms) "
                 "VALUES ('q', 'query', 'q?', 'default', 'llm', 'ok', '2026-11-30T10:00:00+00:00', 10)")
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, cost_nano_usd, "
                 "price_source, usage_source, started_at) VALUES ('q', 'generate', 'ok', 'gpt-4o-mini', 1510, 143, "
                 "128850, 'genai-prices', 'provider', '2026-11-30T10:00:00+00:00')")
    conn.commit()
    lines = render(report_tables(conn.report(), cny))
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 80
    assert "¥0.000871" in text and "$0.000129" not in text  # 128,850 nano-USD x 6.7628 = 871,387 nano-CNY
    assert "ledger USD x 6.7628 (2026-09-16 rate" in text
    sink = io.StringIO()
    write_report(conn, "json", sink, Console(file=io.StringIO()), last=None, variant=None, prices="original",
                 table_rows=20, currency=cny)
    data = json.loads(sink.getvalue())
    assert data["totals"]["currency"] == {"code": "CNY", "per_usd": "6.7628", "rate_date": "2026-09-16",
                                          "source": cny.rate.source}
    assert data["queries"][0]["cost_usd"] == pytest.approx(128850e-9)
    assert data["queries"][0]["cost_cny"] == round(128850e-9 * 6.7628, 8)  # to what a nano-dollar can tell
    # `--by` reports in the same currency: the table converted, the rate named, JSON with `_cny` twins
    from rag_app.present.report_export import write_by

    sink, screen = io.StringIO(), io.StringIO()
    write_by(conn, "day", "table", sink, Console(file=screen), variant=None, currency=cny)
    by_text = sink.getvalue()
    assert "¥0.000871" in by_text and "$0.000129" not in by_text and "ledger USD x 6.7628" in by_text
    sink = io.StringIO()
    write_by(conn, "day", "json", sink, Console(file=screen), variant=None, currency=cny)
    by_json = json.loads(sink.getvalue())
    assert by_json["rows"][0]["cost_cny"] == round(128850e-9 * 6.7628, 8)
    assert by_json["currency"]["code"] == "CNY"
