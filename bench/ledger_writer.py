"""Rows per second the ledger writer sustains on each backend, measured in the same process:
SQLite (the default file) and PostgreSQL (RAG_LEDGER_URL), with one writer and with several writer
processes at once (the replicas of a scaled-out service). Prints ratios against SQLite's single writer.

    .venv/bin/python bench/ledger_writer.py [--rows 20000] [--procs 4] [--pg-url postgresql://...]

Without --pg-url it starts a throwaway PostgreSQL cluster from Debian's binaries with fsync on (a
production server's durability); SQLite runs as the ledger always does (WAL, synchronous=NORMAL).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracing.db import url_for_path  # noqa: E402
from tracing.ledger import LedgerWriter, connect  # noqa: E402


def stage_row(worker: int, i: int) -> dict:
    """A generate row as the tracer writes it (every column a real row carries)."""
    return {"query_id": f"w{worker}-q{i // 4}", "stage": ("embed_query", "retrieve", "rerank", "generate")[i % 4],
            "call_id": f"w{worker}-c{i}", "attempt": 1, "status": "ok", "model": "gpt-4o-mini", "provider": "openai",
            "input_tokens": 1200 + i % 97, "output_tokens": 80 + i % 13, "cached_tokens": 0, "cache_write_tokens": 0,
            "reasoning_tokens": 0, "cost_nano_usd": 228_000 + i % 1000, "shadow_cost_nano_usd": None,
            "price_version": "genai-prices@0.2.3+bundled:2026-11-30", "price_source": "genai-prices",
            "possibly_billed": 0, "latency_ms": 812.5, "usage_source": "provider",
            "usage_raw": '{"prompt_tokens": 1200, "completion_tokens": 80}', "variant": "default",
            "experiment": None, "started_at": "2026-11-30T10:00:00.000+00:00",
            "ended_at": "2026-11-30T10:00:00.812+00:00", "attempt_id": f"w{worker}-a{i}",
            "context_tokens": 900, "context_budget_tokens": 1000}


def write(url: str, worker: int, rows: int) -> float:
    """Seconds from the first put() to every row committed."""
    w = LedgerWriter(url, max_buffer=rows + 10)
    t0 = time.perf_counter()
    for i in range(rows):
        w.put("stage_calls", stage_row(worker, i))
    assert w.flush(600), w.health()
    dt = time.perf_counter() - t0
    h = w.health()
    w.close()
    assert h["quarantined_rows"] == 0 and h["lost_rows"] == 0, h
    return dt


def _proc(args) -> float:
    return write(*args)


def measure(url: str, procs: int, rows: int) -> float:
    """Rows/s of `procs` writer processes together (each writes `rows`)."""
    connect(url).close()  # migrations outside the timing
    if procs == 1:
        return rows / write(url, 0, rows)
    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    with ctx.Pool(procs) as pool:
        pool.map(_proc, [(url, k, rows) for k in range(procs)])
    return procs * rows / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000, help="rows per writer")
    ap.add_argument("--procs", type=int, default=4, help="writer processes for the concurrent case")
    ap.add_argument("--pg-url", help="an empty PostgreSQL database (else a throwaway cluster is started)")
    args = ap.parse_args()
    cluster = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.pg_url:
            pg_urls = [args.pg_url, args.pg_url]
        else:
            from tests.fakes.pg_cluster import PgCluster, binaries_missing

            if binaries_missing():
                sys.exit(binaries_missing())
            cluster = PgCluster(durable=True).start()
            pg_urls = [cluster.new_database(), cluster.new_database()]
        try:
            results = {
                ("sqlite", 1): measure(url_for_path(Path(tmp) / "one.sqlite"), 1, args.rows),
                ("postgresql", 1): measure(pg_urls[0], 1, args.rows),
                ("sqlite", args.procs): measure(url_for_path(Path(tmp) / "many.sqlite"), args.procs, args.rows),
                ("postgresql", args.procs): measure(pg_urls[1], args.procs, args.rows),
            }
        finally:
            if cluster is not None:
                cluster.destroy()
    base = results[("sqlite", 1)]
    print(f"ledger writer, {args.rows:,} stage rows per writer (batches of 200, one transaction each)")
    print(f"{'backend':<12}{'writers':>8}{'rows/s':>12}{'vs sqlite x1':>14}")
    for (backend, procs), rps in results.items():
        print(f"{backend:<12}{procs:>8}{rps:>12,.0f}{rps / base:>13.2f}x")


if __name__ == "__main__":
    main()
