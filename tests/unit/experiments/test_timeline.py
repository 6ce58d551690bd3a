"""An experiment over time (rag_app/experiments/timeline.py, tracing/ledger/series.py): the comparison of now
made at the end of every hour or day, from the rollups' hour rows (m022); its last point is the comparison of
now, field for field."""
from __future__ import annotations

import dataclasses
import random
import sqlite3
from datetime import date

import pytest

from rag_app.core.errors import RagError
from rag_app.experiments.comparison import compare_live
from rag_app.experiments.variants import Experiment
from tracing.ledger import Ledger, LedgerWriter

HOURS = 40  # over two days


def write_experiment(path, hours=HOURS, per_hour=30, start="2026-03-01", treat_cost=600, seed=5, shadow=False,
                     scored=True, exp="e", gap_hours=(7, 8), ctrl_cost=1000, share=lambda h: 0.5, grounded=(0.8, 0.78),
                     variants=("a", "b"), refusals=False):
    """Live traffic of a split (`share(hour)` of it treated; 50%) or a shadow experiment hour by hour, through
    the real writer: control costs about `ctrl_cost` nano-dollars, treatment `treat_cost`; every answer scored,
    every 7th marked right, as many errors in each arm. No queries in `gap_hours`: those hours have no point.
    `refusals`: each answer also flagged a refusal or not (one in 20 refuses, groundedness null) and every
    third graded by the judge (faithfulness and score), as answers are scored since refusals were kept."""
    rng = random.Random(seed)
    more = random.Random(seed + 1)  # the refusal and judge signals: the other figures stay as they were
    w = LedgerWriter(path, batch=50)
    said = []
    d0 = date.fromisoformat(start).toordinal()
    k = 0
    for h in range(hours):
        if h in gap_hours:
            continue
        day = date.fromordinal(d0 + h // 24).isoformat()
        for i in range(per_hour):
            arm = "treatment" if i % 10 < round(share(h) * 10) else "control"
            variant = variants[arm == "treatment"]
            for side in (("live", "shadow") if shadow and arm == "treatment" else ("live",)):
                if shadow and arm == "treatment" and side == "live":
                    continue
                k += 1
                qid = f"{exp}-q{k:05d}"
                ts = f"{day}T{h % 24:02d}:{i * 2 % 60:02d}:00.000+00:00"
                mean = ctrl_cost if arm == "control" else treat_cost
                cost = int(rng.gauss(mean, mean / 12))
                w.put("queries", {"query_id": qid, "kind": "query", "question": f"问题{k}", "variant": variant,
                                  "experiment": exp, "mode": "llm",
                                  "status": "error" if i in (0, 9) and h % 10 == 0 else "ok",  # as many per arm
                                  "started_at": ts, "latency_ms": rng.uniform(200, 900), "arm": arm, "sticky": 1,
                                  "origin": "shadow" if side == "shadow" else "live",
                                  "shadow_of": f"{exp}-q00001" if side == "shadow" else None, "user_id": f"u{i}"})
                w.put("stage_calls", {"query_id": qid, "stage": "generate", "status": "ok", "model": "m",
                                      "input_tokens": 100, "cost_nano_usd": cost, "shadow_cost_nano_usd": cost,
                                      "price_source": "bundled", "variant": variant, "experiment": exp,
                                      "started_at": ts})
                if scored:
                    g = min(1.0, max(0.0, rng.gauss(grounded[arm == "treatment"], 0.1)))
                    signals = [("local", "groundedness", g), ("local", "invalid_citations", int(rng.random() < 0.1))]
                    if refusals:
                        refused = more.random() < 0.05
                        signals = [("local", "groundedness", None if refused else g), signals[1],
                                   ("local", "refusal", float(refused))]
                        if k % 3 == 0:
                            f = min(1.0, max(0.0, more.gauss(0.85, 0.1)))
                            signals += [("judge", "faithfulness", f), ("judge", "judge_score", f)]
                    for source, metric, value in signals:
                        w.put("query_quality", {"query_id": qid, "metric": metric, "source": source, "value": value,
                                                "recorded_at": ts})
                    if k % 7 == 0:
                        said.append((qid, f"u{i}", 1, None, ts))
    assert w.flush(30)
    w.close()
    with Ledger.open(path) as L:  # users' word goes in as the service writes it
        for row in said:
            L.add_feedback(*row)


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    path = tmp_path_factory.mktemp("timeline") / "ledger.sqlite"
    write_experiment(path)
    return path


EXP = Experiment("e", "a", "b", 50, "s")


def test_the_last_point_is_the_comparison_of_now(split):
    with Ledger.open(split) as L:
        now = compare_live(L, EXP, today=date(2026, 3, 3), over_time="hour")
    s = now["over_time"]
    assert s["every"] == "hour" and s["cumulative"] and s["valid_at_every_point"]
    assert list(s["metrics"]) == list(now["metrics"])  # primary, then each guardrail, in the verdict's order
    for m, r in now["metrics"].items():
        for k in ("diff", "low", "high"):
            got = s["metrics"][m][k][-1]
            assert (got is None and r[k] is None) or got == pytest.approx(r[k], rel=1e-9, abs=1e-12), (m, k)
        assert s["metrics"][m]["status"][-1] == r["status"], m
    assert (s["verdict"][-1], s["decided_by"][-1]) == (now["verdict"], now["decided_by"])
    last = s["verdict_changes"][-1]  # when the verdict last changed, and why (its figures then)
    assert (last["verdict"], last["decided_by"]) == (now["verdict"], now["decided_by"])
    assert last["reason"].split(",")[0] == now["reason"].split(",")[0] == "cost per query falls by >= 10.0%"
    assert {a: q[-1] for a, q in s["queries"].items()} == {a: now["arms"][a]["queries"] for a in ("control", "treatment")}
    assert s["srm_pvalue"][-1] == pytest.approx(now["srm"]["pvalue"])
    # quality guardrails are in it: every answer was scored
    assert {"groundedness", "invalid_citation_rate", "feedback_score"} <= set(s["metrics"])


def test_a_point_per_hour_with_data_and_the_band_narrows_until_sure(split):
    with Ledger.open(split) as L:
        s = compare_live(L, EXP, over_time="hour")["over_time"]
    assert len(s["at"]) == HOURS - 2  # the two hours without queries have no point
    assert s["at"][0] == "2026-03-01T00:00:00+00:00" and "2026-03-01T07:00:00+00:00" not in s["at"]
    assert s["at"][-1] == "2026-03-02T15:00:00+00:00"
    cost = s["metrics"]["cost_per_query"]
    assert cost["status"][0] == "not enough data" and cost["low"][0] is None  # 15 queries an arm: nothing said
    widths = [h - lo for lo, h in zip(cost["low"], cost["high"]) if lo is not None]
    assert widths[-1] < widths[0] / 3  # the sequence tightens as queries come
    assert cost["status"][-1] == "better" and s["verdict"][-1] == "promote"
    first_sure = cost["status"].index("better")
    assert cost["since"] == s["at"][first_sure]  # held since it first became sure
    assert all(st == "better" for st in cost["status"][first_sure:])
    # each change of verdict is listed once, with its reason, oldest first
    assert [c["verdict"] for c in s["verdict_changes"]][-1] == "promote"
    assert s["verdict_changes"][0]["at"] == s["at"][0]
    # each arm's own hour: 15 queries, cost about 1000 vs 600 nano-dollars
    assert s["arms"]["control"]["queries"][0] == 15 and s["arms"]["treatment"]["queries"][0] == 15
    assert s["arms"]["control"]["cost_per_query"][5] == pytest.approx(1000e-9, rel=0.1)
    assert s["arms"]["treatment"]["cost_per_query"][5] == pytest.approx(600e-9, rel=0.15)
    assert s["arms"]["control"]["groundedness"][5] == pytest.approx(0.8, abs=0.1)
    assert s["rollout_pct"] == [50.0] * len(s["at"])


def test_day_buckets_and_auto(split):
    with Ledger.open(split) as L:
        day = compare_live(L, EXP, over_time="day")["over_time"]
        auto = compare_live(L, EXP, over_time="auto")["over_time"]
        hour = compare_live(L, EXP, over_time="hour")["over_time"]
    assert day["every"] == "day" and day["at"] == ["2026-03-01T00:00:00+00:00", "2026-03-02T00:00:00+00:00"]
    assert day["queries"] == {a: [hour["queries"][a][21], hour["queries"][a][-1]] for a in hour["queries"]}
    for k in ("diff", "low", "high"):  # the end of the last day is the end of the last hour
        assert day["metrics"]["latency_ms"][k][-1] == pytest.approx(hour["metrics"]["latency_ms"][k][-1])
    assert auto["every"] == "hour"  # two days: hour by hour


def test_a_long_experiment_reads_day_by_day_and_refuses_a_month_of_hours(tmp_path):
    path = tmp_path / "l.sqlite"
    write_experiment(path, hours=24 * 40, per_hour=2, scored=False, gap_hours=())
    with Ledger.open(path) as L:
        assert compare_live(L, EXP, over_time="auto")["over_time"]["every"] == "day"
        with pytest.raises(RagError, match="spans 40 days: hour by hour covers at most 31 days"):
            compare_live(L, EXP, over_time="hour")
        with pytest.raises(RagError, match="every must be one of auto, hour, day"):
            compare_live(L, EXP, over_time="week")


def test_a_shadow_experiment_compares_the_shadow_runs(tmp_path):
    path = tmp_path / "l.sqlite"
    write_experiment(path, hours=6, shadow=True, gap_hours=())
    with Ledger.open(path) as L:
        res = compare_live(L, Experiment("e", "a", "b", 100, "s", mode="shadow"), over_time="hour")
    s = res["over_time"]
    assert len(s["at"]) == 6 and s["queries"]["treatment"][-1] == res["arms"]["treatment"]["queries"] == 90
    assert s["srm_pvalue"] == [None] * 6  # no split to check


def test_a_ramp_shows_each_points_rollout_and_checks_the_split_of_its_step(tmp_path):
    """A ramp at 10% for six hours, then 50%: each point carries the rollout then in force, and its sample-ratio
    check counts the queries of that step alone (as the ramp does), so the move is no mismatch."""
    from rag_app.experiments.comparison import compare_served

    path = tmp_path / "ramped.sqlite"
    write_experiment(path, hours=30, share=lambda h: 0.1 if h < 6 else 0.5, gap_hours=())
    exp = Experiment("e", "a", "b", 10, "s", ramp={"steps": [10, 50], "min_queries_per_step": 10})
    with Ledger.open(path) as L:
        assert L.add_experiment_event({"experiment": "e", "seq": 1, "at": "2026-03-01T06:00:00.000+00:00",
                                       "action": "advance", "from_pct": 10, "to_pct": 50, "reason": "step held"})
        res = compare_served(L, exp, over_time="hour")
        whole = compare_live(L, dataclasses.replace(exp, rollout_pct=50))  # every step's queries against 50%
    s = res["over_time"]
    assert s["rollout_pct"] == [10.0] * 6 + [50.0] * 24
    assert all(p > 0.01 for p in s["srm_pvalue"]) and res["srm"]["pvalue"] > 0.01 and not res["srm"]["flagged"]
    assert whole["srm"]["flagged"]  # what the check said before it read the step alone
    assert res["ramp"]["events"][0]["to_pct"] == 50 and res["ramp"]["rollout_pct"] == 50
    assert res["ramp"]["step_started_at"] == "2026-03-01T06:00:00.000+00:00"


def test_hour_rollups_add_up_to_the_day_and_quality_is_in_the_totals(split):
    """The hour rows of a day add up to its day row; each answer's quality is in its totals and the rollups,
    so an arm's quality read from them equals the one read from every scored answer (the reference)."""
    conn = sqlite3.connect(split)
    hours = conn.execute("SELECT day, variant, experiment, side, SUM(queries), SUM(cost_nano_usd), SUM(latency_sq), "
                         "SUM(grounded_n), SUM(grounded_sum), SUM(feedback_n) FROM report_rollup WHERE dim = 'hour' "
                         "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4").fetchall()
    days = conn.execute("SELECT day, variant, experiment, side, queries, cost_nano_usd, latency_sq, grounded_n, "
                        "grounded_sum, feedback_n FROM report_rollup WHERE dim = 'all' ORDER BY 1, 2, 3, 4").fetchall()
    conn.close()
    assert len(days) == 4 and [h[:6] for h in hours] == [d[:6] for d in days]
    assert [h[6:] for h in hours] == [pytest.approx(d[6:]) for d in days]
    with Ledger.open(split) as L:
        for variant in ("a", "b"):
            rolled = L.arm_quality("e", variant, "live")
            every_answer = answers_read_one_by_one(split, variant)
            assert set(rolled["_moments"]) == set(every_answer) == {"groundedness", "invalid_citation_rate",
                                                                    "feedback_score"}
            for m, (n, s1, s2) in every_answer.items():
                assert rolled["_moments"][m] == (n, pytest.approx(s1), pytest.approx(s2)), m
            assert rolled["scored"] == every_answer["invalid_citation_rate"][0] > 0


def answers_read_one_by_one(path, variant: str) -> dict:
    """The reference: an arm's quality moments from every scored answer and word of feedback, in plain SQL."""
    conn = sqlite3.connect(path)
    arm = ("SELECT query_id FROM query_totals WHERE kind = 'query' AND experiment = 'e' AND variant = ? "
           "AND side = 'live'")
    out = {}
    for metric, name, rate in (("groundedness", "groundedness", False), ("invalid_citations", "invalid_citation_rate", True)):
        n, s1, s2 = conn.execute(
            f"SELECT COUNT(value), SUM({'value > 0' if rate else 'value'}), SUM({'value > 0' if rate else 'value * value'}) "
            f"FROM query_quality WHERE source = 'local' AND metric = ? AND value IS NOT NULL AND query_id IN ({arm})",
            (metric, variant)).fetchone()
        if n:
            out[name] = (n, float(s1), float(s2))
    n, s1, s2 = conn.execute(f"SELECT COUNT(score), SUM(score), SUM(score * score) FROM query_feedback "
                             f"WHERE query_id IN ({arm})", (variant,)).fetchone()
    if n:
        out["feedback_score"] = (n, float(s1), float(s2))
    conn.close()
    return out


QUALITY_COLUMNS = ("grounded_n", "cites_n", "cites_bad", "claims_n", "claims_bad", "refusal_n", "refusal_yes", "judge_n", "faith_n", "feedback_n",
                   "feedback_sum", "feedback_sq", "feedback_up", "feedback_down", "grounded_sum", "grounded_sq",
                   "judge_sum", "judge_sq", "faith_sum", "faith_sq")


def test_m022_brings_a_folded_ledger_to_hour_rows_and_quality_totals(split, tmp_path):
    """A ledger from before m022 (folded totals, no hour rows, no quality in the totals, no trigger on quality
    or feedback): the migration writes the hour rows at once and marks every scored query, whose quality the
    writers fold in; the result equals the rollups the current writer kept all along, and a rebuild."""
    import shutil

    path = tmp_path / "old.sqlite"
    shutil.copy(split, path)
    conn = sqlite3.connect(path)

    def rollups():  # float sums rounded: the migration and refold add in another order than the writer's batches
        return [tuple(round(x, 3) if isinstance(x, float) else x for x in r) for r in conn.execute(
            "SELECT * FROM report_rollup ORDER BY 1, 2, 3, 4, 5, 6")]
    kept = rollups()
    assert any(r[0] == "hour" for r in kept)
    conn.execute("DELETE FROM report_rollup WHERE dim = 'hour'")
    for index in ("user_started", "key_started", "grounded", "marked_wrong", "unsupported", "refusal",
                  "invalid_citations"):
        conn.execute(f"DROP INDEX query_totals_{index}")
    conn.execute("CREATE INDEX query_totals_user_started ON query_totals (kind, user_id, started_at)")  # as m020 made
    conn.execute("CREATE INDEX query_totals_key_started ON query_totals (kind, api_key_id, started_at)")  # them
    for table in ("query_totals", "report_rollup"):
        for col in QUALITY_COLUMNS:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
    for table in ("query_quality", "query_feedback"):
        for event in ("insert", "update", "delete"):
            conn.execute(f"DROP TRIGGER {table}_dirty_{event}")
    conn.execute("DELETE FROM _migrations WHERE name = 'm022_hour_rollups_and_quality_totals'")
    conn.commit()
    with Ledger.open(path) as L:  # migrates: hour rows now, quality once the writers fold the marked queries
        assert "m022_hour_rollups_and_quality_totals" not in L.pending
        with L.engine.connect() as db:  # m020's user and key indexes now end in query_id
            assert [r[2] for r in db.exec_driver_sql("PRAGMA index_info(query_totals_key_started)")] == [
                "kind", "api_key_id", "started_at", "query_id"]
        assert L.audit()["totals_backlog_queries"] == 1140  # every scored query
        assert L.fold_backlog() == 1140
    assert rollups() == kept
    conn.execute("INSERT INTO query_feedback (query_id, user_id, score, recorded_at) VALUES ('e-q00002', 'z', -1, 't')")
    assert conn.execute("SELECT query_id FROM rollup_dirty").fetchall() == [("e-q00002",)]  # the trigger marks it
    conn.close()


def test_the_api_serves_the_same_computation_as_compare_json(split, tmp_path):
    """GET /v1/experiments/{name}?over_time= is `rag experiment compare --over-time --json` (one computation);
    a bad `over_time` is a one-line 422, never a 500."""
    import json
    import shutil

    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from rag_app.cli.main import app as cli
    from rag_app.config.settings import Settings
    from rag_app.service.app import create_app

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(split, data / "ledger.sqlite")
    (data / "exp.json").write_text(json.dumps({"variants": {"a": {}, "b": {"top_n": 3}}, "experiments": {
        "e": {"control": "a", "treatment": "b", "rollout_pct": 50, "seed": "s"}}}))
    settings = Settings(_env_file=None, data_dir=data, experiments_file=data / "exp.json")
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        api = c.get("/v1/experiments/e", params={"over_time": "hour"}).json()
        bad = c.get("/v1/experiments/e", params={"over_time": "fortnight"})
        plain = c.get("/v1/experiments/e").json()
    env = {"RAG_DATA_DIR": str(data), "RAG_EXPERIMENTS_FILE": str(data / "exp.json"), "COLUMNS": "80"}
    res = CliRunner().invoke(cli, ["experiment", "compare", "e", "--json", "--over-time", "--every", "hour"], env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["over_time"] == api["over_time"]
    assert "over_time" not in plain and plain["metrics"] == api["metrics"]
    assert bad.status_code == 422 and bad.json()["detail"] == "every must be one of auto, hour, day, got 'fortnight'"
    text = CliRunner().invoke(cli, ["experiment", "compare", "e", "--over-time"], env=env).stdout
    assert "cost_per_query over time (by hour, cumulative)" in text and "03-02 15:00" in text
    assert max(len(line) for line in text.splitlines()) <= 80
