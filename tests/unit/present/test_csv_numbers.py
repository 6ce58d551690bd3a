"""CSV exports as finance reads them: no scientific notation (8.4242e-05 was in `rag report` CSV)."""
from __future__ import annotations

import csv
import io

import pytest

from rag_app.present.report_export import plain_number, plain_row, write_report
from tracing.ledger import Ledger, LedgerWriter


@pytest.mark.parametrize("v, text", [(8.4242e-05, "0.000084242"), (1e-9, "0.000000001"), (0.1, "0.1"),
                                     (12.5, "12.5"), (3.0, "3"), (1.5e16, "15000000000000000"),
                                     (float("nan"), "nan")])
def test_floats_are_written_without_an_exponent(v, text):
    assert plain_number(v) == text
    if v == v:
        assert float(text) == v  # reads back as the same number


def test_rag_report_csv_has_no_exponent(tmp_path):
    w = LedgerWriter(tmp_path / "l.sqlite", spill_dir=tmp_path / "spill")
    w.put("queries", {"query_id": "q1", "kind": "query", "status": "ok", "started_at": "2026-12-01T00:00:00+00:00",
                      "latency_ms": 12.5})
    w.put("stage_calls", {"query_id": "q1", "stage": "generate", "status": "ok", "model": "gpt-4o-mini",
                          "cost_nano_usd": 84_242, "input_tokens": 100, "started_at": "2026-12-01T00:00:00+00:00"})
    assert w.flush(10)
    w.close()
    out = io.StringIO()
    with Ledger.open(tmp_path / "l.sqlite") as L:
        write_report(L, "csv", out, None, last=None, variant=None, prices="original", table_rows=20)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert rows and "e-" not in out.getvalue() and rows[0]["cost_usd"] == "0.000084242"
    assert plain_row({"a": 8.4242e-05, "b": "x", "c": 3}) == {"a": "0.000084242", "b": "x", "c": 3}
