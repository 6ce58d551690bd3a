"""The row mappers: a priced `StageUsage` (a stage, or one LLM attempt) -> a `stage_calls` row, and the
one `queries` row (`queries_row`) that the tracer, an answer-cache hit and a start-up's load time all write.

Every field of a usage lands in a column (`COLUMN_OF`) or is an input of its price (`PRICING_INPUTS`,
whose result lands in the cost columns); tests/unit/tracing/pricing/test_row_mapper.py holds the mapper to that. The
tracer writes these rows, and the front doors show `stage_json(stage_row(usage))` for an answer they
hold in memory: the same function for both, so the two cannot disagree.
"""
from __future__ import annotations

import json
import time

from rag_app.core import Price, StageUsage
from rag_app.core import utcnow

# usage field -> stage_calls column
COLUMN_OF = {
    "stage": "stage", "model": "model", "status": "status", "input_tokens": "input_tokens",
    "output_tokens": "output_tokens", "cached_tokens": "cached_tokens", "cache_write_tokens": "cache_write_tokens",
    "reasoning_tokens": "reasoning_tokens", "cache_hits": "cache_hits", "cache_misses": "cache_misses",
    "usage_source": "usage_source", "error": "error", "note": "estimate_note",
    "context_budget_tokens": "context_budget_tokens", "context_tokens": "context_tokens",
    "started_at": "started_at", "ended_at": "ended_at", "latency_ms": "latency_ms", "raw": "usage_raw",
}
ATTEMPT_COLUMN_OF = {"call_id": "call_id", "number": "attempt", "attempt_id": "attempt_id",
                     "possibly_billed": "possibly_billed", "output_at_risk_tokens": "output_at_risk_tokens"}
PRICE_COLUMN_OF = {"cost_nano": "cost_nano_usd", "shadow_nano": "shadow_cost_nano_usd", "version": "price_version",
                   "source": "price_source", "provider": "provider", "endpoint": "endpoint", "rule": "price_rule",
                   "effective_from": "price_effective_from", "warning": "price_warning",
                   "currency": "price_currency", "native_cost": "native_cost", "fx": "fx_rate",
                   "at_risk_nano": "output_at_risk_nano_usd"}
PRICING_INPUTS = ("billing", "price_basis", "search_units", "explicit_cache")  # decide the price; the price has its columns


class UnpricedUsage(ValueError):
    """A usage reached the ledger without going through the Pricer (a wiring fault)."""


def stage_row(u: StageUsage, *, query_id: str, variant: str | None = None, experiment: str | None = None) -> dict:
    if u.price is None:
        raise UnpricedUsage(f"{u.stage} usage of {u.model!r} was not priced; pass it through the Pricer first")
    p: Price = u.price
    a = u.attempt
    row: dict[str, object] = {"query_id": query_id, "variant": variant, "experiment": experiment}
    for fld, col in COLUMN_OF.items():
        row[col] = getattr(u, fld)
    row["usage_raw"] = None if u.raw is None else json.dumps(u.raw, ensure_ascii=False, sort_keys=True, default=str)
    row.update({"call_id": a.call_id if a else None, "attempt": a.number if a else 1,
                "attempt_id": a.attempt_id if a else None, "possibly_billed": int(a.possibly_billed) if a else 0,
                "output_at_risk_tokens": a.output_at_risk_tokens if a else None})
    for fld, col in PRICE_COLUMN_OF.items():
        row[col] = getattr(p, fld)
    return row


def queries_row(query_id: str, kind: str, status: str, started_at: str, t0: float, **columns: object) -> dict:
    """A `queries` row that ends now: a query the tracer saw finish, an answer-cache hit, a start-up's load
    time. Its latency counts from `t0` (time.perf_counter() when it started); `columns`: its other columns
    (question, mode, error, variant, experiment, who asked and from where, a cache hit's figures)."""
    return {"query_id": query_id, "kind": kind, "status": status, "started_at": started_at, "ended_at": utcnow(),
            "latency_ms": round((time.perf_counter() - t0) * 1000, 3), **columns}
