"""Every stage in every breakdown, evaluation spend beside the answers', money at risk (#45 items 2, 4, 5).

A ledger written through the real writer holds answers with the rewrite lever's stage, a stage no list in
the code names (`translate`, as a stage added later would), a wholly unpriced model, a timed-out call
with output tokens at risk, and judge runs (evaluation spend, graded answers' user and key). Every view —
the per-stage totals, `--by stage`, `--by model`, the rollups, the per-query CSV columns — holds every
billed stage and adds up to the total; answer plus evaluation spend per day equals the SQL sum of every
stage row of that day's queries and judge runs, in JSON, CSV and the table. 0.9.x: rewrite was 17.6% of
a mixed run's spend and in no per-stage view; the judge (82% of one bill) was in no --by row."""
from __future__ import annotations

import csv
import io
import json
import sqlite3

import pytest
from rich.console import Console

from rag_app.present.cost_render import usd
from rag_app.present.report_export import write_by, write_report
from tracing.ledger import Ledger, LedgerWriter

DAYS = ("2026-11-02", "2026-11-03")


def _t(day: str, i: int) -> str:
    return f"{day}T{i % 24:02d}:{i % 60:02d}:00.000+00:00"


def write_ledger(path) -> None:
    w = LedgerWriter(path, batch=5)
    for i in range(24):
        day, qid = DAYS[i % 2], f"q{i:02d}"
        common = {"query_id": qid, "variant": "a" if i % 3 else "b", "started_at": _t(day, i)}
        w.put("queries", {**common, "kind": "query", "question": f"问{i}", "mode": "llm", "status": "ok",
                          "user_id": f"u{i % 4}", "api_key_id": f"k{i % 2}", "origin": "live"})
        w.put("stage_calls", {**common, "stage": "rewrite", "status": "ok", "model": "gpt-4o-mini", "input_tokens": 180,
                              "output_tokens": 40, "cost_nano_usd": 180 * 150 + 40 * 600, "price_source": "genai-prices"})
        w.put("stage_calls", {**common, "stage": "embed_query", "status": "ok", "model": "bge", "input_tokens": 20,
                              "cost_nano_usd": 0, "shadow_cost_nano_usd": 400, "price_source": "rate"})
        if i % 4 == 0:  # a stage added later: nothing in the code names it
            w.put("stage_calls", {**common, "stage": "translate", "status": "ok", "model": "gpt-4o-mini",
                                  "input_tokens": 300, "output_tokens": 100, "cost_nano_usd": 300 * 150 + 100 * 600,
                                  "price_source": "genai-prices"})
        model = "house-llm-7b" if i % 6 == 5 else "gpt-4o-mini"  # four answers from a model with no price
        unpriced = model == "house-llm-7b"
        gen = {**common, "stage": "generate", "model": model, "input_tokens": 1500, "output_tokens": 200,
               "price_source": "unpriced" if unpriced else "genai-prices",
               "cost_nano_usd": None if unpriced else 1500 * 150 + 200 * 600}
        if i == 7:  # a timed-out attempt first: 312 output tokens may still be billed, at $0.60/M
            w.put("stage_calls", {**gen, "attempt": 1, "status": "timeout", "output_tokens": 200,
                                  "output_at_risk_tokens": 312, "output_at_risk_nano_usd": 312 * 600})
            gen["attempt"] = 2
        w.put("stage_calls", {**gen, "status": "ok"})
        if i % 3 == 0:  # graded by the judge: evaluation spend, booked to the answer's user, key and day
            run = {"query_id": f"judge:{qid}", "variant": common["variant"], "started_at": _t(day, i + 1)}
            w.put("queries", {**run, "kind": "judge", "status": "ok", "origin": "judge", "user_id": f"u{i % 4}",
                              "api_key_id": f"k{i % 2}"})
            w.put("stage_calls", {**run, "stage": "judge", "status": "ok", "model": "gpt-4.1", "input_tokens": 2500,
                                  "output_tokens": 120, "cost_nano_usd": 2500 * 2000 + 120 * 8000,
                                  "price_source": "genai-prices"})
    w.put("queries", {"query_id": "hit1", "kind": "query", "status": "ok", "started_at": _t(DAYS[0], 30),
                      "cache_hit": 1, "saved_cost_nano_usd": 5000, "origin": "cache", "user_id": "u0"})
    assert w.flush(30)
    w.close()


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    path = tmp_path_factory.mktemp("stages") / "ledger.sqlite"
    write_ledger(path)
    with Ledger.open(path) as L:
        conn = sqlite3.connect(path)
        yield L, conn
        conn.close()


def sql_day_sums(conn) -> dict[str, int]:
    """Every stage row of the day's queries and judge runs, summed in SQL: what the provider billed."""
    return dict(conn.execute("SELECT substr(q.started_at, 1, 10), SUM(s.cost_nano_usd) FROM stage_calls s "
                             "JOIN queries q USING (query_id) WHERE q.kind IN ('query', 'judge') GROUP BY 1"))


def test_every_billed_stage_is_in_the_per_stage_totals_and_they_add_up(ledger):
    L, conn = ledger
    for rep in (L.report(), L.report_full()):
        stages = rep.totals["stages"]
        assert list(stages)[:1] == ["rewrite"] and "translate" in stages and "judge" not in stages
        assert sum(v["cost_usd"] for v in stages.values()) == pytest.approx(rep.totals["cost_usd"], rel=1e-12)
        assert stages["translate"]["rows"] == 6 and stages["rewrite"]["rows"] == 24
    by_stage = {r["stage"]: r for r in L.by("stage")}
    assert {"rewrite", "translate", "generate", "embed_query"} <= set(by_stage)
    answers = sum(r["cost_usd"] or 0 for r in by_stage.values())
    assert answers == pytest.approx(L.report().totals["cost_usd"], rel=1e-12)
    assert by_stage["translate"]["queries"] == 6 and by_stage["judge"]["queries"] == 0
    assert by_stage["judge"]["evaluation_cost_usd"] == pytest.approx(8 * (2500 * 2000 + 120 * 8000) / 1e9)


def test_by_model_books_every_stage_to_its_model_and_counts_a_wholly_unpriced_model(ledger):
    L, _ = ledger
    models = {r["model"]: r for r in L.by("model")}
    assert sum(r["cost_usd"] or 0 for r in models.values()) == pytest.approx(L.report().totals["cost_usd"], rel=1e-12)
    mini = models["gpt-4o-mini"]  # rewrite, translate and generate (21 rows: one timed out): each query once
    assert mini["queries"] == 24 and round(mini["cost_usd"] * 1e9) == (
        24 * (180 * 150 + 40 * 600) + 6 * (300 * 150 + 100 * 600) + 21 * (1500 * 150 + 200 * 600))
    house = models["house-llm-7b"]
    assert (house["queries"], house["unpriced_queries"], house["cost_usd"]) == (4, 4, None)  # 0.9.x: null
    assert models["gpt-4.1"]["queries"] == 0 and models["gpt-4.1"]["evaluation_runs"] == 8


@pytest.mark.parametrize("dim", ["day", "user", "key", "model", "variant"])
def test_answer_plus_evaluation_is_every_billed_row_in_every_dim(ledger, dim):
    L, conn = ledger
    rows = L.by(dim)
    total = sum(conn.execute("SELECT SUM(s.cost_nano_usd) FROM stage_calls s JOIN queries q USING (query_id) "
                             "WHERE q.kind IN ('query', 'judge')").fetchone())
    got = sum(round(1e9 * ((r["cost_usd"] or 0) + (r["evaluation_cost_usd"] or 0))) for r in rows)
    assert got == total and all("evaluation_cost_usd" in r for r in rows)


def test_per_day_in_json_csv_and_the_table(ledger):
    L, conn = ledger
    expect = sql_day_sums(conn)
    out = io.StringIO()
    write_by(L, "day", "json", out, Console(file=io.StringIO()), variant=None)
    for r in json.loads(out.getvalue())["rows"]:
        assert round(1e9 * (r["cost_usd"] + r["evaluation_cost_usd"])) == expect[r["day"]]
    out = io.StringIO()
    write_by(L, "day", "csv", out, Console(file=io.StringIO()), variant=None)
    for r in csv.DictReader(io.StringIO(out.getvalue())):
        assert round(1e9 * (float(r["cost_usd"]) + float(r["evaluation_cost_usd"]))) == expect[r["day"]]
    out = io.StringIO()
    write_by(L, "day", "table", out, Console(file=io.StringIO()), variant=None)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80 and "eval" in lines[1] + lines[2]
    for r in L.by("day"):
        row = next(line for line in lines if r["day"] in line)
        assert usd(r["cost_usd"]) in row and usd(r["evaluation_cost_usd"]) in row


def test_the_per_query_csv_has_every_stage_and_the_grading_cost(ledger):
    L, conn = ledger
    out = io.StringIO()
    write_report(L, "csv", out, Console(file=io.StringIO()), last=None, variant=None, prices="original", table_rows=20)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    header = list(rows[0])
    for st in ("rewrite", "translate", "embed_query", "generate"):
        assert f"{st}_cost_usd" in header and f"{st}_tokens" in header
    stage_cols = [c for c in header if c.endswith("_cost_usd") and c[:-len("_cost_usd")] + "_tokens" in header]
    for r in rows:
        if r["cost_usd"]:
            assert sum(float(r[c] or 0) for c in stage_cols) == pytest.approx(float(r["cost_usd"]), rel=1e-9)
    judged = {r["query_id"]: r["evaluation_cost_usd"] for r in rows}
    assert float(judged["q00"]) == pytest.approx((2500 * 2000 + 120 * 8000) / 1e9) and judged["q01"] == ""


def test_the_rollups_equal_the_full_computation_and_a_rebuild(ledger):
    L, conn = ledger
    assert L.report().queries == L.report_full().queries  # every stage's columns, evaluation, at risk
    before = sorted(conn.execute("SELECT * FROM report_rollup"))
    stage_totals = sorted(conn.execute("SELECT * FROM query_stage_totals"))
    L.rebuild_totals()
    assert sorted(conn.execute("SELECT * FROM report_rollup")) == before
    assert sorted(conn.execute("SELECT * FROM query_stage_totals")) == stage_totals


def test_money_at_risk_prices_output_at_risk_at_the_rows_rate(ledger):
    L, _ = ledger
    for t in (L.report().totals, L.report_full().totals):
        assert t["output_at_risk_tokens"] == 312
        assert t["at_risk_output_usd"] == pytest.approx(312 * 600 / 1e9)
        assert t["at_risk_usd"] == pytest.approx(t["at_risk_output_usd"] + t["at_risk_unknown_attempts_usd"])
    q07 = next(r for r in L.report().queries if r["query_id"] == "q07")
    assert q07["output_at_risk_usd"] == pytest.approx(312 * 600 / 1e9)
