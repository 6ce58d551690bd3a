"""The ramp decision (rag_app/experiments/rollout.py) as a pure function: advance, stay, roll back, and why."""
from __future__ import annotations

import numpy as np
import pytest

from rag_app.experiments.rollout import ADVANCE, ROLLED_BACK, STAY, Ramp, decide_step, step_codes
from rag_app.experiments.verdict import HOLD, PROMOTE, ROLL_BACK

RAMP = Ramp((1, 10, 50, 100), min_queries_per_step=500)
HOLDING = {"verdict": "hold", "decided_by": "cost_per_query", "reason": "difference not established"}


def test_advances_to_the_next_step_once_each_arm_has_its_sample():
    d = decide_step(RAMP, 10, control_queries=4500, treatment_queries=500, verdict=HOLDING)
    assert (d.action, d.rollout_pct) == ("advance", 50) and "no guardrail crossed" in d.reason
    assert decide_step(RAMP, 1, control_queries=90_000, treatment_queries=900, verdict=HOLDING).rollout_pct == 10


def test_stays_until_the_smaller_arm_has_min_queries():
    d = decide_step(RAMP, 10, control_queries=4500, treatment_queries=499, verdict=HOLDING)
    assert (d.action, d.rollout_pct) == ("stay", 10)
    assert "treatment 499" in d.reason and "each arm needs 500" in d.reason


def test_a_crossed_guardrail_rolls_back_at_once_whatever_the_sample():
    crossed = {"verdict": "roll back", "decided_by": "error_rate",
               "reason": "guardrail error rate is higher in treatment, +3.00 pts [...]"}
    d = decide_step(RAMP, 10, control_queries=300, treatment_queries=40, verdict=crossed)
    assert (d.action, d.rollout_pct, d.decided_by) == ("roll back", 0.0, "error_rate")
    assert d.reason.startswith("roll back from 10% to 0%: guardrail error rate")


def test_a_sample_ratio_mismatch_never_ramps():
    d = decide_step(RAMP, 10, control_queries=9000, treatment_queries=5000, verdict=HOLDING, srm_level="alert")
    assert (d.action, d.rollout_pct, d.decided_by) == ("stay", 10, "srm")
    warned = decide_step(RAMP, 10, control_queries=9000, treatment_queries=5000, verdict=HOLDING, srm_level="warning")
    assert warned.action == "advance"


def test_a_promote_does_not_skip_steps_and_the_end_and_a_rollback_stay_put():
    promote = {"verdict": "promote", "decided_by": "cost_per_query", "reason": "cheaper"}
    assert decide_step(RAMP, 1, control_queries=99_000, treatment_queries=1000, verdict=promote).rollout_pct == 10
    done = decide_step(RAMP, 100, control_queries=0, treatment_queries=10_000, verdict=HOLDING)
    assert (done.action, done.rollout_pct, done.reason) == ("stay", 100, "ramp complete at 100%")
    back = decide_step(RAMP, 0, control_queries=10_000, treatment_queries=0, verdict=HOLDING)
    assert (back.action, back.rollout_pct) == ("stay", 0) and "start again" in back.reason


def test_a_rollout_between_steps_goes_to_the_next_step_above_it():
    assert RAMP.next_pct(5) == 10 and RAMP.next_pct(10) == 50 and RAMP.next_pct(100) == 100


@pytest.mark.parametrize("spec,expected", [(None, None), ({"steps": [5, 50]}, Ramp((5, 50), 1000)),
                                           ({"steps": [1, 100], "min_queries_per_step": 20}, Ramp((1, 100), 20))])
def test_ramp_from_the_experiments_file(spec, expected):
    assert Ramp.of(spec) == expected


def test_step_codes_on_arrays_match_one_ramp_at_a_time():
    pct = np.array([10, 10, 10, 100, 0, 1])
    nc = np.array([4500, 4500, 9000, 0, 100, 99_000])
    nt = np.array([500, 499, 5000, 9000, 0, 1000])
    verdicts = np.array([HOLD, HOLD, HOLD, HOLD, HOLD, ROLL_BACK])
    srm = np.array([False, False, True, False, False, False])
    action, new = step_codes(RAMP, pct, nc, nt, verdicts, srm)
    assert list(action) == [ADVANCE, STAY, STAY, STAY, STAY, ROLLED_BACK]
    assert list(new) == [50, 10, 10, 100, 0, 0]
    names = {PROMOTE: "promote", HOLD: "hold", ROLL_BACK: "roll back"}
    for i in range(len(pct)):
        d = decide_step(RAMP, float(pct[i]), control_queries=int(nc[i]), treatment_queries=int(nt[i]),
                        verdict={"verdict": names[int(verdicts[i])], "decided_by": "x", "reason": "r"},
                        srm_level="alert" if srm[i] else "ok")
        assert d.rollout_pct == new[i]


def test_a_verdict_held_by_a_guardrail_keeps_the_ramp_where_it_is_in_its_own_words():
    """The 30-answer point gate (or any guardrail trending worse) holds the verdict: the ramp stays, and its
    log quotes the verdict instead of saying no guardrail crossed."""
    held = {"verdict": "hold", "decided_by": "groundedness", "metrics": {"groundedness": {"role": "guardrail"}},
            "reason": "cost per query is lower (...), but groundedness moved -15.00 pts, beyond its tolerance"}
    d = decide_step(RAMP, 10, control_queries=4500, treatment_queries=600, verdict=held)
    assert (d.action, d.rollout_pct) == ("stay", 10)
    assert d.reason == f"stay at 10%: the verdict is hold: {held['reason']}"
    gate = {**held, "decided_by": "quality"}
    assert decide_step(RAMP, 10, control_queries=4500, treatment_queries=600, verdict=gate).action == "stay"
    assert decide_step(RAMP, 10, control_queries=4500, treatment_queries=600, verdict=HOLDING).action == "advance"
