"""`rag serve`'s ramp on a real SQLite ledger: a step advances once each arm has its minimum and no
guardrail crossed, rolls back to 0% (an event row and the webhook) when one does, stays on a per-step
sample-ratio mismatch; the ledger's event rows are the rollout every replica serves, and two replicas
deciding the same move write it once."""
from __future__ import annotations

import pytest

from rag_app.experiments.variants import Experiment
from rag_app.experiments.ramp import RampController
from tests.conftest import wait_until
from tests.fakes.sql_ledger import SqlLedger
from tests.fakes.webhook_receiver import WebhookReceiver

RAMP = {"steps": [10, 50, 100], "min_queries_per_step": 40}


def exp(rollout_pct: float = 10) -> Experiment:
    return Experiment("e", "a", "b", rollout_pct, "s", ramp=RAMP)


def seed(conn, n_control: int, n_treatment: int, *, cost=(1000, 1000), at="2026-11-02T08:00:00.000+00:00",
         tag="x"):
    for variant, arm, n, c in (("a", "control", n_control, cost[0]), ("b", "treatment", n_treatment, cost[1])):
        for i in range(n):
            qid = f"{tag}-{variant}{i}"
            conn.execute("INSERT INTO queries (query_id, kind, variant, experiment, status, started_at, latency_ms, "
                         "arm, sticky, origin) VALUES (?, 'query', ?, 'e', 'ok', ?, 100, ?, 1, 'live')",
                         (qid, variant, at, arm))
            conn.execute("INSERT INTO stage_calls (query_id, stage, status, cost_nano_usd, input_tokens, started_at, "
                         "price_source) VALUES (?, 'generate', 'ok', ?, 100, ?, 'rate')", (qid, c + i % 7, at))
    conn.commit()


def test_a_step_advances_once_each_arm_has_its_minimum_and_every_replica_follows(tmp_path):
    conn = SqlLedger(tmp_path / "l.sqlite")
    seed(conn, 360, 39)  # 10% treated, but treatment is one short of its minimum
    one, two = RampController(exp(), conn), RampController(exp(), SqlLedger(tmp_path / "l.sqlite"))
    d = one.look()
    assert (d.action, d.rollout_pct) == ("stay", 10) and "treatment 39" in d.reason
    seed(conn, 0, 1, tag="y")
    d = one.look()
    assert (d.action, d.rollout_pct) == ("advance", 50)
    [e] = conn.experiment_events("e")
    assert (e["seq"], e["from_pct"], e["to_pct"], e["control_queries"], e["treatment_queries"]) == (1, 10, 50, 360, 40)
    assert one.live().rollout_pct == 50 and two.live().rollout_pct == 10  # two has not looked yet
    # two decides the same move from its stale view: the sequence number is taken, nothing is written twice
    assert conn.add_experiment_event({**e, "id": None, "writer_id": "other"}) is False
    two.refresh()
    assert two.live().rollout_pct == 50 and len(conn.experiment_events("e")) == 1
    # the new step counts only its own queries: the 400 before the move do not meet the next minimum
    d = two.look()
    assert (d.action, d.rollout_pct) == ("stay", 50) and "control has 0 and treatment 0" in d.reason
    seed(conn, 40, 40, at="2999-01-01T00:00:00.000+00:00", tag="z")
    assert two.look().action == "advance" and one.rollout_pct == 50
    one.refresh()
    assert one.rollout_pct == 100 and [x["to_pct"] for x in conn.experiment_events("e")] == [50, 100]


def test_a_crossed_guardrail_rolls_back_writes_an_event_and_calls_the_webhook(tmp_path, monkeypatch):
    from rag_app.spend.webhook import Webhook

    hook = WebhookReceiver()
    conn = SqlLedger(tmp_path / "l.sqlite")
    seed(conn, 250, 250, cost=(1000, 1500))  # treatment costs 50% more: the primary metric is worse
    webhook = Webhook(hook.url, backoff_s=0.01)
    ramp = RampController(exp(50), conn, webhook=webhook)
    d = ramp.look()
    assert (d.action, d.rollout_pct) == ("roll back", 0) and d.decided_by
    [e] = conn.experiment_events("e")
    assert (e["action"], e["from_pct"], e["to_pct"]) == ("roll back", 50, 0)
    assert ramp.live().rollout_pct == 0  # everyone is back on control
    webhook.wait()
    assert (hook.calls, len(hook.events)) == (2, 1)  # refused once, delivered on the retry
    assert hook.events[-1]["event"] == "experiment.rolled_back" and hook.events[-1]["to_pct"] == 0
    # rolled back stays rolled back: a person restarts it by setting rollout_pct again
    assert ramp.look().action == "stay" and len(conn.experiment_events("e")) == 1


def test_a_step_whose_split_disagrees_with_its_percentage_does_not_move(tmp_path):
    conn = SqlLedger(tmp_path / "l.sqlite")
    seed(conn, 300, 200)  # 40% treated at a 10% step
    d = RampController(exp(), conn).look()
    assert (d.action, d.decided_by) == ("stay", "srm") and conn.experiment_events("e") == []


def test_serve_looks_by_itself_and_a_failing_look_never_stops_it(tmp_path, caplog):
    conn = SqlLedger(tmp_path / "l.sqlite")
    seed(conn, 360, 40)
    ramp = RampController(exp(), conn, interval_s=0.02)
    real = conn.step_counts
    calls = {"n": 0}

    def flaky(*a):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("ledger hiccup")
        return real(*a)
    conn.step_counts = flaky
    ramp.start()
    try:
        wait_until(lambda: conn.experiment_events("e"), "the ramp's first move")
    finally:
        ramp.stop()
    assert ramp.rollout_pct == 50 and "look failed" in caplog.text


def test_an_experiment_without_a_ramp_has_no_controller(tmp_path):
    with pytest.raises(ValueError, match="no ramp"):
        RampController(Experiment("e", "a", "b", 10, "s"), SqlLedger(tmp_path / "l.sqlite"))
