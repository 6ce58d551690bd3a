"""/v1/budgets: each budget's limit, spend, unpriced calls and reset time, and recent events."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Query

from rag_app.access import principal_of
from rag_app.service.deps import Authed, Caller, Svc
from rag_app.service.query_service import key_budget
from rag_app.spend import budget_status, event_json

router = APIRouter(dependencies=Authed)


@router.get("/v1/budgets")
def budgets_now(svc: Svc, who: Caller, events: int = Query(20, ge=0, le=500)):
    """Each budget's limit, spend, unpriced calls and reset time (as `rag budgets`), and recent events;
    a member sees only the budgets that bind it (its key's, its user's), and only those are computed."""
    month_ago = (datetime.now(UTC) - timedelta(days=31)).isoformat(timespec="milliseconds")
    if who.admin:
        rows, recent = svc.read(lambda L: (budget_status(L, [*svc.budgets, *issued_budgets(L.list_keys())],
                                                         svc.limits), L.budget_events(month_ago, events)))
    else:  # its own key's budget from the key itself: no other key is read
        mine = {"key": who.name, "user": who.user}
        binding = [b for b in [*svc.budgets, *key_budget(who)] if b.dim in mine]
        rows, recent = svc.read(lambda L: (budget_status(L, binding, svc.limits, who=mine),
                                           L.budget_events(month_ago, events, who=mine)))
    return {"budgets": rows, "unpriced_policy": svc.settings.budget_unpriced,
            "webhook": svc.settings.alert_webhook is not None, "events": [event_json(e) for e in recent]}


def issued_budgets(keys: list[dict]) -> list:
    """The budgets issued keys carry (revoked ones no longer bind anyone)."""
    return [b for r in keys if not r["revoked_at"] for b in key_budget(principal_of(r))]
