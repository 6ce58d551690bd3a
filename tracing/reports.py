"""Reports over the ledger: per-query rows and totals, as plain data for tables, CSV and JSON.

Everything is computed from `stage_calls` / `query_costs` in integer nano-dollars and converted
to dollars only at the edge, so the CLI, the JSON export and any dashboard show the same numbers.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from tracing.money import usd_json

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


def build_report(conn: sqlite3.Connection, last: int | None = None, variant: str | None = None,
                 prices: str = "original") -> Report:
    """`prices`: "original" (the figures recorded at the time) or "repriced" (the latest `rag reprice`)."""
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
