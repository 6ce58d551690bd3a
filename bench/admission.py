"""What a key's admission costs a request: resolving the bearer key, taking a rate-window slot, and
admitting against the key's own budget, on a SQLite ledger holding N queries of many keys (the reads
are indexed: `api_keys.secret_sha256` unique, `queries_key_started`, `rate_events_key_at`).

Prints each step's p50 / p95 in ms and its ratio to the baseline, one `SELECT 1` round trip on the same
ledger in the same run.

    PYTHONPATH=$PWD python bench/admission.py [N]
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from rag_app.access import manage
from rag_app.access.keys import KeyRing, KeySpec
from rag_app.access.rate import RateLimiter
from rag_app.service.query_service import key_budget
from rag_app.spend.budgets import BudgetGate, Limits
from tracing.pricing import FxTable
from tracing.ledger import Ledger, LedgerWriter, url_for_path


def timed(fn, n: int = 300) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def select_one(L: Ledger) -> None:
    with L.engine.connect() as db:
        db.execute(sa.text("SELECT 1"))


def fill(url: str, n: int) -> None:
    w = LedgerWriter(url, batch=500)
    t0 = datetime.now(UTC) - timedelta(hours=12)
    for i in range(n):
        at = (t0 + timedelta(seconds=i)).isoformat(timespec="milliseconds")
        qid = f"q{i}"
        w.put("queries", {"query_id": qid, "kind": "query", "question": "q", "status": "ok", "started_at": at,
                          "ended_at": at, "latency_ms": 1.0, "user_id": f"u{i % 50}", "api_key_id": f"k{i % 50}",
                          "variant": "default", "origin": "live"})
        w.put("stage_calls", {"query_id": qid, "stage": "generate", "status": "ok", "model": "gpt-4o-mini",
                              "input_tokens": 900, "output_tokens": 200, "cost_nano_usd": 255_000,
                              "price_source": "rate", "started_at": at, "latency_ms": 1.0})
        if i % 1000 == 999:
            w.flush()  # bounded buffer: keep every row (the writer spills past its buffer)
    w.close()


def main(n: int) -> None:
    root = Path(tempfile.mkdtemp())
    url = url_for_path(root / "ledger.sqlite")
    fill(url, n)
    L = Ledger.open(url)
    secret = manage.create(L, KeySpec.parse({"name": "k7", "rpm": 10**9, "budget_usd": "1000"}), "bench")
    ring = KeyRing(L.key_by_secret, L.any_keys)
    cold = KeyRing(L.key_by_secret, L.any_keys, ttl_s=0)
    p = ring.resolve(secret)
    rate = RateLimiter(lambda fn: fn(L))
    gate = BudgetGate([], Limits(FxTable()), lambda fn: fn(L), first_estimate=lambda q: 300_000)
    qids = iter(range(10**9))
    steps = {
        "baseline: SELECT 1": lambda: select_one(L),
        "resolve key (cached)": lambda: ring.resolve(secret),
        "resolve key (ledger read)": lambda: cold.resolve(secret),
        "rate window take (write)": lambda: rate.admit(p),
        "key budget admit (read+reserve)": lambda: gate.admit(f"b{next(qids)}", {"key": "k7"}, "q", key_budget(p)),
    }
    print(f"ledger: {n:,} queries of 50 keys (SQLite, {url.rsplit('/', 1)[-1]})")
    base = None
    for name, fn in steps.items():
        xs = timed(fn)
        p50, p95 = statistics.median(xs), statistics.quantiles(xs, n=20)[-1]
        base = base or p50
        print(f"{name:<34} p50 {p50:7.3f} ms  p95 {p95:7.3f} ms  x{p50 / base:6.1f}")
    L.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
