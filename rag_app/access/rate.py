"""Per-key rate limits: requests and tokens per minute, counted in the ledger so every replica sharing
it enforces one limit (tracing/ledger/keys.py takes a request in one conditional statement). Over a
limit: `RateLimited`, answered 429 with `Retry-After` (the seconds to the next minute) and a JSON body
naming the limit. A refused request writes no ledger row and reserves no budget: it never began."""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from rag_app.access.keys import Principal

log = logging.getLogger(__name__)
PRUNE_AFTER = timedelta(hours=1)


class RateLimited(Exception):
    def __init__(self, body: dict[str, Any], retry_after_s: int):
        super().__init__(body["detail"])
        self.body, self.retry_after_s = body, retry_after_s


def window_of(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


class RateLimiter:
    def __init__(self, ledger: Callable[[Callable[[Any], Any]], Any],
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC), fail_open: bool = False):
        """`fail_open` (RAG_BUDGET_LEDGER_DOWN=open): the ledger unreachable, a limited key's request is
        admitted uncounted and logged; otherwise the ledger's error stands (the service's 503)."""
        self.ledger, self.clock, self.fail_open = ledger, clock, fail_open
        self._pruned: datetime | None = None
        self.admitted_uncounted = 0

    def admit(self, p: Principal) -> str | None:
        """The minute this request was counted in (None: the key has no limit); RateLimited when full."""
        if p.name is None or (p.rpm is None and p.tpm is None):
            return None
        now = self.clock()
        window = window_of(now)
        try:
            taken, requests, tokens = self.ledger(lambda L: L.rate_take(p.name, window, p.rpm, p.tpm))
        except Exception as e:
            if not self.fail_open:
                raise
            self.admitted_uncounted += 1
            log.error("rate limit of key %s not checked (%s): admitted uncounted (RAG_BUDGET_LEDGER_DOWN=open)",
                      p.name, getattr(e, "detail", e))
            return None
        self._prune(now)
        if taken:
            return window
        retry = max(1, 60 - now.second)
        limit, value, used = ("rpm", p.rpm, requests) if p.rpm is not None and requests >= p.rpm else ("tpm", p.tpm, tokens)
        what = f"{value} {'requests' if limit == 'rpm' else 'tokens'} per minute"
        raise RateLimited({"detail": f"API key {p.name!r} reached its limit of {what}; retry in {retry} s",
                           "type": "rate_limited", "key": p.name, "limit": limit, "limit_value": value,
                           "used": used, "window_start": window, "retry_after_s": retry}, retry)

    def spent(self, p: Principal, window: str | None, tokens: int) -> None:
        """Add a finished query's tokens to the minute it was admitted in (best effort: never fails it)."""
        if window is None or p.tpm is None or tokens <= 0:
            return
        try:
            self.ledger(lambda L: L.rate_add_tokens(p.name, window, tokens))
        except Exception as e:  # the answer is given; a lost token count only loosens this minute
            log.warning("tokens of key %s not counted for %s: %s", p.name, window, e)

    def _prune(self, now: datetime) -> None:
        if self._pruned is not None and now - self._pruned < PRUNE_AFTER:
            return
        self._pruned = now
        try:
            self.ledger(lambda L: L.prune_rate_windows(window_of(now - PRUNE_AFTER)))
        except Exception as e:
            log.warning("old rate windows not pruned: %s", e)
