"""`rag serve` runs an experiment's ramp: it looks every RAG_RAMP_CHECK_S seconds and moves the rollout
by rag_app/experiments/rollout.py's rule (advance a step once each arm has its minimum and no guardrail crossed;
roll back to 0% as soon as one does; stay on a sample-ratio mismatch).

The ramp's state lives in the ledger, not in a process: each move is an `experiment_events` row, and the
latest row's to_pct is the rollout every replica serves (the file's rollout_pct until the first move).
A move is written at the next sequence number, which is unique: when replicas decide the same move at
once, one row is written and the others read it. A replica follows the others' moves at its next look.

The sample-ratio check runs on the queries of the current step alone (their split must match the step's
percentage; the whole experiment mixes steps), the guardrails on all the experiment's data (the
anytime-valid intervals allow looking at every step). A roll back is posted to RAG_ALERT_WEBHOOK.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import uuid

from rag_app.core import utcnow
from rag_app.experiments.comparison import compare_live, srm_pvalue
from rag_app.experiments.variants import Experiment
from rag_app.experiments.rollout import Ramp, StepDecision, decide_step
from rag_app.experiments.verdict import Plan, srm_level

log = logging.getLogger(__name__)


class RampController:
    """One ramped experiment of one `rag serve` process. `ledger`: a tracing.ledger.Ledger."""

    def __init__(self, exp: Experiment, ledger, *, webhook=None, interval_s: float = 60.0):
        """`webhook`: a rag_app.spend.webhook.Webhook (a roll back is sent to it), or None."""
        ramp = Ramp.of(exp.ramp)
        if ramp is None:
            raise ValueError(f"experiment {exp.name!r} has no ramp")
        self.exp, self.ramp, self.ledger = exp, ramp, ledger
        self.webhook, self.interval_s = webhook, interval_s
        self.replica = uuid.uuid4().hex[:12]
        self._events: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_decision: StepDecision | None = None

    # -- what the pool serves ----------------------------------------------------------------------
    @property
    def rollout_pct(self) -> float:
        with self._lock:
            return float(self._events[-1]["to_pct"]) if self._events else self.exp.rollout_pct

    def live(self) -> Experiment:
        """The experiment as it is served now: the file's, at the ramp's current percentage."""
        return dataclasses.replace(self.exp, rollout_pct=self.rollout_pct)

    def state(self) -> dict:
        with self._lock:
            events = list(self._events)
        return {"steps": list(self.ramp.steps), "min_queries_per_step": self.ramp.min_queries_per_step,
                "rollout_pct": float(events[-1]["to_pct"]) if events else self.exp.rollout_pct,
                "step_started_at": events[-1]["at"] if events else None, "events": events,
                "last_look": dataclasses.asdict(self.last_decision) if self.last_decision else None}

    def refresh(self) -> None:
        events = self.ledger.experiment_events(self.exp.name)
        with self._lock:
            self._events = events

    # -- one look ------------------------------------------------------------------------------------
    def look(self) -> StepDecision:
        """Read the ledger, decide, and write the move (if any, and if no other replica wrote it first)."""
        self.refresh()
        pct = self.rollout_pct
        since = self._events[-1]["at"] if self._events else None
        counts = self.ledger.step_counts(self.exp.name, since)
        c = counts.get(self.exp.control, {"queries": 0, "sticky": 0})
        t = counts.get(self.exp.treatment, {"queries": 0, "sticky": 0})
        plan = Plan.of(self.exp.analysis, self.exp.guardrails)
        step_p = srm_pvalue(c["sticky"], t["sticky"], pct / 100) if self.exp.mode == "split" else None
        result = compare_live(self.ledger, self.live())
        decision = decide_step(self.ramp, pct, control_queries=c["queries"], treatment_queries=t["queries"],
                               verdict=result, srm_level=srm_level(step_p, plan))
        self.last_decision = decision
        if decision.action == "stay":
            return decision
        seq = (self._events[-1]["seq"] if self._events else 0) + 1
        event = {"experiment": self.exp.name, "seq": seq, "at": utcnow(), "action": decision.action,
                 "from_pct": pct, "to_pct": decision.rollout_pct, "reason": decision.reason,
                 "decided_by": decision.decided_by, "control_queries": c["queries"],
                 "treatment_queries": t["queries"], "srm_pvalue": step_p, "writer_id": self.replica}
        if self.ledger.add_experiment_event(event):
            log.warning("experiment %s: %s", self.exp.name, decision.reason)
            if decision.action == "roll back" and self.webhook is not None:
                self.webhook.send(None, {"event": "experiment.rolled_back", **event})
        self.refresh()  # ours, or the move another replica wrote at this seq
        return decision

    # -- the background loop -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"ramp-{self.exp.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.refresh()
        except Exception as e:  # the ledger down at start-up: serve the file's rollout, look again later
            log.warning("ramp %s: cannot read its events yet (%s)", self.exp.name, type(e).__name__)
        while not self._stop.wait(self.interval_s):
            try:
                self.look()
            except Exception:  # a failed look never stops serving; the next look tries again
                log.exception("ramp %s: look failed; serving %g%%", self.exp.name, self.rollout_pct)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
