"""A query that lands while another replica admits against the same budget is counted once (#23, seen as
a 7th admission of 6 in tests/e2e/test_budget_replicas.py once first questions were fast).

The writers land a query's rows without the budget lock. On PostgreSQL (read committed) every statement
of the admission sees what was committed when it began, so the spend and the reservations in flight must
be read by one statement: read apart, a query landing between them is in neither. Here a second
connection lands the in-flight query right after the admission's first read, every time."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import event, insert

from rag_app.core.clock import stamp
from rag_app.spend.budgets import Budget, BudgetGate, OverBudget
from tracing.ledger import Ledger
from tracing.ledger.schema import queries, stage_calls

pytestmark = pytest.mark.postgres
COST = 1_000_000  # nano-dollars: one query's cost, and the estimate of the one in flight


class _Usd:
    def nano(self, b, start):
        return int(b.limit * 10**9), None


def _land(ledger: Ledger, query_id: str, at: str) -> None:
    """What the writer commits when a query ends: its row and its priced stage row, one transaction."""
    with ledger.engine.begin() as db:
        db.execute(insert(queries).values(query_id=query_id, kind="query", status="ok", user_id="u1",
                                          started_at=at, ended_at=at))
        db.execute(insert(stage_calls).values(query_id=query_id, stage="generate", status="ok",
                                              cost_nano_usd=COST, started_at=at))


def test_a_query_landing_mid_admission_still_counts(postgres):
    url = postgres.new_database()
    admitting, landing = Ledger.open(url), Ledger.open(url)
    now = datetime.now(UTC)
    budget = Budget("user", "*", "day", limit=Decimal("0.0005"), currency="USD",
                    hard=True, alert_at=())  # half of one query: the one in flight already spends it
    gate = BudgetGate([budget], _Usd(), lambda fn: fn(admitting), clock=lambda: now)
    at = stamp(now - timedelta(seconds=1))
    admitting.budget_tx(lambda tx: tx.reserve("q1", None, "u1", None, COST, at))

    landed = []

    def land_after_first_read(conn, cursor, statement, *args):
        if not landed and ("budget_reservations" in statement or "stage_calls" in statement):
            landed.append(statement)
            _land(landing, "q1", at)

    event.listen(admitting.engine, "after_cursor_execute", land_after_first_read)
    try:
        with pytest.raises(OverBudget) as refused:
            gate.admit("q2", {"key": None, "user": "u1", "variant": None})
    finally:
        event.remove(admitting.engine, "after_cursor_execute", land_after_first_read)
    assert landed, "the landing never ran: the admission read neither table"
    body = refused.value.body
    # counted once: either spent (landed before the read) or in flight (after it), never neither
    assert body["spend_usd"] * 1e9 + body["in_flight_usd"] * 1e9 == pytest.approx(COST)
    assert admitting.budget_tx(lambda tx: tx.in_flight("user", "u1", at)) == (0, 0)  # it has landed since
