"""Spend reports as `rag report` prints them: per-query rows, spend by a dimension, quality over
time, and the summary (totals, quality, the ledger's own audit)."""
from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from fastapi import APIRouter, HTTPException, Query

from rag_app.access import check_admin
from rag_app.service.deps import Authed, Caller, Svc
from rag_app.service.routes.queries import MAX_INT
from tracing.ledger import BY_DIMS

router = APIRouter(dependencies=Authed)
MAX_QUALITY_DAYS = 366  # days one quality-over-time request may span
MAX_REPORT_ROWS = 10_000  # per-query rows one report request may read (the dashboard asks for 500)


@router.get("/v1/reports/queries")
def report_queries(svc: Svc, who: Caller, last: int | None = Query(200, ge=1, le=MAX_REPORT_ROWS), variant: str | None = None):
    """Per-query rows exactly as `rag report --format json` prints them (the `last` most recent)."""
    check_admin(who, "every user's query report (a member's own queries: /v1/queries)")
    return {"queries": svc.read(lambda L: L.report(last=last, variant=variant)).queries}


@router.get("/v1/reports/by")
def report_by(svc: Svc, who: Caller, dim: str = Query(..., description="user | key | variant | model | day | stage"),
              variant: str | None = None):
    """Spend per user, API key (`key`: a short hash of the bearer token), variant, model, day or stage,
    most expensive first; rows as `rag report --by DIM --format json` prints them."""
    if dim not in BY_DIMS:
        raise HTTPException(422, f"dim must be one of {', '.join(BY_DIMS)}")
    rows = svc.read(lambda L: L.by(dim, variant=variant))
    if not who.admin:  # a member's own spend: its user's row, or its key's
        if dim not in ("user", "key"):
            check_admin(who, f"spend by {dim} (a member's own: dim=user or dim=key)")
        mine = who.user if dim == "user" else who.name
        rows = [r for r in rows if r[dim] == mine]
    return {"by": dim, "variant": variant, "rows": rows}


@router.get("/v1/reports/quality")
def report_quality(svc: Svc, who: Caller, since: date | None = None, until: date | None = None,
                   days: int = Query(30, ge=1, le=MAX_QUALITY_DAYS), variant: str | None = None):
    """Per day (UTC) and variant: cost per query beside answers scored, mean groundedness,
    invalid-citation rate and feedback, oldest day first. `since`..`until` (dates, both included);
    without `since`, the `days` days up to `until` (default today)."""
    check_admin(who, "quality over time")
    last = until or datetime.now(UTC).date()
    first = since or last - timedelta(days=days - 1)
    if first > last:
        raise HTTPException(422, "since must not be after until")
    if (last - first).days >= MAX_QUALITY_DAYS:
        raise HTTPException(422, f"at most {MAX_QUALITY_DAYS} days per request")
    rows = svc.read(lambda L: L.quality_over_time(first.isoformat(), last.isoformat(), variant=variant))
    return {"since": first.isoformat(), "until": last.isoformat(), "variant": variant, "rows": rows}


@router.get("/v1/reports/summary")
def summary(svc: Svc, who: Caller, last: int | None = Query(None, ge=1, le=MAX_INT), variant: str | None = None):
    check_admin(who, "the service's summary")
    # orphans, unknown LLM attempts, quarantined/spilled/lost rows, totals stale or catching up
    rep, ledger_audit, quality = svc.read(lambda L: (L.report(last=last, variant=variant, rows=0), L.audit(),
                                                     L.quality_summary(variant)))
    return {**rep.totals, "quality": quality, "ledger": ledger_audit}
