"""Admission: how every front door's question is let through, as a named sequence of small steps, one
file each (as LiteLLM's proxy runs its hooks), all over one per-request context (`context.Admission`):

    models -> rate -> cache -> budget -> run -> settle

`models` (a key's model list: 403), `rate` (its requests and tokens per minute: 429; a place in its window
taken), `cache` (the answer cache: a hit answers, and the steps after it do no work), `budget` (the hard
budgets: 429), `run` (the question answered), `settle` (the key's tokens settled, the cache filled).
A step that raises refuses the question: the steps before it undo what they took (the rate step
releases its place), unless the question already began to spend (`began`: a failed run keeps its
reservations). `walk(steps, ctx)` runs them; `steps(...)` builds the sequence the service uses."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from rag_app.access import RateLimiter
from rag_app.service.admission.budget import AdmitBudget, key_budget
from rag_app.service.admission.cache import ServeFromCache
from rag_app.service.admission.context import Admission, QueryRequest, QueryResult, Router, Step
from rag_app.service.admission.models import CheckModels
from rag_app.service.admission.rate import TakeRateSlot
from rag_app.service.admission.run import Run
from rag_app.service.admission.settle import Settle, llm_tokens
from rag_app.spend import AnswerCache
from rag_app.spend import BudgetGate

__all__ = ["Admission", "AdmitBudget", "CheckModels", "QueryRequest", "QueryResult", "Router", "Run",
           "ServeFromCache", "Settle", "Step", "TakeRateSlot", "key_budget", "llm_tokens", "steps", "walk"]


def steps(gate: BudgetGate, cache: AnswerCache | None, limiter: RateLimiter | None,
          doc_path: Callable[[str], str] = str) -> tuple[Step, ...]:
    """The admission every front door's question passes, in order."""
    return (CheckModels(), TakeRateSlot(limiter), ServeFromCache(cache), AdmitBudget(gate), Run(doc_path),
            Settle(limiter, cache))


def walk(sequence: Sequence[Step], ctx: Admission) -> QueryResult:
    """Each step in turn. A refusal (any raise) before the question began: the steps already passed undo
    what they took, latest first, and the refusal goes to the front door unchanged."""
    passed: list[Step] = []
    try:
        for step in sequence:
            step.enter(ctx)
            passed.append(step)
    except BaseException:
        if not ctx.began:
            for step in reversed(passed):
                step.undo(ctx)
        raise
    if ctx.result is None:  # a sequence without `run`: a wiring mistake, never a user's
        raise RuntimeError(f"admission ended without an answer: steps {[s.name for s in sequence]}")
    return ctx.result
