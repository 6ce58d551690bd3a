"""Reports over the ledger: per-query rows and totals, as plain data for tables, CSV and JSON.

Everything is in integer nano-dollars until the edge, so the CLI, the JSON export and the dashboard
show the same numbers. Totals come from the rollups the writer keeps (rollups.py) and percentiles
from index walks, so a report costs the same on 1,000 or 1,000,000 queries; per-query rows are read a
page at a time (`iter_query_rows`), so exports stream in constant memory. Re-priced figures have no
rollups: `prices="repriced"` reads the rows (slower).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, case, cast, func, literal, select, tuple_
from sqlalchemy.sql import ColumnElement, Select

from rag_app.core import usd_json
from rag_app.core import JUDGE_KIND, StageUsage, judge_run_id
from tracing.ledger import quality_groups, views
from tracing.ledger.rollups import number
from tracing.ledger.rows import stage_row
from tracing.ledger.schema import (
    FLOAT_SUMS,
    INT,
    ROLLUP_SUMS,
    STAGE_ORDER,
    STAGES,
    queries,
    query_stage_totals,
    query_totals,
    report_rollup,
    saving_repricings,
    stage_calls,
)
from tracing.ledger.shares import shares_select

BY_DIMS = {"user": ("user_total", "value"), "key": ("key", "value"), "model": ("model", "value"),
           "stage": ("stage", "value"), "variant": ("all", "variant"), "day": ("all", "day")}


def percentile(values: list, p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), p in [0, 100]."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _usd(nano: float | None) -> float | None:
    return None if nano is None else usd_json(round(nano))


def ordered_stages(names) -> list[str]:
    """Stages in the order a query runs them (STAGE_ORDER), any other (a stage added later) after, by name."""
    known = {name: i for i, name in enumerate(STAGE_ORDER)}
    return sorted(set(names), key=lambda st: (known.get(st, len(known)), st))


def billed_stages(db: Connection, variant: str | None = None) -> list[str]:
    """Every stage the answers' rows name (the rollups' stage dim), the four wide ones always: the per-query
    columns of a report, in one order for every page of an export."""
    r = report_rollup
    found = [v for (v,) in db.execute(select(r.c.value).where(r.c.dim == "stage", r.c.stage_rows != 0,
                                                               *([r.c.variant == variant] if variant else []))
                                      .distinct())]
    return ordered_stages([*STAGES, *found])


@dataclass
class Report:
    queries: list[dict]
    totals: dict


# -- one query's rows --------------------------------------------------------------------------------------
def stage_rows(db: Connection, query_id: str) -> list[dict]:
    """A query's rows in the order its stages ran. Not by id: ids follow commit order, and a crash-safe
    `started` row commits before the batch holding the stages that ran before it."""
    s = stage_calls
    rank = case({name: i for i, name in enumerate(STAGE_ORDER)}, value=s.c.stage, else_=len(STAGE_ORDER))
    return [dict(r) for r in db.execute(select(s).where(s.c.query_id == query_id)
                                        .order_by(s.c.started_at, rank, s.c.attempt, s.c.id)).mappings()]


def usage_json(u: StageUsage, query_id: str) -> dict:
    """A priced usage an answer holds in memory, shown as `GET /v1/queries/{id}` and `rag report` show its
    ledger row (the same two functions: the two cannot disagree). The front doors hand it to the presenter."""
    return stage_json(stage_row(u, query_id=query_id))


def stage_json(row: dict) -> dict:
    # a `started` attempt never got its end written (in flight, or the process died): outcome unknown
    status = "unknown" if row["status"] == "started" else row["status"]
    return {"stage": row["stage"], "model": row["model"], "status": status, "attempt": row["attempt"],
            "call_id": row["call_id"], "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"],
            "cached_tokens": row["cached_tokens"], "cache_write_tokens": row.get("cache_write_tokens", 0),
            "reasoning_tokens": row.get("reasoning_tokens", 0), "usage_source": row.get("usage_source"),
            "estimate_note": row.get("estimate_note"), "output_at_risk_tokens": row.get("output_at_risk_tokens"),
            "output_at_risk_usd": usd_json(row.get("output_at_risk_nano_usd")),
            "cost_usd": usd_json(row["cost_nano_usd"]),
            "shadow_cost_usd": usd_json(row["shadow_cost_nano_usd"]), "price_version": row["price_version"],
            "price_source": row["price_source"],
            "possibly_billed": bool(row["possibly_billed"]), "latency_ms": row["latency_ms"],
            "cache_hits": row["cache_hits"], "cache_misses": row["cache_misses"], "error": row["error"],
            "context_budget_tokens": row.get("context_budget_tokens"), "context_tokens": row.get("context_tokens"),
            # why it cost what it cost (m015): where it was sent, the rule and dated price applied, any warning
            "provider": row.get("provider"), "endpoint": row.get("endpoint"), "price_rule": row.get("price_rule"),
            "price_effective_from": row.get("price_effective_from"), "price_warning": row.get("price_warning"),
            # in the price's own currency (m016): a CNY row's yuan as billed, exact, and the rate used
            "price_currency": row.get("price_currency"), "native_cost": row.get("native_cost"),
            "fx_rate": row.get("fx_rate")}


# -- per-query rows from the totals ---------------------------------------------------------------------------
def query_row(t: Any, parts: dict[str, dict] | None = None, stages=STAGES,
              evaluation_nano: int | None = None) -> dict:
    """One per-query row (from a query_totals row joined with its question), as reports print it: who asked
    it, a `<stage>_tokens`, `_cost_usd` and `_shadow_cost_usd` column for each of `stages`, from `parts` (its
    query_stage_totals rows by stage; None: the wide columns of the four base stages), and what grading it
    cost (`evaluation_cost_usd`: its judge run, apart from its cost; null when it was not judged)."""
    row = {"query_id": t["query_id"], "started_at": t["started_at"], "user_id": t["user_id"],
           "api_key_id": t["api_key_id"], "question": t["question"],
           "variant": t["variant"], "mode": t["mode"], "status": t["status"], "latency_ms": t["latency_ms"],
           "cost_usd": usd_json(t["cost_nano_usd"]), "priced_cost_usd": usd_json(t["priced_cost_nano_usd"]),
           "shadow_cost_usd": usd_json(t["shadow_cost_nano_usd"]), "unpriced_rows": t["unpriced_rows"],
           "estimated_rows": t["estimated_rows"], "output_at_risk_tokens": t["output_at_risk_tokens"],
           "retries": t["retries"], "timeouts": t["timeouts"],
           "context_tokens": t["context_tokens"], "context_budget_tokens": t["context_budget_tokens"],
           "unknown_attempts": t["unknown_attempts"],
           "output_at_risk_usd": usd_json(t.get("output_at_risk_nano_usd") or 0),
           "evaluation_cost_usd": usd_json(evaluation_nano)}
    if parts is None:
        parts = {st: {"input_tokens": t[f"{st}_input_tokens"], "output_tokens": t[f"{st}_output_tokens"],
                      "unpriced_rows": t[f"{st}_unpriced_rows"], "cost_nano_usd": t[f"{st}_cost_nano_usd"],
                      "shadow_nano_usd": t[f"{st}_shadow_nano_usd"]} for st in STAGES}
    return {**row, **stage_columns(parts, stages)}


def stage_columns(parts: dict[str, dict], stages) -> dict:
    """A query's `<stage>_tokens`, `_cost_usd` (null: unpriced) and `_shadow_cost_usd` for each of `stages`,
    from its query_stage_totals rows by stage (`parts`); a stage it did not run: 0."""
    row: dict = {}
    for st in stages:
        d = parts.get(st) or {}
        row[f"{st}_tokens"] = d.get("input_tokens", 0) + d.get("output_tokens", 0)
        row[f"{st}_cost_usd"] = None if d.get("unpriced_rows") else usd_json(d.get("cost_nano_usd", 0))
        row[f"{st}_shadow_cost_usd"] = usd_json(d.get("shadow_nano_usd", 0))
    return row


def page_parts(db: Connection, ids: list[str]) -> tuple[dict[str, dict[str, dict]], dict[str, int]]:
    """For a page of query ids: each one's rows per stage (query_stage_totals), and what its judge run cost
    (the priced part; absent when it was not judged)."""
    parts: dict[str, dict[str, dict]] = {qid: {} for qid in ids}
    judged: dict[str, int] = {}
    if not ids:
        return parts, judged
    st = query_stage_totals
    for r in db.execute(select(st).where(st.c.query_id.in_(ids))).mappings():
        parts[r["query_id"]][r["stage"]] = dict(r)
    runs = {judge_run_id(qid): qid for qid in ids}
    t = query_totals
    for run_id, cost in db.execute(select(t.c.query_id, t.c.priced_cost_nano_usd)
                                   .where(t.c.query_id.in_(list(runs)), t.c.kind == JUDGE_KIND)):
        judged[runs[run_id]] = int(number(cost))
    return parts, judged


def listing(where: list[ColumnElement]) -> Select:
    """query_totals rows with their question, newest first (the query list of the API and dashboard)."""
    t, q = query_totals, queries
    return (select(t, q.c.question).select_from(t.outerjoin(q, q.c.query_id == t.c.query_id))
            .where(t.c.kind == "query", *where).order_by(t.c.started_at.desc(), t.c.query_id.desc()))


def iter_query_rows(db: Connection, variant: str | None = None, last: int | None = None, page: int = 1000,
                    raw: bool = False, quality: bool = True) -> Iterator[dict]:
    """Per-query rows, newest first, `page` at a time by keyset (started_at, query_id): memory stays flat
    however many there are (and a PostgreSQL cursor never holds more than a page). Each row carries its
    answer's quality (quality_groups.QUERY_QUALITY_FIELDS; `quality` False: a ledger that predates them,
    all null)."""
    where = [] if variant is None else [query_totals.c.variant == variant]
    stages = billed_stages(db, variant)
    left, after = last, None
    while left is None or left > 0:
        size = page if left is None else min(page, left)
        cond = list(where)
        if after is not None:
            cond.append(tuple_(query_totals.c.started_at, query_totals.c.query_id) < tuple_(*after))
        batch = [dict(r) for r in db.execute(listing(cond).limit(size)).mappings()]
        ids = [t["query_id"] for t in batch]
        parts, judged = ({}, {}) if raw else page_parts(db, ids)
        scores = {} if raw else _quality_of(db, ids, quality)
        for t in batch:
            yield t if raw else {**query_row(t, parts[t["query_id"]], stages, judged.get(t["query_id"])),
                                 **scores[t["query_id"]]}
        if len(batch) < size:
            return
        after = (batch[-1]["started_at"], batch[-1]["query_id"])
        if left is not None:
            left -= len(batch)


# -- totals -------------------------------------------------------------------------------------------------
def _rollup_sums(where: list[ColumnElement], r=report_rollup) -> Select:
    return select(*(cast(func.coalesce(func.sum(r.c[c]), 0), INT).label(c) if c not in FLOAT_SUMS
                    else func.coalesce(func.sum(r.c[c]), 0.0).label(c) for c in ROLLUP_SUMS)).where(*where)


def _selection(variant: str | None, last: int | None):
    """The selected queries (alias t): a variant's, or the `last` most recent."""
    t = query_totals
    sel = select(t).where(t.c.kind == "query")
    if variant:
        sel = sel.where(t.c.variant == variant)
    if last is not None:
        sel = sel.order_by(t.c.started_at.desc(), t.c.query_id.desc()).limit(int(last))
    return sel.subquery("t")


def values_at(db: Connection, source, column: str, n: int, lo: int) -> tuple | None:
    """The non-NULL values at sorted ranks lo and lo+1 (lo again when lo is the last) of the n in `source`,
    read by an index walk from the nearer end (an OFFSET walks every entry it skips: p95 of a million
    rows skips 50k entries instead of 950k)."""
    col = source.c[column]
    base = select(col).where(col.is_not(None))
    hi = min(lo + 1, n - 1)
    if lo < n - 1 - hi:
        xs = [number(r[0]) for r in db.execute(base.order_by(col).limit(2).offset(lo))]
        return None if not xs else (xs[0], xs[1] if hi > lo and len(xs) > 1 else xs[0])
    xs = [number(r[0]) for r in db.execute(base.order_by(col.desc()).limit(hi - lo + 1).offset(n - 1 - hi))]
    return None if not xs else (xs[-1], xs[0])


def percentile_of(db: Connection, source, column: str, n: int, p: float) -> float | None:
    """`percentile()` of a column's non-NULL values (n of them) in `source`."""
    if n <= 0:
        return None
    pos = (n - 1) * p / 100
    lo = int(pos)
    pair = values_at(db, source, column, n, lo)
    return None if pair is None else pair[0] + (pair[1] - pair[0]) * (pos - lo)


def percentile_nulls_as_zero(db: Connection, source, column: str, n: int, nulls: int, p: float) -> float | None:
    """`percentile()` of n values of which `nulls` are NULL and count as 0 (they sort first)."""
    if not n:
        return None
    pos = (n - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    vals: list = [0.0 if lo < nulls else None, 0.0 if hi < nulls else None]
    if vals[1] is None:  # at least one rank among the non-NULL values
        first = max(lo - nulls, 0)
        pair = values_at(db, source, column, n - nulls, first)
        if pair is None:
            return None
        vals = [pair[0] if vals[0] is None else vals[0], pair[1] if hi - nulls > first else pair[0]]
    return vals[0] + (vals[1] - vals[0]) * (pos - lo)


def report_totals(db: Connection, last: int | None = None, variant: str | None = None) -> dict:
    source = _selection(variant, last)
    # everything (or one variant): add up the rollups; the N most recent: the same shares of just those
    r = report_rollup if last is None else shares_select(source).subquery("r")
    scope = [r.c.variant == variant] if variant else []
    sums = dict(db.execute(_rollup_sums([r.c.dim == "all", *scope], r)).mappings().one())
    stages = {row[0]: tuple(number(x) for x in row[1:]) for row in db.execute(
        select(r.c.value, *(func.sum(r.c[c]) for c in ("stage_rows", "input_tokens", "output_tokens",
                                                       "priced_cost_nano_usd", "shadow_cost_nano_usd",
                                                       "unpriced_rows")))
        .where(r.c.dim == "stage", *scope).group_by(r.c.value)) if number(row[1])}  # an answer's stage, not the judge's
    budgets = sorted(int(b) for (b,) in db.execute(
        select(r.c.value).where(r.c.dim == "budget", r.c.queries > 0, *scope).distinct()))
    pct = lambda col, n, p: _usd(percentile_of(db, source, col, n, p))
    total, waste = sums["priced_cost_nano_usd"], sums["waste_nano_usd"]
    hits, misses = sums["cache_hits"], sums["cache_misses"]
    priced = sums["priced_queries"]
    return {
        "prices": "original",
        "queries": sums["queries"],
        "priced_queries": priced,
        "unpriced_queries": sums["queries"] - priced,
        "cost_usd": usd_json(total),
        "cost_is_lower_bound": sums["unpriced_rows"] > 0,
        "shadow_cost_usd": usd_json(sums["shadow_part_nano_usd"]),  # every known shadow, as the stages add up
        "cost_per_query_p50_usd": pct("cost_nano_usd", priced, 50),
        "cost_per_query_p95_usd": pct("cost_nano_usd", priced, 95),
        "cost_per_1k_queries_usd": _usd(1000 * sums["cost_nano_usd"] / priced) if priced else None,
        "shadow_cost_per_query_p50_usd": pct("shadow_cost_nano_usd", sums["shadow_queries"], 50),
        "shadow_cost_per_query_p95_usd": pct("shadow_cost_nano_usd", sums["shadow_queries"], 95),
        "retry_timeout_waste_usd": usd_json(waste),
        "retry_timeout_waste_pct": round(100 * waste / total, 2) if total else 0.0,
        "retries": sums["retries"], "timeouts": sums["timeouts"], "unpriced_rows": sums["unpriced_rows"],
        "estimated_rows": sums["estimated_rows"], "output_at_risk_tokens": sums["output_at_risk_tokens"],
        # LLM attempts whose outcome is unknown (a process died mid-call): possibly billed, at input estimate
        "unknown_attempts": sums["unknown_attempts"],
        **at_risk_json(sums["unknown_cost_nano_usd"], sums["output_at_risk_nano_usd"]),
        "embedding_cache_hit_rate": round(hits / (hits + misses), 4) if hits + misses else None,
        **answer_cache_json(sums["queries"], sums["cache_hit_queries"], sums["saved_cost_nano_usd"],
                            sums["saved_unpriced"]),
        "context_tokens_mean": (round(sums["context_tokens"] / sums["context_queries"], 1)
                                if sums["context_queries"] else None),
        "context_budget_tokens": budgets,
        "stages": {st: _stage_json(stages.get(st)) for st in ordered_stages([*STAGES, *stages])},
        "evaluation_spend": evaluation_totals(db, source, variant, last),
    }


def at_risk_json(unknown_nano: int, output_nano: int) -> dict:
    """Money that may still be billed: LLM attempts whose outcome is unknown (priced at their input
    estimate) and output tokens a cut reply may still bill (at their rows' output rates), apart and together."""
    unknown, output = int(number(unknown_nano)), int(number(output_nano))
    return {"at_risk_usd": usd_json(unknown + output), "at_risk_unknown_attempts_usd": usd_json(unknown),
            "at_risk_output_usd": usd_json(output)}


# -- evaluation spend: the judge's runs, apart from the queries they graded ---------------------------------
def evaluation_json(runs: int, calls: int, priced_nano: int, null_cost_rows: int, unpriced_rows: int, failed: int,
                    retries: int, timeouts: int) -> dict:
    """What grading answers cost (`kind = 'judge'` runs: one per judged answer, `calls` LLM attempts),
    never part of a query's cost, its cost per query or its arm's figures."""
    return {"cost_usd": usd_json(int(number(priced_nano))), "cost_is_lower_bound": int(number(null_cost_rows)) > 0,
            "judge_calls": int(number(calls)), "judged_answers": int(number(runs)) - int(number(failed)),
            "failed_runs": int(number(failed)), "unpriced_rows": int(number(unpriced_rows)),
            "retries": int(number(retries)), "timeouts": int(number(timeouts))}


def _judged_of(source, variant: str | None, last: int | None, kind_col, id_col, variant_col) -> list:
    """Which judge runs a report covers: those of its variant, or those grading its `last` queries."""
    where = [kind_col == JUDGE_KIND]
    if variant:
        where.append(variant_col == variant)
    if last is not None:
        where.append(id_col.in_(select(literal(judge_run_id("")).concat(source.c.query_id))))
    return where


def evaluation_totals(db: Connection, source, variant: str | None, last: int | None) -> dict:
    """Evaluation spend from the judge runs' totals (query_totals, kept by the writer like a query's)."""
    t = query_totals
    row = db.execute(select(
        func.count(), func.coalesce(func.sum(t.c.stage_rows), 0), func.coalesce(func.sum(t.c.priced_cost_nano_usd), 0),
        func.coalesce(func.sum(t.c.null_cost_rows), 0), func.coalesce(func.sum(t.c.unpriced_rows), 0),
        func.coalesce(func.sum(case((t.c.status != "ok", 1), else_=0)), 0),
        func.coalesce(func.sum(t.c.retries), 0), func.coalesce(func.sum(t.c.timeouts), 0))
        .where(*_judged_of(source, variant, last, t.c.kind, t.c.query_id, t.c.variant))).one()
    return evaluation_json(*row)


def evaluation_full(db: Connection, stage_source, source, variant: str | None, last: int | None) -> dict:
    """evaluation_totals() from the judge runs' rows (`stage_source`: stage_calls or the re-priced view)."""
    q, s = queries, stage_source
    runs, failed = db.execute(select(func.count(), func.coalesce(func.sum(case((q.c.status != "ok", 1), else_=0)), 0))
                              .where(*_judged_of(source, variant, last, q.c.kind, q.c.query_id, q.c.variant))).one()
    calls, cost, null_cost, unpriced, retries, timeouts = db.execute(select(
        func.count(), func.coalesce(func.sum(s.c.cost_nano_usd), 0),
        func.coalesce(func.sum(case((s.c.cost_nano_usd.is_(None), 1), else_=0)), 0),
        func.coalesce(func.sum(case((s.c.price_source == "unpriced", 1), else_=0)), 0),
        func.coalesce(func.sum(case((s.c.status == "retry", 1), else_=0)), 0),
        func.coalesce(func.sum(case((s.c.status == "timeout", 1), else_=0)), 0))
        .select_from(s.join(q, q.c.query_id == s.c.query_id))
        .where(*_judged_of(source, variant, last, q.c.kind, q.c.query_id, q.c.variant))).one()
    return evaluation_json(runs, calls, cost, null_cost, unpriced, failed, retries, timeouts)


def answer_cache_json(queries: int, hits: int, saved_nano: int, saved_unknown: int) -> dict:
    """Answer-cache hits, their rate and what they saved (hits whose original was unpriced: unknown)."""
    return {"answer_cache_hits": int(number(hits)),
            "answer_cache_hit_rate": round(int(number(hits)) / queries, 4) if queries else None,
            "saved_cost_usd": usd_json(int(number(saved_nano))), "saved_unknown_hits": int(number(saved_unknown))}


def _stage_json(v) -> dict:
    rows, tin, tout, cost, shadow, unpriced = (int(number(x)) for x in v) if v else (0,) * 6
    return {"input_tokens": tin, "output_tokens": tout, "cost_usd": usd_json(cost), "shadow_cost_usd": usd_json(shadow),
            "unpriced_rows": unpriced, "rows": rows}


def build_report(db: Connection, last: int | None = None, variant: str | None = None, prices: str = "original",
                 rows: int | None = None, quality: bool = True) -> Report:
    """Totals and per-query rows. `last`: only the N most recent queries (totals too). `rows`: how many
    per-query rows to return at most (None: every selected one; exports use `iter_query_rows`).
    `prices`: "original" (as recorded) or "repriced" (the latest `rag reprice`; read from the rows)."""
    if prices != "original":
        rep = build_report_full(db, last=last, variant=variant, prices=prices, quality=quality)
        return rep if rows is None else Report(rep.queries[:rows], rep.totals)
    totals = report_totals(db, last=last, variant=variant)
    n = last if rows is None else rows if last is None else min(last, rows)
    return Report([] if n == 0 else list(iter_query_rows(db, variant=variant, last=n, quality=quality)), totals)


def build_report_full(db: Connection, last: int | None = None, variant: str | None = None,
                      prices: str = "original", quality: bool = True) -> Report:
    """Every selected query and stage row through Python (the re-priced figures, and the reference the
    rollup-based report is tested against)."""
    stage_source = (views.stage_calls_repriced() if prices == "repriced" else select(stage_calls)).subquery("s")
    qc = views.query_costs(stage_source).subquery("qc")
    sel = select(qc).where(qc.c.kind == "query").order_by(qc.c.started_at.desc())
    if variant:
        sel = sel.where(qc.c.variant == variant)
    if last:
        sel = sel.limit(int(last))
    qs = [dict(r) for r in db.execute(sel).mappings()]
    ids = [q["query_id"] for q in qs]
    tally = _FullTally.over(ids)
    stages = billed_stages(db, variant)
    q, sr = queries, saving_repricings
    saved: Any = q.c.saved_cost_nano_usd
    if prices == "repriced":  # a hit's saving as `rag reprice` last figured it: a live call at the hit's time
        latest = select(func.max(sr.c.id)).where(sr.c.query_id == q.c.query_id).scalar_subquery()
        sr2 = sr.alias("sr2")  # the inner max() stays correlated to the hit
        repriced = select(sr2.c.saved_cost_nano_usd).where(sr2.c.id == latest).scalar_subquery()
        saved = case((latest.is_(None), q.c.saved_cost_nano_usd), else_=repriced)
    who: dict[str, dict] = {}  # who asked each (the query_costs view predates the columns)
    for batch in _batches(ids, 500):
        for qid, user, key in db.execute(select(q.c.query_id, q.c.user_id, q.c.api_key_id)
                                         .where(q.c.query_id.in_(batch))):
            who[qid] = {"user_id": user, "api_key_id": key}
        for (saving,) in db.execute(select(saved).where(q.c.query_id.in_(batch), q.c.cache_hit == 1)):
            tally.add_cache_hit(saving)
        for m in db.execute(select(stage_source).where(stage_source.c.query_id.in_(batch))).mappings():
            tally.add_stage_row(dict(m))
    judged: dict[str, int] = {}
    runs = {judge_run_id(qid): qid for qid in ids}
    for batch in _batches(list(runs), 500):
        for run_id, cost in db.execute(select(stage_source.c.query_id, func.sum(stage_source.c.cost_nano_usd))
                                       .where(stage_source.c.query_id.in_(batch)).group_by(stage_source.c.query_id)):
            judged[runs[run_id]] = int(number(cost))
    j = evaluation_full(db, stage_source, sel.subquery("sel"), variant, last)
    scores = {k: v for batch in _batches(ids, 500) for k, v in _quality_of(db, batch, quality).items()}
    return Report([{**query_row({**tally.query_totals_row(q), **who[q["query_id"]]}, tally.parts(q["query_id"]), stages,
                                judged.get(q["query_id"])), **scores[q["query_id"]]} for q in qs],
                  tally.totals(qs, prices, j))


def _quality_of(db: Connection, ids: list[str], known: bool) -> dict[str, dict]:
    if not known:
        return {i: quality_groups.unknown_query() for i in ids}
    return quality_groups.per_query(db, ids)


def _batches(ids: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


@dataclass
class _FullTally:
    """What `build_report_full` sums while it walks the stage rows of the selected queries."""
    per_stage: dict[str, dict[str, dict]]
    stage_tot: dict[str, dict]
    unknown_by_query: dict[str, int]
    context: dict[str, tuple]
    at_risk_by_query: dict[str, int]
    waste: int = 0
    retries: int = 0
    timeouts: int = 0
    unpriced: int = 0
    estimated: int = 0
    at_risk: int = 0
    at_risk_nano: int = 0
    embed_hits: int = 0
    embed_misses: int = 0
    unknown: int = 0
    unknown_cost: int = 0
    cache_hits: int = 0
    saved: int = 0
    saved_unknown: int = 0

    @classmethod
    def over(cls, ids: list[str]) -> _FullTally:
        return cls(per_stage={qid: {} for qid in ids}, stage_tot={st: _new_sums() for st in STAGES},
                   unknown_by_query={}, context={}, at_risk_by_query={})

    def add_cache_hit(self, saving: int | None) -> None:
        self.cache_hits += 1
        self.saved += saving or 0
        self.saved_unknown += saving is None

    def add_stage_row(self, r: dict) -> None:
        _add(self.per_stage[r["query_id"]].setdefault(r["stage"], _new_sums()), r)
        _add(self.stage_tot.setdefault(r["stage"], _new_sums()), r)
        self._add_outcome(r)
        if r["stage"] in ("embed_query", "retrieve"):
            self.embed_hits += r["cache_hits"] or 0
            self.embed_misses += r["cache_misses"] or 0
        if r["stage"] == "generate" and r.get("context_tokens") is not None:
            self.context[r["query_id"]] = (r["context_tokens"], r.get("context_budget_tokens"))

    def _add_outcome(self, r: dict) -> None:
        """Waste, attempts of unknown outcome and the counts of retries, timeouts, unpriced and estimated rows."""
        if r["status"] in ("retry", "timeout", "error"):
            self.waste += r["cost_nano_usd"] or 0
        if r["status"] in ("started", "unknown"):
            self.unknown += 1
            self.unknown_cost += r["cost_nano_usd"] or 0
            self.unknown_by_query[r["query_id"]] = self.unknown_by_query.get(r["query_id"], 0) + 1
        self.retries += r["status"] == "retry"
        self.timeouts += r["status"] == "timeout"
        self.unpriced += r["price_source"] == "unpriced"
        self.estimated += (r["usage_source"] or "").startswith("estimated:")
        self.at_risk += r["output_at_risk_tokens"] or 0
        risk = r.get("output_at_risk_nano_usd") or 0  # (the re-priced view keeps none: the original's is 0 there)
        self.at_risk_nano += risk
        self.at_risk_by_query[r["query_id"]] = self.at_risk_by_query.get(r["query_id"], 0) + risk

    def query_totals_row(self, q: dict) -> dict:
        """One query shaped as a query_totals row, then printed by the one query_row()."""
        qid = q["query_id"]
        ctx_used, ctx_budget = self.context.get(qid, (None, None))
        return {**q, "context_tokens": ctx_used, "context_budget_tokens": ctx_budget,
                "unknown_attempts": self.unknown_by_query.get(qid, 0),
                "output_at_risk_nano_usd": self.at_risk_by_query.get(qid, 0)}

    def parts(self, qid: str) -> dict[str, dict]:
        """The query's rows per stage, shaped as its query_stage_totals rows."""
        return {st: {"input_tokens": d["input_tokens"], "output_tokens": d["output_tokens"],
                     "unpriced_rows": d["unpriced"], "cost_nano_usd": d["cost_nano"], "shadow_nano_usd": d["shadow_nano"]}
                for st, d in self.per_stage[qid].items()}

    def totals(self, qs: list[dict], prices: str, evaluation: dict) -> dict:
        total = sum(q["priced_cost_nano_usd"] for q in qs)
        return {"prices": prices, **self._cost_figures(qs, total), **self._attempt_figures(total),
                **self._cache_and_context_figures(len(qs)),
                "stages": {st: {"input_tokens": v["input_tokens"], "output_tokens": v["output_tokens"],
                                "cost_usd": usd_json(v["cost_nano"]), "shadow_cost_usd": usd_json(v["shadow_nano"]),
                                "unpriced_rows": v["unpriced"], "rows": v["rows"]}
                           for st in ordered_stages(self.stage_tot) for v in (self.stage_tot[st],)},
                "evaluation_spend": evaluation}

    def _cost_figures(self, qs: list[dict], total: int) -> dict:
        costs = [q["cost_nano_usd"] for q in qs if q["cost_nano_usd"] is not None]
        shadows = [q["shadow_cost_nano_usd"] for q in qs if q["shadow_cost_nano_usd"] is not None]
        return {
            "queries": len(qs), "priced_queries": len(costs), "unpriced_queries": len(qs) - len(costs),
            "cost_usd": usd_json(total), "cost_is_lower_bound": self.unpriced > 0,
            "shadow_cost_usd": usd_json(sum(d.get("shadow_nano", 0) for q in self.per_stage.values()
                                            for d in q.values())),
            "cost_per_query_p50_usd": _usd(percentile(costs, 50)), "cost_per_query_p95_usd": _usd(percentile(costs, 95)),
            "cost_per_1k_queries_usd": _usd(1000 * sum(costs) / len(costs)) if costs else None,
            "shadow_cost_per_query_p50_usd": _usd(percentile(shadows, 50)),
            "shadow_cost_per_query_p95_usd": _usd(percentile(shadows, 95))}

    def _attempt_figures(self, total: int) -> dict:
        return {"retry_timeout_waste_usd": usd_json(self.waste),
                "retry_timeout_waste_pct": round(100 * self.waste / total, 2) if total else 0.0,
                "retries": self.retries, "timeouts": self.timeouts, "unpriced_rows": self.unpriced,
                "estimated_rows": self.estimated, "output_at_risk_tokens": self.at_risk,
                "unknown_attempts": self.unknown, **at_risk_json(self.unknown_cost, self.at_risk_nano)}

    def _cache_and_context_figures(self, n_queries: int) -> dict:
        hits, misses, context = self.embed_hits, self.embed_misses, self.context
        return {
            "embedding_cache_hit_rate": round(hits / (hits + misses), 4) if hits + misses else None,
            **answer_cache_json(n_queries, self.cache_hits, self.saved, self.saved_unknown),
            "context_tokens_mean": round(sum(t for t, _ in context.values()) / len(context), 1) if context else None,
            "context_budget_tokens": sorted({b for _, b in context.values() if b is not None})}


def _new_sums() -> dict:
    return {"input_tokens": 0, "output_tokens": 0, "cost_nano": 0, "shadow_nano": 0, "unpriced": 0, "rows": 0}


def _add(sums: dict, row: dict) -> None:
    sums["input_tokens"] += row["input_tokens"]
    sums["output_tokens"] += row["output_tokens"]
    sums["cost_nano"] += row["cost_nano_usd"] or 0
    sums["shadow_nano"] += row["shadow_cost_nano_usd"] or 0
    sums["unpriced"] += row["price_source"] == "unpriced"
    sums["rows"] += 1


def by_report(db: Connection, dim: str, variant: str | None = None) -> list[dict]:
    """Spend per user, API key, model, stage, variant or day, most expensive first. For `stage`, `queries`
    counts the queries that had it; for `model`, the queries that called it (an extractive answer's skipped
    row names the LLM but did not call it), so $/1k queries is over those. The cost is that model's /
    stage's rows (the per-model and per-stage totals add up to the overall total). `cost_usd` is null when
    nothing of a group is priced."""
    if dim not in BY_DIMS:
        raise ValueError(f"unknown dimension {dim!r}; use one of {', '.join(BY_DIMS)}")
    rdim, col = BY_DIMS[dim]
    r = report_rollup
    where = [r.c.dim == rdim] + ([r.c.variant == variant] if variant else [])
    sel = select(r.c[col].label("key"), *_rollup_sums([]).selected_columns).where(*where).group_by(r.c[col])
    query_level = rdim not in ("model", "stage")
    out = [_by_row(dim, s, query_level) for s in db.execute(sel).mappings()
           # a model only named by skipped rows keeps its row: its shadow is booked to it; a judge model (or a
           # user whose answers were only judged this day) keeps its row: evaluation spend is booked to it
           if s["queries"] or (not query_level and s["stage_rows"]) or s["evaluation_runs"]]
    out.sort(key=lambda x: (-(x["cost_usd"] or 0), -x["queries"], str(x[dim])))
    if dim == "day":
        out.sort(key=lambda x: str(x["day"]), reverse=True)
    return out


def _by_row(dim: str, s, query_level: bool) -> dict:
    """One group of `by_report`; the columns that only make sense per query are None for model and stage.
    `evaluation_cost_usd`: what grading answers cost in this group (judge runs: the judge's model, stage
    `judge`, the graded answers' user, key, variant and day), beside `cost_usd`, never inside it: the two
    add up to every billed row of the group."""
    # model and stage: a mean per query only when every row of it is priced; `unpriced_queries` counts the
    # queries whose rows of it are (partly) unpriced, so a wholly unpriced model says how many it had
    priced = s["priced_queries"] if query_level else (0 if s["unpriced_rows"] else s["queries"])
    mean_base = s["cost_nano_usd"] if query_level else s["priced_cost_nano_usd"]
    # nothing of it priced (every cost unknown): unpriced, never 0.0, in JSON and CSV as in the table
    wholly_unpriced = s["unpriced_rows"] > 0 and not s["priced_cost_nano_usd"]
    eval_unknown = s["evaluation_null_cost_rows"] > 0 and not s["evaluation_cost_nano_usd"]
    row = {dim: s["key"] or None, "queries": s["queries"],
           "unpriced_queries": s["queries"] - s["priced_queries"],
           "cost_usd": None if wholly_unpriced else usd_json(s["priced_cost_nano_usd"]),
           "evaluation_cost_usd": None if eval_unknown else usd_json(s["evaluation_cost_nano_usd"]),
           "evaluation_cost_is_lower_bound": s["evaluation_null_cost_rows"] > 0,
           "evaluation_runs": s["evaluation_runs"],
           "cost_is_lower_bound": s["unpriced_rows"] > 0,
           "cost_per_1k_queries_usd": _usd(1000 * mean_base / priced) if priced else None,
           "shadow_cost_usd": usd_json(s["shadow_part_nano_usd"]),
           "input_tokens": s["input_tokens"], "output_tokens": s["output_tokens"],
           "unpriced_rows": s["unpriced_rows"], "retries": None, "timeouts": None, "waste_usd": None}
    if query_level:
        row.update({"retries": s["retries"], "timeouts": s["timeouts"], "waste_usd": usd_json(s["waste_nano_usd"]),
                    **answer_cache_json(s["queries"], s["cache_hit_queries"], s["saved_cost_nano_usd"],
                                        s["saved_unpriced"])})
    return row
