"""What OpenTelemetry export adds to a query: whole-query p50/p95 with export off, on (a local OTLP/HTTP
receiver that answers) and on against a collector that never answers, as ratios to "off" measured in
the same process, arms interleaved query by query so machine load hits all three alike; plus the time
spent in the exporter's `on_row` on the query's thread (the only export work a query pays for).
Extractive answers over the three laws in tests/fixtures (BM25), so no LLM and no shared data needed.

    .venv/bin/python bench/otel_overhead.py [--n 200]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine_line  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from tests.conftest import LAWS, SMALL_LAWS  # noqa: E402
from tests.fakes.otlp_receiver import OtlpReceiver  # noqa: E402
from tracing.ledger import percentile  # noqa: E402

QUESTIONS = ["一人有限责任公司是什么？", "劳动合同可以约定试用期吗？", "仲裁收费标准是怎样的？", "公司股东有哪些权利？"]


def timed_on_row(app: RagApp, spent: list[float]) -> None:
    inner = app.otel.on_row

    def on_row(table, row):
        t0 = time.perf_counter()
        inner(table, row)
        spent[-1] += time.perf_counter() - t0

    app.tracer.row_observers[:] = [on_row]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp, OtlpReceiver() as ok, OtlpReceiver(hang_s=600) as hung:
        corpus = Path(tmp) / "corpus"
        for rel in SMALL_LAWS:
            (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(LAWS / rel, corpus / rel)
        base = dict(_env_file=None, llm_mode="extractive", retriever="bm25", rerank_model=None,
                    retrieval_levers="none")  # the export's overhead, not rescore's embedding time
        with RagApp(Settings(data_dir=Path(tmp) / "d", **base)) as app:
            app.ingest([corpus])
        arms = {"off": None, "on (receiver answers)": ok.url, "on (collector hangs)": hung.url}
        apps, secs, hook = {}, {name: [] for name in arms}, {name: [0.0] for name in arms}  # [0]: warm-up
        for i, (name, url) in enumerate(arms.items()):
            # one data dir per arm (an embedded store has one owner per process): same index, copied
            d = Path(tmp) / f"arm{i}"
            shutil.copytree(Path(tmp) / "d", d)
            apps[name] = RagApp(Settings(data_dir=d, otel_endpoint=url, otel_timeout_s=2.0, **base))
            if url:
                timed_on_row(apps[name], hook[name])
            apps[name].ask(QUESTIONS[0])  # warm-up
        for k in range(args.n):
            for name, app in apps.items():
                hook[name].append(0.0)
                t0 = time.perf_counter()
                app.ask(QUESTIONS[k % len(QUESTIONS)])
                secs[name].append(time.perf_counter() - t0)
        health = {name: app.otel.health() for name, app in apps.items() if app.otel}
        for app in apps.values():
            if app.otel:
                app.otel.close(timeout_s=1.0)
            app.close()
    off50 = percentile(sorted(secs["off"]), 50)
    print(f"{args.n} extractive queries per arm, interleaved\n")
    print(f"{'arm':24} {'p50 ms':>8} {'p95 ms':>8} {'p50 vs off':>10} {'on_row us/query p50':>20}")
    for name in arms:
        s = sorted(secs[name])
        h = sorted(hook[name][1:]) if arms[name] else []
        p50, p95 = percentile(s, 50), percentile(s, 95)
        us = f"{percentile(h, 50) * 1e6:.0f}" if h else "-"
        print(f"{name:24} {p50 * 1e3:8.2f} {p95 * 1e3:8.2f} {p50 / off50:9.2f}x {us:>20}")
    for name, h in health.items():
        print(f"{name}: exported {h['exported_spans']}, failed {h['failed_spans']}, dropped {h['dropped_spans']}, "
              f"queued {h['queued_spans']} (limit {h['queue_limit']})")


if __name__ == "__main__":
    main()
