"""The ramp decision: raise the treatment's share step by step, roll it back as soon as a guardrail crosses.

An experiment may declare a ramp in the experiments file:
    "ramp": {"steps": [1, 10, 50, 100], "min_queries_per_step": 1000}
At each look the caller (later `rag serve`; not wired in yet) passes the current rollout, how many
queries each arm answered since this step began, and the experiment's verdict (rag_app/experiments/verdict.py,
whose guardrails and sample-ratio check run on all the experiment's data). The answer, first rule
that applies:

1. stay at 0%: the ramp was rolled back; a person restarts it by setting rollout_pct again.
2. roll back (rollout 0%): the verdict is "roll back" (a guardrail crossed, or the primary metric is
   worse), at any step, however few queries the step has seen: the anytime-valid intervals allow it.
3. stay: sample ratio mismatch (p < srm_p): the split is broken; never ramp on it.
4. stay: the verdict holds because a guardrail looks worse (its point estimate beyond its tolerance,
   the 30-answer quality gate): evidence to wait on, not to expose more users; the log quotes the verdict.
5. stay: the last step is reached (the ramp is complete).
6. stay: an arm has fewer than min_queries_per_step queries at this step.
7. advance to the next step.
A promote verdict does not skip steps: each step exposes more users only after the last one held.

Raising the percentage keeps users sticky (rag_app/experiments/variants.py: a user treated at 10% is treated
at 50%); rolling back to 0% returns everyone to control.

`step_codes` works on numpy arrays (simulated ramps by the thousand); `decide_step` is the one-ramp
form with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag_app.experiments.verdict import ROLL_BACK

ADVANCE, STAY, ROLLED_BACK = 1, 0, -1


@dataclass(frozen=True)
class Ramp:
    steps: tuple[float, ...]
    min_queries_per_step: int = 1000

    @classmethod
    def of(cls, spec: dict | None) -> Ramp | None:
        """From the experiments file's `ramp` (already validated by experiments_schema.Ramp)."""
        if not spec:
            return None
        return cls(tuple(spec["steps"]), spec.get("min_queries_per_step", 1000))

    def next_pct(self, current):
        """The first step above `current` (the last step when there is none)."""
        steps = np.asarray(self.steps, dtype=float)
        idx = np.searchsorted(steps, np.asarray(current, dtype=float), side="right")
        return steps[np.minimum(idx, len(steps) - 1)][()]


@dataclass(frozen=True)
class StepDecision:
    action: str  # advance | stay | roll back
    rollout_pct: float  # what the rollout is to be from now on
    reason: str
    decided_by: str | None  # the metric (or "srm") behind a roll back or a stay on mismatch


def step_codes(ramp: Ramp, current_pct, control_queries, treatment_queries, verdict_code, srm_alert,
               guard_held=False):
    """(action code, new rollout pct) for each experiment; inputs broadcast like numpy arrays.
    `guard_held`: the verdict holds because a guardrail looks worse (a trend, not yet established)."""
    cur = np.asarray(current_pct, dtype=float)
    fewest = np.minimum(np.asarray(control_queries), np.asarray(treatment_queries))
    conds = [cur <= 0, np.asarray(verdict_code) == ROLL_BACK, np.asarray(srm_alert, dtype=bool),
             np.asarray(guard_held, dtype=bool), cur >= ramp.steps[-1], fewest < ramp.min_queries_per_step]
    action = np.select(conds, [STAY, ROLLED_BACK, STAY, STAY, STAY, STAY], ADVANCE)
    pct = np.where(action == ADVANCE, ramp.next_pct(cur), np.where(action == ROLLED_BACK, 0.0, cur))
    return action[()], pct[()]


def decide_step(ramp: Ramp, current_pct: float, *, control_queries: int, treatment_queries: int,
                verdict: dict, srm_level: str = "ok") -> StepDecision:
    """One ramp's next move. `verdict`: rag_app.experiments.verdict.verdict()'s dict (or compare_live's result);
    `srm_level`: "ok" | "warning" | "alert" (a warning does not stop the ramp)."""
    from rag_app.experiments.verdict import VERDICTS

    code = {v: k for k, v in VERDICTS.items()}[verdict["verdict"]]
    by = verdict.get("decided_by")
    guard_held = verdict["verdict"] == "hold" and (
        by == "quality" or (verdict.get("metrics") or {}).get(by, {}).get("role") == "guardrail")
    action, pct = step_codes(ramp, current_pct, control_queries, treatment_queries, code, srm_level == "alert",
                             guard_held)
    action, pct = int(action), float(pct)
    cur = f"{current_pct:g}%"
    if action == ROLLED_BACK:
        return StepDecision("roll back", 0.0, f"roll back from {cur} to 0%: {verdict['reason']}", verdict["decided_by"])
    if action == ADVANCE:
        return StepDecision("advance", pct, f"advance from {cur} to {pct:g}%: {min(control_queries, treatment_queries)}"
                            f" or more queries per arm at {cur} and no guardrail crossed", None)
    if current_pct <= 0:
        why, by = "rolled back (0%); set rollout_pct to a step of the ramp to start again", None
    elif srm_level == "alert":
        why, by = f"stay at {cur}: sample ratio mismatch; fix assignment before ramping further", "srm"
    elif guard_held:  # the verdict's own words: the ramp log says what the comparison says
        why = f"stay at {cur}: the verdict is hold: {verdict['reason']}"
    elif current_pct >= ramp.steps[-1]:
        why, by = f"ramp complete at {cur}", None
    else:
        why, by = (f"stay at {cur}: control has {control_queries} and treatment {treatment_queries} queries at "
                   f"this step; each arm needs {ramp.min_queries_per_step}"), None
    return StepDecision("stay", current_pct, why, by)
