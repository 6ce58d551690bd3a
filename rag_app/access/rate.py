"""Per-key rate limits: requests and tokens per minute over a sliding 60 s window, counted in the ledger
so every replica sharing it enforces one limit (tracing/ledger/keys.py admits a request under the key's
lock). At any instant the last 60 s hold at most `rpm` admitted requests: there is no minute boundary
at which a second burst is let in.

Tokens are reserved before any work: a request is admitted while the window's tokens (reserved by
requests in flight, used by those that ended) are below `tpm`, and it reserves its estimate at once (the
prompt at the context budget, RAG_LLM_MAX_TOKENS, the rewrite call when that lever is on); when the query
ends its real count takes the estimate's place (`settle`). So concurrent requests see each other's tokens
before any has finished: a burst over any number of replicas uses at most `tpm` plus one request's
tokens in any 60 s.

Over a limit: `RateLimited`, answered 429 with `Retry-After` (the seconds until enough of the window has
left it) and a JSON body naming the limit. A request refused here, or by a budget after it (`release`),
writes no ledger row and leaves nothing in the window: it never began."""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from rag_app.access.keys import Principal

log = logging.getLogger(__name__)
WINDOW_S = 60
PRUNE_AFTER = timedelta(hours=1)


class RateLimited(Exception):
    def __init__(self, body: dict[str, Any], retry_after_s: int):
        super().__init__(body["detail"])
        self.body, self.retry_after_s = body, retry_after_s


@dataclass(frozen=True)
class Ticket:
    """An admitted request's place in its key's window: settled with its real tokens when it ends."""

    key: str
    event_id: int
    reserved: int
    counts_tokens: bool  # the key has a `tpm` (with only `rpm`, tokens are not kept)


def epoch_ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def _limit_reached(p: Principal, step: Any) -> RateLimited:
    """The refusal of a request whose key's window is full (`step`: the ledger's RateStep): which limit,
    its value, what the window holds, and when enough of it will have left."""
    retry = min(WINDOW_S, max(1, math.ceil(step.retry_after_ms / 1000)))
    by_rpm = p.rpm is not None and step.requests >= p.rpm
    limit, value, used = ("rpm", p.rpm, step.requests) if by_rpm else ("tpm", p.tpm, step.tokens)
    what = f"{value} {'requests' if limit == 'rpm' else 'tokens'} per minute"
    return RateLimited({"detail": f"API key {p.name!r} reached its limit of {what}; retry in {retry} s",
                        "type": "rate_limited", "key": p.name, "limit": limit, "limit_value": value,
                        "used": used, "window_s": WINDOW_S, "retry_after_s": retry}, retry)


class RateLimiter:
    def __init__(self, ledger: Callable[[Callable[[Any], Any]], Any],
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC), fail_open: bool = False):
        """`fail_open` (RAG_BUDGET_LEDGER_DOWN=open): the ledger unreachable, a limited key's request is
        admitted uncounted and logged; otherwise the ledger's error stands (the service's 503)."""
        self.ledger, self.clock, self.fail_open = ledger, clock, fail_open
        self._pruned: datetime | None = None
        self.admitted_uncounted = 0

    def admit(self, p: Principal, estimate_tokens: int = 0) -> Ticket | None:
        """The request's ticket (None: the key has no limit, or was admitted uncounted); RateLimited when
        its window is full. `estimate_tokens`: what it may use, reserved against `tpm` until settled."""
        if p.name is None or (p.rpm is None and p.tpm is None):
            return None
        now = self.clock()
        reserve = max(0, estimate_tokens) if p.tpm is not None else 0
        try:
            step = self.ledger(lambda L: L.rate_admit(p.name, epoch_ms(now), WINDOW_S * 1000, p.rpm, p.tpm, reserve))
        except Exception as e:
            if not self.fail_open:
                raise
            self.admitted_uncounted += 1
            log.error("rate limit of key %s not checked (%s): admitted uncounted (RAG_BUDGET_LEDGER_DOWN=open)",
                      p.name, getattr(e, "detail", e))
            return None
        self._prune(now)
        if step.taken:
            return Ticket(p.name, step.event_id, reserve, p.tpm is not None)
        raise _limit_reached(p, step)

    def settle(self, ticket: Ticket | None, tokens: int) -> None:
        """A finished query's real tokens in place of its reservation (best effort: never fails it; a
        count lost stays at the estimate, which errs on the side of the limit)."""
        if ticket is None or not ticket.counts_tokens or tokens == ticket.reserved:
            return
        try:
            self.ledger(lambda L: L.rate_settle(ticket.event_id, tokens))
        except Exception as e:
            log.warning("tokens of key %s not settled (%d kept reserved): %s", ticket.key, ticket.reserved, e)

    def release(self, ticket: Ticket | None) -> None:
        """A request refused after its admission (a budget) leaves the window: it never began."""
        if ticket is None:
            return
        try:
            self.ledger(lambda L: L.rate_release(ticket.event_id))
        except Exception as e:  # it stays counted: the safe side of the limit
            log.warning("refused request of key %s still counted in its window: %s", ticket.key, e)

    def _prune(self, now: datetime) -> None:
        """Every key prunes its own window on admission; this clears keys no longer used, hourly."""
        if self._pruned is not None and now - self._pruned < PRUNE_AFTER:
            return
        self._pruned = now
        try:
            self.ledger(lambda L: L.prune_rate_events(epoch_ms(now) - WINDOW_S * 1000))
        except Exception as e:
            log.warning("old rate events not pruned: %s", e)
