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
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine_line  # noqa: E402
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
    return writer_cost(url, rows, batch)[0]


def writer_cost(url: str, rows: list[tuple[str, dict]], batch: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) from the first put() to every row committed with its totals. CPU: the
    writer thread's and the putting thread's, which a busy machine's waits for a core do not inflate."""
    w = LedgerWriter(url, max_buffer=len(rows) + 10, batch=batch)
    assert w.flush(600), w.health()  # started up (migrated, statements prepared) before the clock starts
    clock = time.pthread_getcpuclockid(w._thread.ident)  # type: ignore[arg-type]
    t0, c0, m0 = time.perf_counter(), time.clock_gettime(clock), time.thread_time()
    for table, row in rows:
        w.put(table, row)
    assert w.flush(600), w.health()
    dt, cpu = time.perf_counter() - t0, time.clock_gettime(clock) - c0 + time.thread_time() - m0
    h = w.health()
    w.close()
    assert h["quarantined_rows"] == 0 and h["lost_rows"] == 0, h
    return dt, cpu


def raw_seconds(url: str, rows: list[tuple[str, dict]], batch: int) -> float:
    return raw_cost(url, rows, batch)[0]


def raw_cost(url: str, rows: list[tuple[str, dict]], batch: int) -> tuple[float, float]:
    """The driver's own executemany, one INSERT per table per batch, one transaction per batch:
    (wall seconds, CPU seconds of this thread)."""
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
    t0, c0 = time.perf_counter(), time.thread_time()
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
    dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
    conn.close()
    return dt, cpu


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
    ap.add_argument("--rounds", type=int, default=3, help="raw and writer arms run alternately this often")
    ap.add_argument("--engines", default="sqlite,postgresql")
    args = ap.parse_args()
    print(machine_line())
    from tests.fakes.pg_cluster import PgCluster, binaries_missing

    engines = args.engines.split(",")
    cluster = PgCluster(args.pg_url, durable=True)
    if "postgresql" in engines:
        if not args.pg_url and binaries_missing():
            sys.exit(binaries_missing())
        cluster.start()
    results = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = {"sqlite": lambda name: url_for_path(Path(tmp) / f"{name}.sqlite"),
                     "postgresql": lambda name: cluster.new_database()}
            for engine in engines:
                new = fresh[engine]
                rows = query_rows("x", args.queries)
                arms = [(raw_cost(new(f"raw{k}"), rows, args.batch), writer_cost(new(f"writer{k}"), rows, args.batch))
                        for k in range(args.rounds)]
                many = replicas_rate(new("many"), args.procs, args.queries, args.batch) if args.procs else None
                results.append((engine, len(rows), arms, many))
    finally:
        if "postgresql" in engines:
            cluster.destroy()
    print(f"ledger writer: {args.queries:,} queries = {args.queries * 5:,} rows per arm, {args.batch} rows "
          f"per transaction, median of {args.rounds} alternating rounds")
    print(f"{'engine':<11}{'raw rows/s':>11}{'writer rows/s':>14}{'writer/raw':>11}{'CPU ratio':>10}"
          f"{f'x{args.procs} procs':>12}")
    for engine, n, arms, many in results:
        raw, wrote = median(n / r[0] for r, _ in arms), median(n / w[0] for _, w in arms)
        wall_ratio = median(r[0] / w[0] for r, w in arms)
        # PostgreSQL's work is in the server's processes: the client's CPU says nothing about it
        cpu_ratio = f"{median(r[1] / w[1] for r, w in arms):.2f}" if engine == "sqlite" else "-"
        print(f"{engine:<11}{raw:>11,.0f}{wrote:>14,.0f}{wall_ratio:>11.2f}{cpu_ratio:>10}"
              f"{(f'{many:,.0f}' if many else '-'):>12}")


if __name__ == "__main__":
    main()
