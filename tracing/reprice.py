"""Re-pricing history and finding unpriced models, over the ledger.

`reprice` recomputes the dollars of stored rows from their stored tokens under today's price table
and *appends* the result to `repricings`; the original cost, price version and source on
`stage_calls` are never touched, so a report can show either (`rag report --prices repriced`).
Only rows priced from a model price table are re-priced; embedding / rerank rows carry a per-1k
rate from settings (`price_source = 'rate'`) and local rows have no price.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone

from tracing.pricing import PriceTable

TABLE_PRICED = ("genai-prices", "bundled", "override", "unpriced")


@dataclass(frozen=True)
class RepriceResult:
    rows: int
    changed: int
    old_nano: int
    new_nano: int
    unpriced_before: int
    unpriced_after: int
    version: str


def _current(conn: sqlite3.Connection, where: str, args: list) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT s.id, s.model, s.input_tokens, s.output_tokens, s.cached_tokens, s.cache_write_tokens, s.provider, "
        "s.status, c.cost_nano_usd, c.shadow_cost_nano_usd, c.price_source, c.price_version "
        f"FROM stage_calls s JOIN stage_calls_repriced c ON c.id = s.id WHERE {where} ORDER BY s.id", args).fetchall()


def reprice(conn: sqlite3.Connection, prices: PriceTable, *, since: str | None = None,
            model: str | None = None) -> RepriceResult:
    where = [f"c.price_source IN ({','.join('?' * len(TABLE_PRICED))})", "s.model IS NOT NULL"]
    args: list = list(TABLE_PRICED)
    if since:
        where.append("s.started_at >= ?")
        args.append(since)
    if model:
        where.append("s.model = ?")
        args.append(model)
    rows = _current(conn, " AND ".join(where), args)
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    changed = old = new = unpriced_before = unpriced_after = 0
    with conn:
        for r in rows:
            q = prices.quote(r["model"], r["input_tokens"], r["output_tokens"], r["cached_tokens"],
                             provider=r["provider"], cache_write_tokens=r["cache_write_tokens"] or 0)
            # a shadow row (extractive answer: nothing billed) keeps cost 0 and re-prices its shadow
            is_shadow = r["shadow_cost_nano_usd"] is not None or (r["status"] == "skipped" and r["cost_nano_usd"] == 0)
            cost, shadow = (r["cost_nano_usd"], q.cost_nano) if is_shadow else (q.cost_nano, None)
            before = r["shadow_cost_nano_usd"] if is_shadow else r["cost_nano_usd"]
            unpriced_before += r["price_source"] == "unpriced"
            unpriced_after += q.source == "unpriced"
            old += before or 0
            new += q.cost_nano or 0
            if (before, r["price_source"], r["price_version"]) != (q.cost_nano, q.source, q.version):
                changed += 1
            conn.execute("INSERT INTO repricings (stage_call_id, cost_nano_usd, shadow_cost_nano_usd, price_version, "
                         "price_source, repriced_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (r["id"], cost, shadow, q.version, q.source, now))
    return RepriceResult(len(rows), changed, old, new, unpriced_before, unpriced_after, prices.version)


def unpriced_models(conn: sqlite3.Connection, prices: PriceTable) -> list[dict]:
    """Models in the ledger that today's table cannot price, with how many rows and tokens they have."""
    out = []
    for model, provider, rows, tokens, last in conn.execute(
            "SELECT model, provider, COUNT(*), SUM(input_tokens + output_tokens), MAX(started_at) FROM stage_calls "
            f"WHERE model IS NOT NULL AND price_source IN ({','.join('?' * len(TABLE_PRICED))}) "
            "GROUP BY model, provider ORDER BY model", TABLE_PRICED):
        if prices.quote(model, 1000, 100, provider=provider).source == "unpriced":
            recorded = conn.execute("SELECT COUNT(*) FROM stage_calls WHERE model = ? AND price_source = 'unpriced'",
                                    (model,)).fetchone()[0]
            out.append({"model": model, "provider": provider, "rows": rows, "unpriced_rows": recorded,
                        "tokens": tokens or 0, "last_seen": last})
    return out
