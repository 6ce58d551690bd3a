"""`rag report --by model` as finance reads it: $ per 1,000 queries over the queries that called the model
(an extractive answer names the LLM on a skipped row without calling it: 0.7.0 counted it, -16.7% on
gpt-4o-mini with 1 such query in 6), a wholly unpriced model unpriced in the table, CSV and JSON (0.7.0:
0.0 in CSV and JSON), and no exponent in the CSV."""
from __future__ import annotations

import csv
import io
import json
import re

from rich.console import Console

from rag_app.present.report_export import write_by
from tracing.ledger import Ledger, LedgerWriter

AT = "2026-12-01T10:00:00.000+00:00"  # a fixed clock: every row of one day


def _ledger(tmp_path):
    w = LedgerWriter(tmp_path / "l.sqlite", spill_dir=tmp_path / "spill")
    for i in range(6):  # 5 answers by gpt-4o-mini at 84,242 nano-$, 1 extractive (skipped, shadow only)
        q = f"q{i}"
        w.put("queries", {"query_id": q, "kind": "query", "status": "ok", "started_at": AT, "latency_ms": 10.0,
                          "mode": "extractive" if i == 5 else "llm"})
        w.put("stage_calls", {"query_id": q, "stage": "generate", "model": "gpt-4o-mini", "started_at": AT,
                              "input_tokens": 300, "price_source": "genai-prices",
                              **({"status": "skipped", "cost_nano_usd": 0, "shadow_cost_nano_usd": 84_242}
                                 if i == 5 else {"status": "ok", "cost_nano_usd": 84_242})})
    for i in range(2):  # a self-hosted model nobody priced
        w.put("queries", {"query_id": f"h{i}", "kind": "query", "status": "ok", "started_at": AT, "latency_ms": 10.0})
        w.put("stage_calls", {"query_id": f"h{i}", "stage": "generate", "status": "ok", "model": "house-llm",
                              "cost_nano_usd": None, "price_source": "unpriced", "input_tokens": 300,
                              "started_at": AT})
    assert w.flush(10)
    w.close()
    return Ledger.open(tmp_path / "l.sqlite")


def test_per_model_figures_are_over_the_queries_that_called_it_and_unpriced_stays_unpriced(tmp_path):
    with _ledger(tmp_path) as L:
        rows = {r["model"]: r for r in L.by("model")}
        mini, house = rows["gpt-4o-mini"], rows["house-llm"]
        assert mini["queries"] == 5 and mini["cost_per_1k_queries_usd"] == 1000 * 84_242e-9  # not 5/6 of it
        assert mini["shadow_cost_usd"] == 84_242e-9  # the skipped row is still booked to the model
        assert house["cost_usd"] is None and house["cost_per_1k_queries_usd"] is None and house["cost_is_lower_bound"]
        out = {}
        for fmt in ("json", "csv", "table"):
            buf = io.StringIO()
            write_by(L, "model", fmt, buf, Console(file=io.StringIO(), width=80), variant=None)
            out[fmt] = buf.getvalue()
    js = {r["model"]: r for r in json.loads(out["json"])["rows"]}
    assert js["house-llm"]["cost_usd"] is None  # null, never 0.0
    by_csv = {r["model"]: r for r in csv.DictReader(io.StringIO(out["csv"]))}
    assert by_csv["house-llm"]["cost_usd"] == "" and by_csv["house-llm"]["cost_is_lower_bound"] == "True"
    assert by_csv["gpt-4o-mini"]["cost_usd"] == "0.00042121" and not re.search(r"\de-\d", out["csv"])
    lines = out["table"].splitlines()
    assert "over the queries that called it" in out["table"] and max(map(len, lines)) <= 80
    house_line = next(x for x in lines if "house-llm" in x)
    cells = [c.strip() for c in house_line.split("│")]
    assert (cells[3], cells[4], cells[5]) == ("unpriced", "-", "unpriced")  # cost, eval (none graded), per 1k q
