"""The one clock of the ledger's timestamps: UTC, ISO-8601 to the millisecond, so that text order is time
order on both engines (`started_at`, `ended_at`, `created_at`, an audit's `at`).

    utcnow() -> str         now, as the ledger writes it
    stamp(datetime) -> str  a given moment, as the ledger writes it (a period's bounds, a parsed timestamp)

Tests that fix the time patch `utcnow` in the module that calls it."""
from __future__ import annotations

from datetime import UTC, datetime


def stamp(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds")


def utcnow() -> str:
    return stamp(datetime.now(UTC))
