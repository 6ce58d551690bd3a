"""Rows per second the ledger writer commits, with its report totals folded in, against plain driver
`executemany` of the same rows in transactions of the same size (no totals: the floor any writer pays),
on each backend, in the same process. Then several writer processes at once (replicas).

    .venv/bin/python bench/ledger_writer.py [--queries 3000] [--batch 1000] [--procs 2] [--pg-url URL]

Rows are what the tracer writes for one answered query: 4 stage rows with every column filled and
the query row. Without --pg-url a throwaway PostgreSQL cluster is started with fsync on (a production
server's durability); SQLite runs as the ledger always does (WAL, synchronous=NORMAL). Each arm gets a
fresh, migrated ledger: nothing is shared between arms but the code.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracing.ledger import Ledger, LedgerWriter, url_for_path  # noqa: E402

STAGES = ("embed_query", "retrieve", "rerank", "generate")


def query_rows(tag: str, n_queries: int) -> list[tuple[str, dict]]:
    rows: list[tuple[str, dict]] = []
    for q in range(n_queries):
        qid = f"{tag}-q{q}"
        for k, stage in enumerate(STAGES):
            i = 4 * q + k
            rows.append(("stage_calls", {
                "query_id": qid, "stage": stage, "call_id": f"{tag}-c{i}", "attempt": 1, "status": "ok",
                "model": "gpt-4o-mini" if stage == "generate" else "bge-m3", "provider": "openai",
                "input_tokens": 1200 + i % 97, "output_tokens": 80 + i % 13 if stage == "generate" else 0,
                "cached_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0,
                "cost_nano_usd": 228_000 + i % 1000, "shadow_cost_nano_usd": None,
                "price_version": "genai-prices@0.2.3+bundled:2026-11-30", "price_source": "genai-prices",
                "possibly_billed": 0, "latency_ms": 812.5, "usage_source": "provider",
                "usage_raw": '{"prompt_tokens": 1200, "completion_tokens": 80}', "variant": "default",
                "experiment": None, "started_at": "2026-11-30T10:00:00.000+00:00",
                "ended_at": "2026-11-30T10:00:00.812+00:00", "attempt_id": f"{tag}-a{i}" if stage == "generate" else None,
                "context_tokens": 900, "context_budget_tokens": 1000}))
        rows.append(("queries", {
            "query_id": qid, "kind": "query", "question": "一人有限责任公司是什么？", "variant": "default",
            "experiment": None, "mode": "llm", "status": "ok", "error": None,
            "started_at": "2026-11-30T10:00:00.000+00:00", "ended_at": "2026-11-30T10:00:01.000+00:00",
            "latency_ms": 1000.0, "user_id": f"u{q % 50}", "session_id": None, "arm": None, "sticky": None,
            "shadow_of": None, "origin": "live", "api_key_id": None}))
    return rows


def writer_seconds(url: str, rows: list[tuple[str, dict]], batch: int) -> float:
    """From the first put() to every row committed with its totals."""
    w = LedgerWriter(url, max_buffer=len(rows) + 10, batch=batch)
    t0 = time.perf_counter()
    for table, row in rows:
        w.put(table, row)
    assert w.flush(600), w.health()
    dt = time.perf_counter() - t0
    h = w.health()
    w.close()
    assert h["quarantined_rows"] == 0 and h["lost_rows"] == 0, h
    return dt


def raw_seconds(url: str, rows: list[tuple[str, dict]], batch: int) -> float:
    """The driver's own executemany, one INSERT per table per batch, one transaction per batch."""
    with Ledger.open(url) as ledger:  # migrated outside the timing
        dialect = ledger.target.dialect
    if dialect == "sqlite":
        import sqlite3
        conn = sqlite3.connect(Ledger.open(url).target.path, isolation_level=None)
        mark = "?"
    else:
        import psycopg
        conn = psycopg.connect(url, autocommit=True)
        mark = "%s"
    t0 = time.perf_counter()
    for start in range(0, len(rows), batch):
        by_table: dict[str, list[dict]] = {}
        for table, row in rows[start:start + batch]:
            by_table.setdefault(table, []).append(row)
        conn.execute("BEGIN")
        for table, table_rows in by_table.items():
            cols = list(table_rows[0])
            sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))})"
            conn.cursor().executemany(sql, [tuple(r[c] for c in cols) for r in table_rows])
        conn.execute("COMMIT")
    dt = time.perf_counter() - t0
    conn.close()
    return dt


def _proc(args) -> float:
    url, k, n_queries, batch = args
    return writer_seconds(url, query_rows(f"p{k}", n_queries), batch)


def replicas_rate(url: str, procs: int, n_queries: int, batch: int) -> float:
    Ledger.open(url).close()
    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    with ctx.Pool(procs) as pool:
        pool.map(_proc, [(url, k, n_queries, batch) for k in range(procs)])
    return procs * n_queries * 5 / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=3000, help="queries per arm (5 rows each)")
    ap.add_argument("--batch", type=int, default=1000, help="rows per transaction (the writer's default)")
    ap.add_argument("--procs", type=int, default=2, help="writer processes for the replicas case (0: skip)")
    ap.add_argument("--pg-url", help="a PostgreSQL server's admin URL (else a throwaway cluster is started)")
    args = ap.parse_args()
    from tests.fakes.pg_cluster import PgCluster, binaries_missing

    cluster = PgCluster(args.pg_url, durable=True)
    if not args.pg_url and binaries_missing():
        sys.exit(binaries_missing())
    cluster.start()
    results = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = {"sqlite": lambda name: url_for_path(Path(tmp) / f"{name}.sqlite"),
                     "postgresql": lambda name: cluster.new_database()}
            for engine, new in fresh.items():
                rows = query_rows("x", args.queries)
                raw = len(rows) / raw_seconds(new("raw"), rows, args.batch)
                wrote = len(rows) / writer_seconds(new("writer"), rows, args.batch)
                many = replicas_rate(new("many"), args.procs, args.queries, args.batch) if args.procs else None
                results.append((engine, raw, wrote, many))
    finally:
        cluster.destroy()
    print(f"ledger writer: {args.queries:,} queries = {args.queries * 5:,} rows per arm, {args.batch} rows "
          "per transaction")
    print(f"{'engine':<11}{'raw rows/s':>12}{'writer rows/s':>15}{'writer/raw':>12}{f'x{args.procs} procs':>13}")
    for engine, raw, wrote, many in results:
        print(f"{engine:<11}{raw:>12,.0f}{wrote:>15,.0f}{wrote / raw:>12.2f}"
              f"{(f'{many:,.0f}' if many else '-'):>13}")


if __name__ == "__main__":
    main()
