"""Reports over the ledger: per-query rows and totals, as plain data for tables, CSV and JSON.

Everything is in integer nano-dollars until the edge, so the CLI, the JSON export and the dashboard
show the same numbers. Totals come from the rollups the ledger writer keeps (tracing/rollups.py) and
percentiles from index walks, so a report costs the same on 1,000 or 1,000,000 queries; per-query
rows are read a page at a time (`iter_query_rows`), so exports stream in constant memory.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from rag_app.money import usd_json

STAGES = ("embed_query", "retrieve", "rerank", "generate")


def percentile(values: list[int], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), p in [0, 100]."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stage_rows(conn: sqlite3.Connection, query_id: str) -> list[dict]:
    rows = conn.execute("SELECT * FROM stage_calls WHERE query_id = ? ORDER BY id", (query_id,)).fetchall()
    return [dict(r) for r in rows]


def stage_json(row: dict) -> dict:
    # a `started` attempt never got its end written (in flight, or the process died): outcome unknown
    status = "unknown" if row["status"] == "started" else row["status"]
    return {"stage": row["stage"], "model": row["model"], "status": status, "attempt": row["attempt"],
            "call_id": row["call_id"], "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"],
            "cached_tokens": row["cached_tokens"], "cache_write_tokens": row.get("cache_write_tokens", 0),
            "reasoning_tokens": row.get("reasoning_tokens", 0), "usage_source": row.get("usage_source"),
            "estimate_note": row.get("estimate_note"), "output_at_risk_tokens": row.get("output_at_risk_tokens"),
            "cost_usd": usd_json(row["cost_nano_usd"]),
            "shadow_cost_usd": usd_json(row["shadow_cost_nano_usd"]), "price_version": row["price_version"],
            "price_source": row["price_source"],
            "possibly_billed": bool(row["possibly_billed"]), "latency_ms": row["latency_ms"],
            "cache_hits": row["cache_hits"], "cache_misses": row["cache_misses"], "error": row["error"],
            "context_budget_tokens": row.get("context_budget_tokens"), "context_tokens": row.get("context_tokens")}


@dataclass
class Report:
    queries: list[dict]
    totals: dict


PRICES = {"original": ("query_costs", "stage_calls"), "repriced": ("query_costs_repriced", "stage_calls_repriced")}


def build_report_full(conn: sqlite3.Connection, last: int | None = None, variant: str | None = None,
                      prices: str = "original") -> Report:
    """Every selected query and stage row through Python: the computation before the rollups (#11).
    Still the path for `prices="repriced"` (re-priced figures have no rollups: slower, see README),
    and the reference the rollup-based `build_report` is tested against."""
    query_view, stage_source = PRICES[prices]
    where, args = "kind = 'query'", []
    if variant:
        where += " AND variant = ?"
        args.append(variant)
    limit = f" LIMIT {int(last)}" if last else ""
    qs = [dict(r) for r in conn.execute(
        f"SELECT * FROM {query_view} WHERE {where} ORDER BY started_at DESC{limit}", args)]
    ids = [q["query_id"] for q in qs]
    per_stage: dict[str, dict[str, dict]] = {qid: {} for qid in ids}
    stage_tot: dict[str, dict] = {st: _new_sums() for st in STAGES}
    waste = retries = timeouts = unpriced = estimated = at_risk = 0
    hits = misses = 0
    context: dict[str, tuple[int, int]] = {}  # query_id -> (context tokens, budget) of its generate call
    for i in range(0, len(ids), 500):
        batch = ids[i:i + 500]
        for r in conn.execute(f"SELECT * FROM {stage_source} WHERE query_id IN ({','.join('?' * len(batch))})", batch):
            r = dict(r)
            _add(per_stage[r["query_id"]].setdefault(r["stage"], _new_sums()), r)
            _add(stage_tot.setdefault(r["stage"], _new_sums()), r)
            if r["status"] in ("retry", "timeout", "error"):
                waste += r["cost_nano_usd"] or 0
            retries += r["status"] == "retry"
            timeouts += r["status"] == "timeout"
            unpriced += r["price_source"] == "unpriced"
            estimated += (r["usage_source"] or "").startswith("estimated:")
            at_risk += r["output_at_risk_tokens"] or 0
            if r["stage"] == "generate" and r.get("context_tokens") is not None:
                context[r["query_id"]] = (r["context_tokens"], r.get("context_budget_tokens"))
            if r["stage"] == "embed_query":
                hits += r["cache_hits"] or 0
                misses += r["cache_misses"] or 0
    rows = []
    for q in qs:
        row = {"query_id": q["query_id"], "started_at": q["started_at"], "question": q["question"],
               "variant": q["variant"], "mode": q["mode"], "status": q["status"], "latency_ms": q["latency_ms"],
               "cost_usd": usd_json(q["cost_nano_usd"]), "priced_cost_usd": usd_json(q["priced_cost_nano_usd"]),
               "shadow_cost_usd": usd_json(q["shadow_cost_nano_usd"]), "unpriced_rows": q["unpriced_rows"],
               "estimated_rows": q["estimated_rows"], "output_at_risk_tokens": q["output_at_risk_tokens"],
               "retries": q["retries"], "timeouts": q["timeouts"],
               "context_tokens": context.get(q["query_id"], (None, None))[0],
               "context_budget_tokens": context.get(q["query_id"], (None, None))[1]}
        for st in STAGES:
            d = per_stage[q["query_id"]].get(st, {})
            row[f"{st}_tokens"] = d.get("input_tokens", 0) + d.get("output_tokens", 0)
            row[f"{st}_cost_usd"] = None if d.get("unpriced") else usd_json(d.get("cost_nano", 0))
            row[f"{st}_shadow_cost_usd"] = usd_json(d.get("shadow_nano", 0))
        rows.append(row)
    # unpriced queries are left out of per-query statistics (and counted), never averaged in as $0
    costs = [q["cost_nano_usd"] for q in qs if q["cost_nano_usd"] is not None]
    shadows = [q["shadow_cost_nano_usd"] for q in qs if q["shadow_cost_nano_usd"] is not None]
    total = sum(q["priced_cost_nano_usd"] for q in qs)
    totals = {
        "prices": prices,
        "queries": len(qs),
        "priced_queries": len(costs),
        "unpriced_queries": len(qs) - len(costs),
        "cost_usd": usd_json(total),
        "cost_is_lower_bound": unpriced > 0,
        "shadow_cost_usd": usd_json(sum(shadows)),
        "cost_per_query_p50_usd": _usd(percentile(costs, 50)),
        "cost_per_query_p95_usd": _usd(percentile(costs, 95)),
        "cost_per_1k_queries_usd": _usd(1000 * sum(costs) / len(costs)) if costs else None,
        "shadow_cost_per_query_p50_usd": _usd(percentile(shadows, 50)),
        "shadow_cost_per_query_p95_usd": _usd(percentile(shadows, 95)),
        "retry_timeout_waste_usd": usd_json(waste),
        "retry_timeout_waste_pct": round(100 * waste / total, 2) if total else 0.0,
        "retries": retries, "timeouts": timeouts, "unpriced_rows": unpriced, "estimated_rows": estimated,
        "output_at_risk_tokens": at_risk,
        "embedding_cache_hit_rate": round(hits / (hits + misses), 4) if hits + misses else None,
        "context_tokens_mean": round(sum(t for t, _ in context.values()) / len(context), 1) if context else None,
        "context_budget_tokens": sorted({b for _, b in context.values() if b is not None}),
        "stages": {st: {"input_tokens": v["input_tokens"], "output_tokens": v["output_tokens"],
                        "cost_usd": usd_json(v["cost_nano"]), "shadow_cost_usd": usd_json(v["shadow_nano"]),
                        "unpriced_rows": v["unpriced"], "rows": v["rows"]} for st, v in stage_tot.items()},
    }
    return Report(rows, totals)


def _new_sums() -> dict:
    return {"input_tokens": 0, "output_tokens": 0, "cost_nano": 0, "shadow_nano": 0, "unpriced": 0, "rows": 0}


def _add(sums: dict, row: dict) -> None:
    sums["input_tokens"] += row["input_tokens"]
    sums["output_tokens"] += row["output_tokens"]
    sums["cost_nano"] += row["cost_nano_usd"] or 0
    sums["shadow_nano"] += row["shadow_cost_nano_usd"] or 0
    sums["unpriced"] += row["price_source"] == "unpriced"
    sums["rows"] += 1


def _usd(nano: float | None) -> float | None:
    return None if nano is None else usd_json(round(nano))


# -- at volume: totals from the rollups, percentiles from indexes, rows a page at a time ---------------
from tracing.rollups import ROLLUP_SUMS, _ROLLUP_SUMS, number, sums as _sums  # noqa: E402

BY_DIMS = {"user": ("user", "value"), "key": ("key", "value"), "model": ("model", "value"),
           "stage": ("stage", "value"), "variant": ("all", "variant"), "day": ("all", "day")}


def build_report(conn: sqlite3.Connection, last: int | None = None, variant: str | None = None,
                 prices: str = "original", rows: int | None = None) -> Report:
    """Totals and per-query rows. `last`: only the N most recent queries (totals too). `rows`: how many
    per-query rows to return at most (None: every selected one; exports use `iter_query_rows`).
    `prices`: "original" (as recorded) or "repriced" (the latest `rag reprice`; computed the slow way)."""
    if prices != "original" or not _has_rollups(conn):
        rep = build_report_full(conn, last=last, variant=variant, prices=prices)
        return rep if rows is None else Report(rep.queries[:rows], rep.totals)
    totals = report_totals(conn, last=last, variant=variant)
    n = last if rows is None else rows if last is None else min(last, rows)
    queries = [] if n == 0 else list(iter_query_rows(conn, variant=variant, last=n))
    return Report(queries, totals)


def _has_rollups(conn) -> bool:
    from tracing.ledger_audit import _has  # one catalog lookup to port per backend

    return _has(conn, "query_totals")  # False: a ledger before m007 (read-only, migrations pending)


def _selection(variant: str | None, last: int | None) -> tuple[str, list]:
    """The selected queries as a FROM source (alias t) and its parameters."""
    where, args = "kind = 'query'", []
    if variant:
        where += " AND variant = ?"
        args.append(variant)
    if last is None:
        return f"(SELECT * FROM query_totals WHERE {where}) t", args
    return (f"(SELECT * FROM query_totals WHERE {where} ORDER BY started_at DESC, query_id DESC LIMIT ?) t",
            [*args, int(last)])


def percentile_sql(conn, source: str, args: list, column: str, n: int, p: float) -> float | None:
    """`percentile()` of a column's non-NULL values (n of them), reading the two values at rank
    (n-1)*p/100 with an index walk."""
    if n <= 0:
        return None
    pos = (n - 1) * p / 100
    lo = int(pos)
    pair = values_at(conn, f"FROM {source} WHERE t.{column} IS NOT NULL", args, f"t.{column}", n, lo)
    if pair is None:
        return None
    return pair[0] + (pair[1] - pair[0]) * (pos - lo)


def percentile_nulls_as_zero(conn, from_where: str, args: list, column: str, n: int, nulls: int,
                             p: float) -> float | None:
    """`percentile()` of n values of which `nulls` are NULL and count as 0 (they sort first); the
    non-NULL ranks come from one index walk. `from_where` ends in a WHERE clause (ANDed onto)."""
    if not n:
        return None
    pos = (n - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    vals = [0.0 if lo < nulls else None, 0.0 if hi < nulls else None]
    if vals[1] is None:  # at least one rank among the non-NULL values
        first = max(lo - nulls, 0)
        pair = values_at(conn, f"{from_where} AND {column} IS NOT NULL", args, column, n - nulls, first)
        vals = [pair[0] if vals[0] is None else vals[0], pair[1] if hi - nulls > first else pair[0]]
    return vals[0] + (vals[1] - vals[0]) * (pos - lo)


def values_at(conn, from_where: str, args: list, column: str, n: int, lo: int) -> tuple | None:
    """The values at sorted ranks lo and lo+1 (lo again when lo is the last) of the n rows that
    `from_where` selects. An OFFSET walks every entry it skips, so the walk starts from the nearer
    end of the index: p95 of a million rows skips 50k entries instead of 950k (on PostgreSQL the
    ascending walk made `rag experiment compare` take over a second)."""
    hi = min(lo + 1, n - 1)
    if lo < n - 1 - hi:
        xs = [r[0] for r in conn.execute(f"SELECT {column} {from_where} ORDER BY {column} LIMIT 2 OFFSET ?",
                                         [*args, lo])]
        return None if not xs else (xs[0], xs[1] if hi > lo and len(xs) > 1 else xs[0])
    xs = [r[0] for r in conn.execute(f"SELECT {column} {from_where} ORDER BY {column} DESC LIMIT ? OFFSET ?",
                                     [*args, hi - lo + 1, n - 1 - hi])]
    if not xs:
        return None
    return (xs[-1], xs[0])


def report_totals(conn: sqlite3.Connection, last: int | None = None, variant: str | None = None) -> dict:
    source, args = _selection(variant, last)
    if last is None:  # everything (or one variant): add up the day rollups
        where, rargs = "dim = ?", ["all"]
        if variant:
            where += " AND variant = ?"
            rargs.append(variant)
        sums = _row(conn.execute(f"SELECT {', '.join(f'SUM({c})' for c in ROLLUP_SUMS)} FROM report_rollup "
                                 f"WHERE {where}", rargs).fetchone())
        stages = {r[0]: r[1:] for r in conn.execute(
            "SELECT value, SUM(stage_rows), SUM(input_tokens), SUM(output_tokens), SUM(priced_cost_nano_usd), "
            f"SUM(shadow_cost_nano_usd), SUM(unpriced_rows) FROM report_rollup WHERE {where} "
            "GROUP BY value", ["stage", *rargs[1:]])}
        budgets = sorted(int(r[0]) for r in conn.execute(
            f"SELECT DISTINCT value FROM report_rollup WHERE {where} AND queries > 0", ["budget", *rargs[1:]]))
    else:  # the N most recent: add up their per-query totals
        sums = _row(conn.execute(f"SELECT {', '.join(expr for _, _, expr in _ROLLUP_SUMS)} FROM {source}",
                                 args).fetchone())
        cols = ", ".join(f"SUM(t.{st}_rows), SUM(t.{st}_input_tokens), SUM(t.{st}_output_tokens), "
                         f"SUM(t.{st}_cost_nano_usd), SUM(t.{st}_shadow_nano_usd), SUM(t.{st}_unpriced_rows)"
                         for st in STAGES)
        r = conn.execute(f"SELECT {cols} FROM {source}", args).fetchone()
        stages = {st: tuple(r[6 * i:6 * i + 6]) for i, st in enumerate(STAGES) if r[6 * i]}
        budgets = sorted(r[0] for r in conn.execute(
            f"SELECT DISTINCT t.context_budget_tokens FROM {source} WHERE t.context_budget_tokens IS NOT NULL", args))
    pct = lambda col, n, p: _usd(percentile_sql(conn, source, args, col, n, p))  # noqa: E731
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
        "shadow_cost_usd": usd_json(sums["shadow_cost_nano_usd"]),
        "cost_per_query_p50_usd": pct("cost_nano_usd", priced, 50),
        "cost_per_query_p95_usd": pct("cost_nano_usd", priced, 95),
        "cost_per_1k_queries_usd": _usd(1000 * sums["cost_nano_usd"] / priced) if priced else None,
        "shadow_cost_per_query_p50_usd": pct("shadow_cost_nano_usd", sums["shadow_queries"], 50),
        "shadow_cost_per_query_p95_usd": pct("shadow_cost_nano_usd", sums["shadow_queries"], 95),
        "retry_timeout_waste_usd": usd_json(waste),
        "retry_timeout_waste_pct": round(100 * waste / total, 2) if total else 0.0,
        "retries": sums["retries"], "timeouts": sums["timeouts"], "unpriced_rows": sums["unpriced_rows"],
        "estimated_rows": sums["estimated_rows"], "output_at_risk_tokens": sums["output_at_risk_tokens"],
        "embedding_cache_hit_rate": round(hits / (hits + misses), 4) if hits + misses else None,
        "context_tokens_mean": (round(sums["context_tokens"] / sums["context_queries"], 1)
                                if sums["context_queries"] else None),
        "context_budget_tokens": budgets,
        "stages": {st: _stage_json(stages.get(st)) for st in [*STAGES, *sorted(set(stages) - set(STAGES))]},
    }


def _row(r) -> dict:
    return _sums(r)


def _stage_json(v) -> dict:
    rows, tin, tout, cost, shadow, unpriced = (int(number(x)) for x in v) if v else (0,) * 6
    return {"input_tokens": tin, "output_tokens": tout, "cost_usd": usd_json(cost), "shadow_cost_usd": usd_json(shadow),
            "unpriced_rows": unpriced, "rows": rows}


def query_row(t: dict) -> dict:
    """One per-query row (from a query_totals row joined with its question), as reports print it."""
    row = {"query_id": t["query_id"], "started_at": t["started_at"], "question": t["question"],
           "variant": t["variant"], "mode": t["mode"], "status": t["status"], "latency_ms": t["latency_ms"],
           "cost_usd": usd_json(t["cost_nano_usd"]), "priced_cost_usd": usd_json(t["priced_cost_nano_usd"]),
           "shadow_cost_usd": usd_json(t["shadow_cost_nano_usd"]), "unpriced_rows": t["unpriced_rows"],
           "estimated_rows": t["estimated_rows"], "output_at_risk_tokens": t["output_at_risk_tokens"],
           "retries": t["retries"], "timeouts": t["timeouts"],
           "context_tokens": t["context_tokens"], "context_budget_tokens": t["context_budget_tokens"]}
    for st in STAGES:
        row[f"{st}_tokens"] = t[f"{st}_input_tokens"] + t[f"{st}_output_tokens"]
        row[f"{st}_cost_usd"] = None if t[f"{st}_unpriced_rows"] else usd_json(t[f"{st}_cost_nano_usd"])
        row[f"{st}_shadow_cost_usd"] = usd_json(t[f"{st}_shadow_nano_usd"])
    return row


def iter_query_rows(conn, variant: str | None = None, last: int | None = None, page: int = 1000,
                    raw: bool = False):
    """Per-query rows, newest first, `page` at a time by keyset (started_at, query_id): memory stays flat
    however many there are (and a PostgreSQL cursor never holds more than a page)."""
    where, args = "t.kind = 'query'", []
    if variant:
        where += " AND t.variant = ?"
        args.append(variant)
    left = last
    after: tuple | None = None
    while left is None or left > 0:
        size = page if left is None else min(page, left)
        cond, cargs = (where, args) if after is None else (f"{where} AND (t.started_at, t.query_id) < (?, ?)",
                                                            [*args, *after])
        cur = conn.execute(f"SELECT t.*, q.question FROM query_totals t LEFT JOIN queries q ON q.query_id = t.query_id "
                           f"WHERE {cond} ORDER BY t.started_at DESC, t.query_id DESC LIMIT ?", [*cargs, size])
        batch = [dict(r) for r in cur]
        for t in batch:
            yield t if raw else query_row(t)
        if len(batch) < size:
            return
        after = (batch[-1]["started_at"], batch[-1]["query_id"])
        if left is not None:
            left -= len(batch)


def by_report(conn, dim: str, variant: str | None = None) -> list[dict]:
    """Spend per user, API key, model, stage, variant or day, most expensive first. For `model` and
    `stage`, `queries` counts the queries that used it and the cost is that model's/stage's rows."""
    if dim not in BY_DIMS:
        raise ValueError(f"unknown dimension {dim!r}; use one of {', '.join(BY_DIMS)}")
    rdim, col = BY_DIMS[dim]
    where, args = "dim = ?", [rdim]
    if variant:
        where += " AND variant = ?"
        args.append(variant)
    out = []
    for r in conn.execute(f"SELECT {col}, {', '.join(f'SUM({c})' for c in ROLLUP_SUMS)} FROM report_rollup "
                          f"WHERE {where} GROUP BY {col}", args):
        s = _sums(r, 1)
        if not s["queries"]:
            continue
        query_level = rdim not in ("model", "stage")
        priced = s["priced_queries"] if query_level else (0 if s["unpriced_rows"] else s["queries"])
        mean_base = s["cost_nano_usd"] if query_level else s["priced_cost_nano_usd"]
        out.append({dim: r[0] or None, "queries": s["queries"],
                    "unpriced_queries": s["queries"] - priced if query_level else None,
                    "cost_usd": usd_json(s["priced_cost_nano_usd"]), "cost_is_lower_bound": s["unpriced_rows"] > 0,
                    "cost_per_1k_queries_usd": _usd(1000 * mean_base / priced) if priced else None,
                    "shadow_cost_usd": usd_json(s["shadow_cost_nano_usd"]),
                    "input_tokens": s["input_tokens"], "output_tokens": s["output_tokens"],
                    "unpriced_rows": s["unpriced_rows"], "retries": s["retries"] if query_level else None,
                    "timeouts": s["timeouts"] if query_level else None,
                    "waste_usd": usd_json(s["waste_nano_usd"]) if query_level else None})
    out.sort(key=lambda x: (-(x["cost_usd"] or 0), -x["queries"], str(x[dim])))
    if dim == "day":
        out.sort(key=lambda x: str(x["day"]), reverse=True)
    return out
