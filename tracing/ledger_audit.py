"""What a report must say about the ledger itself: rows that lost their query, LLM attempts whose
outcome is unknown, and rows the writer quarantined, spilled or lost. Works on any schema version
(tables a ledger does not have yet count as empty), so `rag report` can run on a read-only ledger
with migrations pending."""
from __future__ import annotations

import sqlite3

from tracing.db import has_table
from rag_app.money import usd_json
from tracing.rollups import number


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return has_table(conn, table)


def audit(conn: sqlite3.Connection) -> dict:
    if _has(conn, "query_totals"):  # m007: orphans are the totals rows without a query row (kind NULL)
        o = conn.execute("SELECT SUM(stage_rows), COUNT(*), SUM(priced_cost_nano_usd) FROM query_totals "
                         "WHERE kind IS NULL").fetchone()
        orphans = (number(o[0]), o[1], number(o[2]) if o[2] is not None else None)
    else:
        orphans = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT query_id), SUM(cost_nano_usd) FROM stage_calls s "
            "WHERE NOT EXISTS (SELECT 1 FROM queries q WHERE q.query_id = s.query_id)").fetchone()
    # `started` rows are attempts whose end was never written: in flight now, or cut off by a crash.
    # The provider may have billed them; they carry the price of their input estimate.
    unknown = conn.execute("SELECT COUNT(*), SUM(cost_nano_usd), SUM(input_tokens) FROM stage_calls "
                           "WHERE status IN ('started', 'unknown')").fetchone()
    out = {"orphan_stage_rows": orphans[0], "orphan_queries": orphans[1], "orphan_cost_usd": usd_json(orphans[2] or 0),
           "unknown_attempts": unknown[0], "unknown_attempts_input_tokens": unknown[2] or 0,
           "unknown_attempts_cost_usd": usd_json(unknown[1] or 0),
           "quarantined_rows": 0, "spilled_rows": 0, "replayed_rows": 0, "lost_rows": 0}
    if _has(conn, "ledger_quarantine"):
        out["quarantined_rows"] = conn.execute("SELECT COUNT(*) FROM ledger_quarantine").fetchone()[0]
    if _has(conn, "ledger_losses"):
        for kind, n in conn.execute("SELECT kind, SUM(rows) FROM ledger_losses GROUP BY kind"):
            out[f"{kind}_rows"] = n
    return out


def audit_line(a: dict) -> str:
    return (f"ledger: {a['orphan_stage_rows']} stage rows without a query row ({a['orphan_queries']} queries, "
            f"${a['orphan_cost_usd']:.6f}); {a['unknown_attempts']} LLM attempts unknown (possibly billed, "
            f"${a['unknown_attempts_cost_usd']:.6f} at input estimate); {a['quarantined_rows']} rows quarantined, "
            f"{a['spilled_rows']} spilled ({a['replayed_rows']} replayed), {a['lost_rows']} lost")
