"""Reports at volume (#11): build a ledger of N queries (4 stage rows each) and time every reader.

    nice -n 10 python bench/ledger_volume.py [--queries 1000000] [--baseline-queries 100000]
                                             [--url URL | --start-postgres]

How the ledger is built: every migration on an empty ledger (the project's own, on either backend),
then rows bulk-loaded through tracing/ledger/bulk.py (SQLite: executemany in 50k-query transactions;
PostgreSQL: COPY; the writer's per-row path would take hours), then the totals folded from the rows a
batch per transaction (`Ledger.rebuild_totals`, timed: what a migration's back-fill now costs, without
holding the ledger), then ANALYZE (PostgreSQL: VACUUM ANALYZE, autovacuum's job). Prints:
`rag report` (table, --last 100, --by each dim, --format json with its peak RSS) as real CLI
processes with RAG_LEDGER_URL, every endpoint the dashboard calls through the real FastAPI app
(TestClient), experiment compare, the rows/s the LedgerWriter sustains with its totals folded, against
raw executemany of the same rows in the same 1000-row transactions, and ledger bytes per million queries
(SQLite: pages in use; PostgreSQL: pg_database_size and the tables' pg_total_relation_size). On a smaller
ledger (--baseline-queries) the readers run the full computation (every row through Python) for ratios.

`--url` (or RAG_LEDGER_URL): sqlite:///PATH or postgresql://... (an empty database; `--reuse` times
one built before). `--start-postgres`: a throwaway cluster (tests/fakes/pg_cluster.py, fsync on) in a
temp dir, removed at the end unless --keep; the fresh-ledger writer rate and the baseline ratios need
it (or SQLite) to create more databases.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import best_of, machine_line  # noqa: E402
from bench.ledger_writer import query_rows, raw_seconds, writer_seconds  # noqa: E402
from rag_app.config.ledger_location import as_target, parse_ledger_url  # noqa: E402
from tracing.ledger import Ledger, bulk, url_for_path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DIMS = ("user", "key", "variant", "model", "day", "stage")
MODELS = ("gpt-4o-mini", "deepseek-chat", "qwen-plus", "no-price-model")


QCOLS = ("query_id", "kind", "question", "variant", "experiment", "mode", "status", "started_at", "ended_at",
         "latency_ms", "user_id", "session_id", "arm", "sticky", "origin")
SCOLS = ("query_id", "stage", "call_id", "attempt", "status", "model", "input_tokens", "output_tokens",
         "cached_tokens", "cost_nano_usd", "shadow_cost_nano_usd", "price_version", "price_source",
         "latency_ms", "cache_hits", "cache_misses", "variant", "experiment", "started_at", "usage_source",
         "context_budget_tokens", "context_tokens")


def batches(n: int, seed: int = 0, size: int = 50_000, days: float = 100):
    """The ledger's rows, (query rows, stage rows) per `size` queries; the same on both backends."""
    rng = random.Random(seed)
    t0 = 1_764_547_200  # 2025-12-01
    step = days * 86400 / n  # spread over `days` days (100 unless asked)
    qs, ss = [], []
    for i in range(n):
        qid = f"q{i:09d}"
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0 + i * step)) + f".{i % 1000:03d}+00:00"
        u = rng.randrange(2000)
        user = f"user-{u}"
        variant = ("default", "top3", "cheap")[u % 3]  # assignment is sticky per user, as in the service
        exp = "topn" if variant in ("default", "top3") else None
        model = MODELS[0] if rng.random() < 0.6 else MODELS[1] if rng.random() < 0.6 else MODELS[2]
        if rng.random() < 0.01:
            model = MODELS[3]
        status = "error" if rng.random() < 0.005 else "ok"
        qs.append(dict(zip(QCOLS, (qid, "query", f"问题 {i}", variant, exp, "llm", status, ts, ts, rng.uniform(200, 3000),
                                   user, None, "control" if variant == "default" else "treatment", 1, "live"))))
        tin = rng.randint(800, 2500)
        unpriced = model == MODELS[3]
        gen_status = "timeout" if rng.random() < 0.01 else "retry" if rng.random() < 0.02 else "ok"
        gen_cost = None if unpriced else tin * 150 + rng.randint(20, 400) * 600
        for r in ((qid, "embed_query", None, 1, "ok", "text-embedding-3-small", 20, 0, 0, 400, 400, "v", "genai-prices",
                   5.0, rng.randint(0, 1), 1, variant, exp, ts, "local", None, None),
                  (qid, "retrieve", None, 1, "ok", None, 0, 0, 0, 0, None, None, None, 3.0, None, None, variant, exp, ts,
                   None, None, None),
                  (qid, "rerank", None, 1, "skipped", None, 0, 0, 0, 0, None, None, None, 0.0, None, None, variant, exp,
                   ts, None, None, None),
                  (qid, "generate", qid, 1, gen_status, model, tin, rng.randint(20, 400), 0, gen_cost,
                   None if unpriced else gen_cost, "v", "unpriced" if unpriced else "genai-prices", 900.0, None, None,
                   variant, exp, ts, "provider", 1000, rng.randint(600, 1000))):
            ss.append(dict(zip(SCOLS, r)))
        if len(qs) >= size:
            yield qs, ss
            qs, ss = [], []
    if qs:
        yield qs, ss


def build(target, n: int, seed: int = 0, days: float = 100) -> dict:
    """A ledger of n queries: migrations, bulk rows, then the totals folded a batch per transaction
    (timed); `target` a LedgerTarget, a URL or a SQLite path. Returns timings and sizes."""
    with Ledger.open(target) as ledger:
        t = time.perf_counter()
        for qs, ss in batches(n, seed, days=days):
            bulk.load(ledger.engine, "queries", qs)
            bulk.load(ledger.engine, "stage_calls", ss)
        insert_s = time.perf_counter() - t
        bulk.analyze(ledger.engine)
        before = bulk.size_bytes(ledger.engine)
        t = time.perf_counter()
        ledger.rebuild_totals()
        backfill_s = time.perf_counter() - t
        t = time.perf_counter()
        bulk.analyze(ledger.engine)
        analyze_s = time.perf_counter() - t
        size = bulk.size_bytes(ledger.engine)
    return {"insert_s": insert_s, "backfill_s": backfill_s, "analyze_s": analyze_s,
            "bytes_before_totals": before["database"], "bytes": size["database"], "tables": size["tables"]}


def ledger_bytes(target) -> tuple[int, str]:
    with Ledger.open_read(target) as ledger:
        b = bulk.size_bytes(ledger.engine)
    if as_target(target).dialect == "postgresql":
        return b["database"], f"pg_database_size; tables incl. indexes {b['tables'] / 2**20:,.0f} MB"
    return b["database"], "pages in use"


def cli(args: list[str], data_dir: Path, url: str) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (MB) and output bytes of one `rag` process on the ledger at `url`."""
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO), "RAG_LEDGER_URL": url,
           "RAG_EXPERIMENTS_FILE": str(data_dir / "exp.json")}
    # peak RSS by /usr/bin/time: a child's own ru_maxrss starts from this (large) process's size at fork
    timer = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.run([*timer, sys.executable, "-m", "rag_app.cli.main", *args], stdout=out, stderr=err,
                           env=env, cwd=REPO)
        wall = time.perf_counter() - t
        err.seek(0)
        errors = err.read().decode(errors="replace")
        if p.returncode:
            raise RuntimeError(f"rag {' '.join(args)} failed: {errors[-2000:]}")
        size = out.tell()
    peak_kb = int(errors.strip().splitlines()[-1]) if timer else 0
    return wall, peak_kb // 1024, size


def timed(fn) -> float:
    return best_of(fn, repeat=2)


def write_experiments(data_dir: Path) -> None:
    (data_dir / "exp.json").write_text(json.dumps({"variants": {"top3": {"top_n": 3}, "cheap": {"top_n": 2}},
                                                   "experiments": {"topn": {"control": "default", "treatment": "top3",
                                                                            "rollout_pct": 50, "seed": "b"}}}))


def endpoints(data_dir: Path, url: str) -> dict[str, float]:
    """Every endpoint the dashboard calls, through the real app (no store needed for these)."""
    from fastapi.testclient import TestClient

    from rag_app.config.settings import Settings
    from rag_app.service.app import create_app

    settings = Settings(_env_file=None, data_dir=data_dir, experiments_file=data_dir / "exp.json", ledger_url=url)
    out = {}
    with TestClient(create_app(settings), base_url="http://localhost") as c:  # the Host guard admits localhost
        qid = c.get("/v1/queries", params={"limit": 1}).json()["queries"][0]["query_id"]
        for path in ("/v1/reports/summary", "/v1/reports/queries?last=500", "/v1/queries?limit=50",
                     "/v1/queries?limit=50&variant=top3", f"/v1/queries/{qid}", "/v1/experiments",
                     "/v1/experiments/topn", *(f"/v1/reports/by?dim={d}" for d in DIMS)):
            def get(path=path):
                r = c.get(path)
                assert r.status_code == 200, (path, r.text[:300])
            out[path] = timed(get)
    return out


def old_paths(ledger) -> dict[str, callable]:
    """Every row through Python: what the reports cost without the rollups."""
    return {
        "summary": lambda: ledger.report_full().totals,
        "report --last 100": lambda: ledger.report_full(last=100),
    }


def new_paths(ledger) -> dict[str, callable]:
    return {
        "summary": lambda: ledger.report(rows=0).totals,
        "report --last 100": lambda: ledger.report(last=100),
    }


class Ledgers:
    """Where ledgers live: SQLite files in temp dirs, or databases on a PostgreSQL server (the one in
    --url, or a throwaway cluster from tests/fakes/pg_cluster.py with --start-postgres)."""

    def __init__(self, dialect: str, cluster=None):
        self.dialect, self.cluster, self.dirs = dialect, cluster, []

    def new(self, prefix: str):
        """A new, empty ledger target (None when the server gives no way to make one)."""
        d = Path(tempfile.mkdtemp(prefix=prefix))
        self.dirs.append(d)
        if self.dialect == "sqlite":
            return as_target(d / "ledger.sqlite")
        return as_target(self.cluster.new_database()) if self.cluster else None

    def cleanup(self) -> None:
        import shutil
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        if self.cluster:
            self.cluster.destroy()


def count_queries(target) -> int:
    with Ledger.open_read(target) as ledger:
        return ledger.report_totals()["queries"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=300_000)
    ap.add_argument("--baseline-queries", type=int, default=50_000, help="0: skip the old-code ratios")
    ap.add_argument("--writer-queries", type=int, default=4_000)
    ap.add_argument("--url", default=os.environ.get("RAG_LEDGER_URL"),
                    help="sqlite:///DIR/ledger.sqlite or postgresql://... (an empty database, or one built before "
                         "with --reuse)")
    ap.add_argument("--start-postgres", action="store_true",
                    help="build on a throwaway PostgreSQL cluster (Debian's initdb/pg_ctl; fsync on), removed after")
    ap.add_argument("--keep", action="store_true", help="keep the built ledger (and the --start-postgres cluster)")
    ap.add_argument("--reuse", action="store_true", help="--url names a ledger built before: time it, build nothing")
    ap.add_argument("--skip-json", action="store_true", help="skip the full JSON export (minutes at 1M queries)")
    a = ap.parse_args()
    print(machine_line())

    cluster = None
    if a.start_postgres:
        sys.path.insert(0, str(REPO / "tests"))
        from fakes.pg_cluster import PgCluster, binaries_missing
        if binaries_missing():
            sys.exit(binaries_missing())
        cluster = PgCluster(durable=True).start()
        print(f"throwaway PostgreSQL cluster in {cluster.dir} (127.0.0.1:{cluster.port}, fsync on)")
        target = as_target(cluster.new_database())
    elif a.url:
        target = parse_ledger_url(a.url, Path("unused"))
    else:
        target = as_target(Path(tempfile.mkdtemp(prefix="ledger-volume-")) / "ledger.sqlite")
    ledgers = Ledgers(target.dialect, cluster)
    try:
        run(a, target, ledgers)
    finally:
        if not a.keep:
            ledgers.cleanup()
            if not a.url and target.dialect == "sqlite":
                import shutil
                shutil.rmtree(target.path.parent, ignore_errors=True)
        elif cluster:
            print(f"kept: cluster {cluster.dir}, ledger {target.display} "
                  f"(stop: runuser -u {cluster.user} -- pg_ctl -D {cluster.dir}/data stop)")


def run(a, target, ledgers: Ledgers) -> None:
    pg = target.dialect == "postgresql"
    url = target.url if pg else f"sqlite:///{target.path}"
    data_dir = Path(tempfile.mkdtemp(prefix="ledger-volume-data-")) if pg else target.path.parent
    data_dir.mkdir(parents=True, exist_ok=True)
    if pg:
        ledgers.dirs.append(data_dir)
    write_experiments(data_dir)
    exists = (target.path.exists() if not pg else _pg_has_ledger(target))
    if exists and not a.reuse:
        sys.exit(f"{target.display} already holds a ledger; point --url at a new one, or --reuse it")
    if exists:
        a.queries = count_queries(target)
        size, how = ledger_bytes(target)
        print(f"ledger {target.display}: reusing {a.queries:,} queries ({size / 2**20:,.0f} MB, {how})")
    else:
        print(f"ledger {target.display} ({target.dialect}): building {a.queries:,} queries x 4 stage rows")
        b = build(target, a.queries)
        per_m = 1e6 / a.queries
        how = "COPY" if pg else "executemany"
        print(f"built: bulk insert ({how}) {b['insert_s']:.1f} s; totals folded in batches {b['backfill_s']:.1f} s; "
              f"{'VACUUM ' if pg else ''}ANALYZE {b['analyze_s']:.1f} s"
              + f"; {b['bytes'] / 2**20:,.0f} MB = {b['bytes'] * per_m / 2**20:,.0f} MB per million queries "
              f"({b['bytes_before_totals'] * per_m / 2**20:,.0f} MB without the totals)"
              + (f"; tables incl. indexes {b['tables'] * per_m / 2**20:,.0f} MB per million (pg_total_relation_size)"
                 if pg else ""))
    print("\n`rag report` as a process (wall s incl. ~python start; peak RSS MB; output bytes):")
    empty = ledgers.new("ledger-empty-")
    if empty is not None:
        Ledger.open(empty).close()
    empty_url = None if empty is None else (empty.url if pg else f"sqlite:///{empty.path}")
    cases = [["report"], ["report", "--last", "100"], *(["report", "--by", d] for d in DIMS),
             ["report", "--format", "csv", "--last", "1000"], *([] if a.skip_json else [["report", "--format", "json"]])]
    for args in cases:
        wall, rss, size = cli(args, data_dir, url)
        base = cli(args, data_dir, empty_url)[0] if empty_url and args[-1] in ("report", "100") else None
        print(f"  rag {' '.join(args):32s} {wall:6.2f} s  {rss:5d} MB  {size:>12,d} B"
              + (f"   (empty ledger: {base:.2f} s)" if base else ""))
    print("\ndashboard endpoints through the FastAPI app (best of 2, s):")
    for p, s in endpoints(data_dir, url).items():
        print(f"  {p:40s} {s:6.3f}")
    from rag_app.experiments.comparison import compare_live
    from rag_app.experiments.variants import Experiment
    with Ledger.open_read(target) as ledger:
        cmp_s = timed(lambda: compare_live(ledger, Experiment("topn", "default", "top3", 50, "b")))
    print(f"\nexperiment compare (in process, best of 2): {cmp_s:.3f} s")
    wall, _, _ = cli(["experiment", "compare", "topn"], data_dir, url)
    print(f"rag experiment compare topn as a process: {wall:.2f} s")
    print(f"\nLedgerWriter rows/s on {target.dialect} (a query row + 4 stage rows per query, bench/ledger_writer.py):")
    fresh = ledgers.new("ledger-writer-")
    for label, t in (("fresh ledger", fresh), (f"{a.queries:,}-query ledger", target)):
        if t is None:
            print(f"  {label:24s} skipped (no server to create a database on; use --start-postgres)")
            continue
        where = t.url if t.dialect == "postgresql" else url_for_path(t.path)
        rows = query_rows(f"w{time.time_ns()}", a.writer_queries)
        on = len(rows) / writer_seconds(where, rows, 1000)
        rows = query_rows(f"r{time.time_ns()}", a.writer_queries)  # after: its rows leave totals to fold
        raw = len(rows) / raw_seconds(where, rows, 1000)
        print(f"  {label:24s} writer with totals {on:8,.0f} rows/s; raw executemany {raw:8,.0f} rows/s "
              f"({on / raw:.2f}x)")
    if a.baseline_queries:
        base = ledgers.new("ledger-base-")
        if base is None:
            print("\nold code path vs new: skipped (no server to create a database on; use --start-postgres)")
            return
        print(f"\nevery row through Python vs the totals on {a.baseline_queries:,} queries (in process, best of 2):")
        build(base, a.baseline_queries, seed=1)
        with Ledger.open_read(base) as ledger:
            old, new = old_paths(ledger), new_paths(ledger)
            for k in old:
                to, tn = timed(old[k]), timed(new[k])
                print(f"  {k:20s} rows {to:8.3f} s   totals {tn:7.4f} s   {to / tn:8.0f}x")


def _pg_has_ledger(target) -> bool:
    with Ledger.open_read(target) as ledger:
        return "m001_initial" not in ledger.pending


if __name__ == "__main__":
    main()
