"""What budgets read and write in the ledger: spend per key, user or variant since an instant (stage rows
joined to their query: billed figures, unpriced rows counted apart, never as $0), and evaluation spend
(the judge runs', `kind = 'judge'`: all together, or of one graded variant); the estimates of queries (and
gradings) admitted but not yet in `queries` (in flight); what a key's, user's or variant's latest live
queries on a model cost; and budget events.

Admission runs in one transaction under one lock for every replica (`BudgetTx`): a PostgreSQL
transaction-scoped advisory lock, SQLite's write lock (BEGIN IMMEDIATE). Reading the spend, the
estimates in flight and booking this query's own estimate are one step, so two replicas can never both
admit against the same headroom: a hard limit is overshot by at most what the admitted queries cost
beyond their estimates. The spend and the estimates in flight are read by one statement (`headroom`):
writers land rows without the lock, and a query landing between two reads would be in neither.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, case, exists, false, func, insert, literal, or_, select, true, update

from rag_app.core import JUDGE_KIND, judge_run_id
from tracing.ledger.rollups import number
from tracing.ledger.schema import budget_events, budget_reservations, queries, query_totals, stage_calls

BUDGET_LOCK = 0x72616762  # pg_advisory_xact_lock key for "admitting against budgets" ("ragb")
EVALUATION = "evaluation"  # the judge's spend: all of it ("*") or of one graded variant
DIMS = ("key", "user", "variant", EVALUATION)
_QUERY_COL = {"key": queries.c.api_key_id, "user": queries.c.user_id, "variant": queries.c.variant,
              EVALUATION: queries.c.variant}
_RESERVATION_COL = {"key": budget_reservations.c.api_key_id, "user": budget_reservations.c.user_id,
                    "variant": budget_reservations.c.variant, EVALUATION: budget_reservations.c.variant}
_TOTALS_COL = {"key": query_totals.c.api_key_id, "user": query_totals.c.user_id, "variant": query_totals.c.variant,
               EVALUATION: query_totals.c.variant}
ESTIMATE_FROM = 20  # recent priced live queries whose mean cost a new query's estimate is at least
ESTIMATE_WALK = 200  # of the budget's latest queries, those looked at for them (a model switched to: few)
_JUDGE_IDS = judge_run_id("") + "%"  # a grading's reservation is booked under its judge run's id


def _kind(dim: str) -> str:
    return JUDGE_KIND if dim == EVALUATION else "query"


def _pooled(dim: str, value: str | None) -> bool:
    """An evaluation budget on "*" counts every grading together, not each variant's apart."""
    return dim == EVALUATION and value == "*"


def spend(db: Connection, dim: str, since: str, value: str | None = None) -> dict[str, dict[str, int]]:
    """value -> {"priced_nano_usd", "unpriced_calls", "queries"} of queries started at or after `since`
    (one value, or every value seen). `unpriced_calls`: stage rows whose cost is unknown."""
    if _pooled(dim, value) or (dim == EVALUATION and value is None):  # "*": all grading, one figure
        row = db.execute(_spend(dim, since, "*")).one()
        return {"*": _spent(row)} if int(number(row[2])) or value == "*" else {}
    col = _QUERY_COL[dim]
    sel = _spend(dim, since, value).add_columns(col).where(col.is_not(None)).group_by(col)
    return {row[3]: _spent(row) for row in db.execute(sel)}


def _spent(row) -> dict[str, int]:
    """A `_spend` row's first three columns as the spend dict."""
    return {"priced_nano_usd": int(number(row[0])), "unpriced_calls": int(number(row[1])),
            "queries": int(number(row[2]))}


def _spend(dim: str, since: str, value: str | None):
    q, s = queries, stage_calls
    where = [q.c.kind == _kind(dim), q.c.started_at >= since]
    if value is not None and not _pooled(dim, value):
        where.append(_QUERY_COL[dim] == value)
    return (select(func.coalesce(func.sum(s.c.cost_nano_usd), 0).label("priced"),
                   func.coalesce(func.sum(case((s.c.cost_nano_usd.is_(None), 1), else_=0)), 0).label("unpriced"),
                   func.count(func.distinct(q.c.query_id)).label("queries"))
            .select_from(q.join(s, s.c.query_id == q.c.query_id)).where(*where))


def _in_flight(dim: str, value: str, since: str):
    r = budget_reservations
    landed = exists(select(queries.c.query_id).where(queries.c.query_id == r.c.query_id))
    grading = r.c.query_id.like(_JUDGE_IDS)
    where = [r.c.created_at >= since, ~landed, grading if dim == EVALUATION else ~grading]
    if not _pooled(dim, value):
        where.append(_RESERVATION_COL[dim] == value)
    return select(func.count().label("n"), func.coalesce(func.sum(r.c.estimate_nano_usd), 0).label("est")).where(*where)


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

    def estimate(self, dim: str, value: str, model: str | None = None) -> int:
        """Mean priced cost of the latest ESTIMATE_FROM live queries (answer-cache hits, which bill nothing,
        left out) of this key, user or variant that called `model` (None: any), among its latest
        ESTIMATE_WALK; 0 with none. For evaluation: of the latest gradings (all, or of one graded variant)."""
        t = query_totals
        where = [t.c.kind == _kind(dim)]
        if not _pooled(dim, value):
            where.append(_TOTALS_COL[dim] == value)
        latest = (select(t.c.cost_nano_usd, t.c.cache_hit, t.c.generate_model, t.c.started_at).where(*where)
                  .order_by(t.c.started_at.desc()).limit(ESTIMATE_WALK).subquery("latest"))
        live = [latest.c.cost_nano_usd.is_not(None), latest.c.cache_hit == 0]
        if model is not None and dim != EVALUATION:
            live.append(latest.c.generate_model == literal(model))
        recent = (select(latest.c.cost_nano_usd).where(*live).order_by(latest.c.started_at.desc())
                  .limit(ESTIMATE_FROM).subquery("recent"))
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
