"""compare_live with the anytime-valid intervals, primary/guardrail metrics and the method named."""
from __future__ import annotations

import json
import random
from datetime import date

import pytest

from rag_app.experiments.comparison import compare_live
from rag_app.experiments.variants import Experiment
from tests.unit.experiments.test_comparison import seed_ledger


def moderate_drop(folder, n=200, file="l.sqlite"):
    """A 10% cost drop at 200 queries per arm: about 3.3 standard errors. A one-look Welch interval
    excludes 0; an interval that may be read at every look cannot say so yet."""
    rng = random.Random(5)
    control = [max(1, int(rng.gauss(1000, 300))) for _ in range(n)]
    treatment = [max(1, int(rng.gauss(900, 300))) for _ in range(n)]
    return seed_ledger(folder / file, control, treatment)


def exp(analysis=None, **guard):
    return Experiment("e", "a", "b", 50, "s", guardrails={"min_cost_drop_pct": 0, **guard}, analysis=analysis)


def test_the_result_keeps_its_fields_and_names_the_method(tmp_path):
    res = compare_live(moderate_drop(tmp_path), exp())
    json.dumps(res)  # the API returns it as JSON: plain numbers only
    assert {"experiment", "mode", "rollout_pct", "cost_metric", "arms", "differences", "srm", "guardrails",
            "verdict", "reason"} <= set(res)
    assert res["analysis"]["method"] == "sequential" and res["analysis"]["expected_queries"] == 5000
    assert res["analysis"]["alpha_split"] == {"rule": "preferential Bonferroni", "primary": 0.04, "per_guardrail": 0.0025}
    m = res["metrics"]["cost_per_query"]
    assert (m["role"], m["method"], m["alpha"]) == ("primary", "sequential", 0.04)
    assert m["diff"] == pytest.approx(res["differences"]["cost_per_query"]["diff"])
    assert res["srm"]["level"] == "ok" and res["decided_by"] == "cost_per_query"


def test_a_drop_welch_would_call_is_held_until_it_holds_at_every_look(tmp_path):
    conn = moderate_drop(tmp_path)
    res = compare_live(conn, exp())
    assert res["differences"]["cost_per_query"]["ci95_high"] < 0  # the one-look interval excludes 0 ...
    m = res["metrics"]["cost_per_query"]
    assert m["low"] < 0 < m["high"]  # ... the anytime-valid one does not, yet
    assert res["verdict"] == "hold" and "not established at 96% anytime-valid confidence" in res["reason"]
    fixed = compare_live(conn, exp({"method": "fixed"}))
    assert fixed["verdict"] == "promote" and "fixed-horizon" in fixed["reason"]


def test_hybrid_switches_to_the_fixed_interval_at_the_planned_end(tmp_path):
    conn = moderate_drop(tmp_path)
    by_size = compare_live(conn, exp({"planned_queries": 400}))
    assert by_size["analysis"]["method"] == "hybrid" and by_size["analysis"]["phase"] == "fixed"
    assert by_size["metrics"]["cost_per_query"]["alpha"] == pytest.approx(0.02)
    assert by_size["verdict"] == "promote"  # the 98% fixed-horizon read at the planned size
    early = compare_live(conn, exp({"planned_queries": 10_000}))
    assert early["analysis"]["phase"] == "sequential" and early["verdict"] == "hold"
    dated = exp({"planned_end": "2026-12-01"})
    assert compare_live(conn, dated, today=date(2026, 11, 30))["analysis"]["phase"] == "sequential"
    assert compare_live(conn, dated, today=date(2026, 12, 1))["analysis"]["phase"] == "fixed"


def test_failing_treatment_queries_roll_back_on_the_error_guardrail(tmp_path):
    conn = seed_ledger(tmp_path / "l.sqlite", [1000] * 500, [600] * 500)
    conn.execute("UPDATE queries SET status = 'error' WHERE variant = 'b' AND CAST(substr(query_id, 7) AS INTEGER) < 60")
    conn.commit()
    res = compare_live(conn, exp())
    assert res["arms"]["treatment"]["error_rate"] == pytest.approx(0.12)
    assert (res["verdict"], res["decided_by"]) == ("roll back", "error_rate")
    assert res["reason"].startswith("guardrail error rate is higher in treatment, +12.00 pts")


def test_latency_as_the_primary_metric(tmp_path):
    conn = seed_ledger(tmp_path / "l.sqlite", [1000] * 300, [1000] * 300)
    conn.execute("UPDATE queries SET latency_ms = 80 + (CAST(substr(query_id, 7) AS INTEGER) % 7) WHERE variant = 'b'")
    conn.execute("UPDATE queries SET latency_ms = 100 + (CAST(substr(query_id, 7) AS INTEGER) % 5) WHERE variant = 'a'")
    conn.commit()
    res = compare_live(conn, exp({"primary_metric": "latency_ms"}))
    assert res["analysis"]["guardrail_metrics"] == ["cost_per_query", "error_rate", "timeout_rate", "retry_rate"]
    assert (res["verdict"], res["decided_by"]) == ("promote", "latency_ms")
    assert res["reason"].startswith("latency is lower in treatment, -19 ms")  # 83 ms vs 102 ms on average


def test_cli_compare_shows_the_method_the_metrics_and_who_decided(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rag_app.cli.main import app

    data = tmp_path / "data"
    data.mkdir()
    conn = moderate_drop(data, file="ledger.sqlite")
    conn.execute("UPDATE queries SET variant = 'default' WHERE variant = 'a'")
    conn.execute("UPDATE queries SET variant = 'top3' WHERE variant = 'b'")
    conn.commit()
    conn.close()
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top3": {"top_n": 3}}, "experiments": {"e": {
        "control": "default", "treatment": "top3", "rollout_pct": 50, "seed": "s",
        "guardrails": {"min_cost_drop_pct": 0}, "analysis": {"expected_queries": 2000}}}}))
    monkeypatch.setenv("RAG_DATA_DIR", str(data))
    monkeypatch.setenv("RAG_EXPERIMENTS_FILE", str(cfg))
    res = CliRunner().invoke(app, ["experiment", "compare", "e"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.replace("│", " ").split())  # table cells, not their borders
    assert "sequential (anytime-valid; now sequential), alpha 0.05, N_tune 2,000" in text
    assert "cost_per_query primary 0.04" in text and "error_rate guardrail 0.0025" in text
    assert "verdict: hold (decided by cost_per_query)" in text and "one-look 95% CI" in text


def test_cli_compare_shows_answer_quality_beside_cost_within_80_columns(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rag_app.cli.main import app
    from tests.unit.experiments.test_comparison import seed_feedback, seed_quality

    data = tmp_path / "data"
    data.mkdir()
    conn = moderate_drop(data, file="ledger.sqlite")
    seed_quality(conn, "a", 200, 0.9, 0)
    seed_quality(conn, "b", 200, 0.5, 2)
    seed_feedback(conn, "b", 40, -1)
    conn.close()
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"experiments": {"e": {"control": "a", "treatment": "b", "rollout_pct": 50,
                                                     "seed": "s"}}, "variants": {"a": {}, "b": {"top_n": 3}}}))
    monkeypatch.setenv("RAG_DATA_DIR", str(data))
    monkeypatch.setenv("RAG_EXPERIMENTS_FILE", str(cfg))
    monkeypatch.setenv("COLUMNS", "80")
    res = CliRunner().invoke(app, ["experiment", "compare", "e"])
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80
    text = " ".join(res.output.replace("│", " ").split())
    # scored, grounded, bad cites, refused, feedback, judge, faithful
    assert "answer quality" in text and "treatment 200 50.0% 100.0% - -0.75 - -" in text
    assert "groundedness guardrail" in text and "invalid_citation_rate guardrail" in text
    assert "feedback_score guardrail" not in text  # feedback in one arm only: nothing to compare
    assert "verdict: roll back" in text
