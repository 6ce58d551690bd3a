"""Re-pricing history and finding unpriced models, over the ledger.

`reprice` recomputes the dollars of stored rows from their stored tokens, each by the price in
force when the call was made (the row's `started_at`: its dated price, its peak rule, its exchange
rate), under today's price table, and *appends* a row to `repricings` for every row whose figure
changed, with the reason ("new price version ..." or "new rule ..."). A row whose figure did not
change gets nothing: re-pricing twice, or at another hour, changes nothing. The original cost,
price version and source on `stage_calls` are never touched, so a report can show either
(`rag report --prices repriced`). Only rows priced from a model price table are re-priced;
embedding / rerank rows carry a per-1k rate from settings (`price_source = 'rate'`) and local rows
have no price.
"""
from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

from tracing.price_rules import as_utc
from tracing.pricing import PriceTable, Quote
from rag_app.llm_usage import explicit_cache_of

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
    reasons: Counter = field(default_factory=Counter, compare=False)  # "new price version" / "new rule" / ...

    @property
    def unchanged(self) -> int:
        return self.rows - self.changed


def _current(conn: sqlite3.Connection, where: str, args: list) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT s.id, s.model, s.input_tokens, s.output_tokens, s.cached_tokens, s.cache_write_tokens, s.provider, "
        "s.status, s.started_at, s.usage_raw, c.cost_nano_usd, c.shadow_cost_nano_usd, c.price_source, "
        f"c.price_version FROM stage_calls s JOIN stage_calls_repriced c ON c.id = s.id WHERE {where} ORDER BY s.id",
        args).fetchall()


def _append(conn, stage_call_id: int, cost, shadow, q: Quote, now: str, reason: str) -> None:
    conn.execute("INSERT INTO repricings (stage_call_id, cost_nano_usd, shadow_cost_nano_usd, price_version, "
                 "price_source, repriced_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (stage_call_id, cost, shadow, q.version, q.source, now, reason))


def change_reason(before: int | None, old_version: str | None, q: Quote) -> str:
    """Why a row's figure changed: the price table changed (new price version), or the same table
    now prices the call differently, e.g. by its own start time rather than the hour it was priced
    (new rule). The dated price and rule that produced the new figure follow."""
    basis = q.basis or q.source
    if q.cost_nano is None:
        return f"unpriced now: {q.warning or basis}"
    if before is None:
        return f"priced now: {basis}"
    if old_version != q.version:
        return f"new price version ({old_version} -> {q.version}): {basis}"
    return f"new rule: {basis}"


def _readable(started_at) -> str | None:
    try:
        as_utc(started_at)
        return started_at
    except (TypeError, ValueError):
        return None


def _explicit(usage_raw: str | None) -> bool | None:
    try:
        return explicit_cache_of(json.loads(usage_raw)) if usage_raw else None
    except (TypeError, ValueError):
        return None


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
    reasons: Counter = Counter()
    with conn:
        for r in rows:
            if _readable(r["started_at"]) is None:
                reasons["skipped: unreadable started_at"] += 1  # no call time: no price in force to find
                continue
            q = prices.quote(r["model"], r["input_tokens"], r["output_tokens"], r["cached_tokens"],
                             provider=r["provider"], cache_write_tokens=r["cache_write_tokens"] or 0,
                             at=r["started_at"], explicit_cache=_explicit(r["usage_raw"]))
            # a shadow row (extractive answer: nothing billed) keeps cost 0 and re-prices its shadow
            is_shadow = r["shadow_cost_nano_usd"] is not None or (r["status"] == "skipped" and r["cost_nano_usd"] == 0)
            cost, shadow = (r["cost_nano_usd"], q.cost_nano) if is_shadow else (q.cost_nano, None)
            before = r["shadow_cost_nano_usd"] if is_shadow else r["cost_nano_usd"]
            unpriced_before += r["price_source"] == "unpriced"
            unpriced_after += q.source == "unpriced"
            old += before or 0
            new += q.cost_nano or 0
            if before == q.cost_nano:
                continue  # its price did not change: nothing to record, whatever the table's version
            changed += 1
            reason = change_reason(before, r["price_version"], q)
            reasons[reason.split(":", 1)[0].split(" (", 1)[0]] += 1
            _append(conn, r["id"], cost, shadow, q, now, reason)
    return RepriceResult(len(rows), changed, old, new, unpriced_before, unpriced_after, prices.version, reasons)


def repriced_rows(conn: sqlite3.Connection, query_ids: list[str] | None = None) -> int:
    """How many stage rows (of these queries, or of the whole ledger) have a re-priced figure:
    readers (experiment compare, the dashboard) use the re-priced view when this is > 0."""
    if not query_ids:
        return conn.execute("SELECT COUNT(DISTINCT stage_call_id) FROM repricings").fetchone()[0]
    marks = ",".join("?" * len(query_ids))
    return conn.execute("SELECT COUNT(DISTINCT r.stage_call_id) FROM repricings r JOIN stage_calls s "
                        f"ON s.id = r.stage_call_id WHERE s.query_id IN ({marks})", query_ids).fetchone()[0]


def unpriced_models(conn: sqlite3.Connection, prices: PriceTable) -> list[dict]:
    """Models in the ledger that today's table cannot price (at each model's latest call), with how
    many rows and tokens they have."""
    out = []
    for model, provider, rows, tokens, last in conn.execute(
            "SELECT model, provider, COUNT(*), SUM(input_tokens + output_tokens), MAX(started_at) FROM stage_calls "
            f"WHERE model IS NOT NULL AND price_source IN ({','.join('?' * len(TABLE_PRICED))}) "
            "GROUP BY model, provider ORDER BY model", TABLE_PRICED):
        q = prices.quote(model, 1000, 100, provider=provider, at=_readable(last))
        if q.source == "unpriced":
            recorded = conn.execute("SELECT COUNT(*) FROM stage_calls WHERE model = ? AND price_source = 'unpriced'",
                                    (model,)).fetchone()[0]
            out.append({"model": model, "provider": provider, "rows": rows, "unpriced_rows": recorded,
                        "tokens": tokens or 0, "last_seen": last, "why": q.warning})
    return out
