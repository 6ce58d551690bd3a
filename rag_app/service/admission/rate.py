"""Step `rate`: the key's requests and tokens per minute (rag_app/access/rate.py). Takes a place in the
key's window, its LLM tokens reserved at the question's ceiling when the key has a `tpm` (RateLimited,
the 429, when the window is full); adds `ticket`. Undone by a later refusal: the ticket is released, so a
question refused by a budget never began and leaves the window. The `settle` step replaces the
reservation with the tokens really used (0 on a cache hit)."""
from __future__ import annotations

from typing import ClassVar

from rag_app.access import RateLimiter
from rag_app.service.admission.context import Admission


class TakeRateSlot:
    name: ClassVar[str] = "rate"

    def __init__(self, limiter: RateLimiter | None):
        self.limiter = limiter  # None: no limits anywhere (tests, an app without a ledger reader)

    def enter(self, ctx: Admission) -> None:
        if self.limiter is None:
            return
        p = ctx.request.principal
        ctx.ticket = self.limiter.admit(p, ctx.estimate.tokens if p.tpm is not None else 0)

    def undo(self, ctx: Admission) -> None:
        if self.limiter is not None:
            self.limiter.release(ctx.ticket)
            ctx.ticket = None
