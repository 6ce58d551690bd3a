"""What budgets read and write in the ledger: spend per key, user or variant since an instant (stage rows
joined to their query: billed figures, unpriced rows counted apart, never as $0), the estimates of queries
admitted but not yet in `queries` (in flight), and budget events.

Admission runs in one transaction under one lock for every replica (`BudgetTx`): a PostgreSQL
transaction-scoped advisory lock, SQLite's write lock (BEGIN IMMEDIATE). Reading the spend, the
estimates in flight and booking this query's own estimate are one step, so two replicas can never both
admit against the same headroom: a hard limit is overshot by at most what the admitted queries cost
beyond their estimates. The spend and the estimates in flight are read by one statement (`headroom`):
writers land rows without the lock, and a query landing between two reads would be in neither.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, case, exists, false, func, insert, or_, select, true, update

from tracing.ledger.rollups import number
from tracing.ledger.schema import budget_events, budget_reservations, queries, query_totals, stage_calls

BUDGET_LOCK = 0x72616762  # pg_advisory_xact_lock key for "admitting against budgets" ("ragb")
DIMS = ("key", "user", "variant")
_QUERY_COL = {"key": queries.c.api_key_id, "user": queries.c.user_id, "variant": queries.c.variant}
_RESERVATION_COL = {"key": budget_reservations.c.api_key_id, "user": budget_reservations.c.user_id,
                    "variant": budget_reservations.c.variant}
ESTIMATE_FROM = 20  # recent priced queries whose mean cost is a new query's estimate


def spend(db: Connection, dim: str, since: str, value: str | None = None) -> dict[str, dict[str, int]]:
    """value -> {"priced_nano_usd", "unpriced_calls", "queries"} of queries started at or after `since`
    (one value, or every value seen). `unpriced_calls`: stage rows whose cost is unknown."""
    col = _QUERY_COL[dim]
    sel = _spend(dim, since, value).add_columns(col).where(col.is_not(None)).group_by(col)
    return {row[3]: _spent(row) for row in db.execute(sel)}


def _spent(row) -> dict[str, int]:
    """A `_spend` row's first three columns as the spend dict."""
    return {"priced_nano_usd": int(number(row[0])), "unpriced_calls": int(number(row[1])),
            "queries": int(number(row[2]))}


def _spend(dim: str, since: str, value: str | None):
    q, s = queries, stage_calls
    where = [q.c.kind == "query", q.c.started_at >= since]
    if value is not None:
        where.append(_QUERY_COL[dim] == value)
    return (select(func.coalesce(func.sum(s.c.cost_nano_usd), 0).label("priced"),
                   func.coalesce(func.sum(case((s.c.cost_nano_usd.is_(None), 1), else_=0)), 0).label("unpriced"),
                   func.count(func.distinct(q.c.query_id)).label("queries"))
            .select_from(q.join(s, s.c.query_id == q.c.query_id)).where(*where))


def _in_flight(dim: str, value: str, since: str):
    r = budget_reservations
    landed = exists(select(queries.c.query_id).where(queries.c.query_id == r.c.query_id))
    return select(func.count().label("n"), func.coalesce(func.sum(r.c.estimate_nano_usd), 0).label("est")).where(
        _RESERVATION_COL[dim] == value, r.c.created_at >= since, ~landed)


class BudgetTx:
    """One admission: reads and writes inside the locked transaction (`Ledger.budget_tx`)."""

    def __init__(self, db: Connection):
        self.db = db

    def spend(self, dim: str, value: str, since: str) -> dict[str, int]:
        return spend(self.db, dim, since, value).get(value, {"priced_nano_usd": 0, "unpriced_calls": 0, "queries": 0})

    def in_flight(self, dim: str, value: str, since: str) -> tuple[int, int]:
        """(queries, estimated nano-dollars) admitted since `since` whose query row has not landed."""
        n, est = self.db.execute(_in_flight(dim, value, since)).one()
        return int(n), int(number(est))

    def headroom(self, dim: str, value: str, since: str, flight_since: str) -> tuple[dict[str, int], int, int]:
        """(spend since `since`, queries in flight, their estimates) read by ONE statement. On PostgreSQL
        (read committed) each statement sees what was committed when it began, and the writers land rows
        without the budget lock: a query landing between two separate reads would be in neither, not yet
        spent in the first and no longer in flight in the second, and its cost would be headroom."""
        spent, flight = _spend(dim, since, value).subquery("spent"), _in_flight(dim, value, flight_since).subquery("flight")
        row = self.db.execute(select(spent.c.priced, spent.c.unpriced, spent.c.queries, flight.c.n, flight.c.est)
                              .select_from(spent.join(flight, true()))).one()
        return _spent(row), int(row[3]), int(number(row[4]))

    def estimate(self, variant: str | None) -> int:
        """Mean priced cost of the variant's last ESTIMATE_FROM live queries (0 with none yet)."""
        t = query_totals
        recent = (select(t.c.cost_nano_usd).where(t.c.kind == "query", t.c.variant == variant,
                                                  t.c.cost_nano_usd.is_not(None))
                  .order_by(t.c.started_at.desc()).limit(ESTIMATE_FROM).subquery("recent"))
        v = self.db.execute(select(func.avg(recent.c.cost_nano_usd))).scalar()
        return 0 if v is None else int(round(float(v)))

    def reserve(self, query_id: str, api_key_id: str | None, user_id: str | None, variant: str | None,
                estimate_nano_usd: int, at: str) -> None:
        self.db.execute(insert(budget_reservations).values(
            query_id=query_id, api_key_id=api_key_id, user_id=user_id, variant=variant,
            estimate_nano_usd=estimate_nano_usd, created_at=at))

    def last_event_at(self, budget: str, value: str, kind: str) -> str | None:
        e = budget_events
        return self.db.execute(select(func.max(e.c.at)).where(e.c.budget == budget, e.c.value == value,
                                                               e.c.kind == kind)).scalar()

    def last_event(self, budget: str, value: str, kind: str) -> dict | None:
        """The latest event of this kind, {"at", "webhook"} (None: there is none)."""
        e = budget_events
        row = self.db.execute(select(e.c.at, e.c.webhook).where(e.c.budget == budget, e.c.value == value,
                                                                e.c.kind == kind)
                              .order_by(e.c.at.desc(), e.c.id.desc()).limit(1)).mappings().first()
        return None if row is None else dict(row)

    def add_event(self, row: dict[str, Any]) -> int:
        return int(self.db.execute(insert(budget_events).values(**row).returning(budget_events.c.id)).scalar_one())


def lock(db: Connection) -> None:
    if db.dialect.name == "postgresql":
        db.execute(select(func.pg_advisory_xact_lock(BUDGET_LOCK)))
    # SQLite: the engine's transactions begin IMMEDIATE, which takes the one write lock


def set_webhook(db: Connection, event_id: int, status: str) -> None:
    db.execute(update(budget_events).where(budget_events.c.id == event_id).values(webhook=status))


def events(db: Connection, since: str, limit: int, who: dict[str, str | None] | None = None) -> list[dict]:
    """The latest events since `since`; `who` ({dim: value}): only events of those keys or users."""
    e = budget_events
    where = [e.c.at >= since]
    if who is not None:
        where.append(or_(false(), *(and_(e.c.dim == d, e.c.value == v) for d, v in who.items() if v is not None)))
    sel = select(e).where(*where).order_by(e.c.at.desc(), e.c.id.desc()).limit(limit)
    return [{k: v for k, v in dict(r).items() if k != "id"} for r in db.execute(sel).mappings()]


def prune_reservations(db: Connection, before: str) -> int:
    """Reservations made before `before` are history: their query landed or never will."""
    r = budget_reservations
    return int(db.execute(r.delete().where(and_(r.c.created_at < before))).rowcount or 0)
