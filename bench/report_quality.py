"""Quality beside the spend at volume: `rag report --by` with its quality columns, and the quality-over-time
series (GET /v1/reports/quality), on a SQLite ledger of N queries every one of which was scored.

    nice -n 10 python bench/report_quality.py [--queries 200000] [--days 30]

The ledger is bench/ledger_volume.py's (4 stage rows a query over 100 days, totals folded), plus three
quality rows per query (groundedness, invalid_citations, retrieval_confidence) and a word of feedback on
every 20th, bulk-loaded, then ANALYZE. Prints the seconds (best of 3) of `Ledger.by(dim)` for each dim,
of the spend part alone (the rollups), and of the series over `--days` days and over all 100, with
SQLite's plan for each quality statement.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import func, select  # noqa: E402

from bench.common import best_of, machine_line  # noqa: E402
from bench.ledger_volume import build  # noqa: E402
from tracing.ledger import Ledger, bulk  # noqa: E402
from tracing.ledger import quality_groups, reports  # noqa: E402
from tracing.ledger.schema import queries, query_totals  # noqa: E402


def add_quality(ledger: Ledger, seed: int = 1) -> int:
    rng = random.Random(seed)
    with ledger.engine.connect() as db:
        ids = [r[0] for r in db.execute(select(queries.c.query_id).where(queries.c.kind == "query"))]
    rows, said = [], []
    for i, qid in enumerate(ids):
        for metric, value in (("groundedness", rng.choice((None, 0.0, 0.5, 1.0))),
                              ("invalid_citations", rng.choice((0, 0, 0, 1))), ("retrieval_confidence", rng.random())):
            rows.append({"query_id": qid, "metric": metric, "source": "local", "value": value, "detail": None,
                         "recorded_at": "2026-01-01T00:00:00+00:00"})
        if i % 20 == 0:
            said.append({"query_id": qid, "user_id": "u", "score": rng.choice((-1, 0, 1)), "comment": None,
                         "recorded_at": "2026-01-01T00:00:00+00:00"})
        if len(rows) >= 150_000:
            bulk.load(ledger.engine, "query_quality", rows)
            rows = []
    bulk.load(ledger.engine, "query_quality", rows)
    bulk.load(ledger.engine, "query_feedback", said)
    bulk.analyze(ledger.engine)
    return len(ids)


def plans(ledger: Ledger, since: str, until: str) -> None:
    """SQLite's plan for each statement `--by day` and the series send."""
    from sqlalchemy import event

    sent: list = []
    with ledger.engine.connect() as db:
        event.listen(db, "before_cursor_execute", lambda c, cur, sql, p, ctx, many: sent.append((sql, p)))
        quality_groups.by_quality(db, "day")
        quality_groups.over_time(db, since, until)
        raw = db.connection.dbapi_connection
        for sql, p in sent:
            print("  plan:", " | ".join(str(r[3]) for r in raw.execute("EXPLAIN QUERY PLAN " + sql, p)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=200_000)
    ap.add_argument("--days", type=int, default=30)
    a = ap.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.sqlite"
        t = time.perf_counter()
        build(path, a.queries)
        with Ledger.open(path) as L:
            n = add_quality(L)
            print(f"ledger of {n:,} scored queries built in {time.perf_counter() - t:.0f} s")
            with L.engine.connect() as db:
                t = query_totals
                first, last = db.execute(select(func.min(t.c.day), func.max(t.c.day)).where(t.c.kind == "query")).one()
            for dim in ("user", "key", "variant", "model", "day"):
                with L.engine.connect() as db:
                    spend = best_of(lambda: reports.by_report(db, dim))
                total = best_of(lambda: L.by(dim))
                print(f"--by {dim:8} {total:6.3f} s (spend alone {spend:.3f} s; quality and feedback {total - spend:.3f} s)")
            since = (date.fromisoformat(last) - timedelta(days=a.days - 1)).isoformat()
            for lo, hi, what in ((since, last, f"{a.days} days"), (first, last, "all 100 days")):
                s = best_of(lambda: L.quality_over_time(lo, hi))
                print(f"quality over time, {what} ({lo}..{hi}): {s:.3f} s, {len(L.quality_over_time(lo, hi))} rows")
            plans(L, since, last)


if __name__ == "__main__":
    main()
