"""/v1/budgets: each budget's limit, spend, unpriced calls and reset time, and recent events."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Query

from rag_app.service.deps import Authed, Svc
from rag_app.spend.budgets import budget_status, event_json

router = APIRouter(dependencies=Authed)


@router.get("/v1/budgets")
def budgets_now(svc: Svc, events: int = Query(20, ge=0, le=500)):
    """Each budget's limit, spend, unpriced calls and reset time (as `rag budgets`), and recent events."""
    month_ago = (datetime.now(UTC) - timedelta(days=31)).isoformat(timespec="milliseconds")
    rows, recent = svc.read(lambda L: (budget_status(L, svc.budgets, svc.limits), L.budget_events(month_ago, events)))
    return {"budgets": rows, "unpriced_policy": svc.settings.budget_unpriced,
            "webhook": svc.settings.alert_webhook is not None, "events": [event_json(e) for e in recent]}
