"""Answer cache on repeated qa_dev questions (#23 item 2): `rag serve` in-process (uvicorn on a socket),
the local fake LLM (instant: a miss's latency here is the pipeline's own, a lower bound of a real one),
BM25 over 公司法. ASKS questions drawn from DISTINCT qa_dev questions with Zipf weights (the same
question asked by many people), in random order; prints the hit rate, hit vs miss latency (median,
and their ratio: the machine is shared) and $ saved as the ledger reports it.

    PYTHONPATH=$PWD python bench/answer_cache.py [DISTINCT] [ASKS]
"""
from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from rag_app.app import RagApp
from tests.conftest import LAWS, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.test_service import Server

QA = Path(__file__).resolve().parents[2] / "shared/data/legal_zh/qa_dev.jsonl"


def main(distinct: int = 100, asks: int = 400, seed: int = 7) -> None:
    rng = random.Random(seed)
    questions = [json.loads(line)["question"] for line in QA.read_text(encoding="utf-8").splitlines() if line.strip()]
    pool = rng.sample(questions, distinct)
    traffic = rng.choices(pool, weights=[1 / (r + 1) for r in range(distinct)], k=asks)
    root = Path(tempfile.mkdtemp(prefix="cache-bench-"))
    with RagApp(make_settings(root, retriever="bm25")) as app:
        assert not app.ingest([LAWS / "民法商法/公司法(2018-10-26).md"]).errors
    lat = {True: [], False: []}
    with FakeOpenAI() as llm:
        settings = make_settings(root, retriever="bm25", openai_base_url=llm.base_url)
        with Server(settings) as url, httpx.Client(timeout=60) as http:
            for i, q in enumerate(traffic):
                t0 = time.perf_counter()
                body = http.post(f"{url}/v1/ask", json={"question": q, "user_id": f"u{i % 13}"}).json()
                lat[body["cache_hit"]].append(1000 * (time.perf_counter() - t0))
            base = []  # the HTTP round trip alone: a route that reads nothing
            for _ in range(100):
                t0 = time.perf_counter()
                http.get(f"{url}/v1/experiments")
                base.append(1000 * (time.perf_counter() - t0))
            time.sleep(1)
            summary = http.get(f"{url}/v1/reports/summary").json()
    hits, misses = len(lat[True]), len(lat[False])
    p50h, p50m = statistics.median(lat[True]), statistics.median(lat[False])
    print(f"asks={asks} distinct_in_pool={distinct} distinct_asked={len(set(traffic))} hits={hits} misses={misses} "
          f"hit_rate={hits / asks:.3f} (ledger: {summary['answer_cache_hit_rate']})")
    print(f"latency p50 ms: hit={p50h:.1f} miss={p50m:.1f} ratio miss/hit={p50m / p50h:.1f}x; "
          f"GET /v1/experiments (round trip alone) p50={statistics.median(base):.1f}")
    print(f"billed=${summary['cost_usd']:.6f} saved=${summary['saved_cost_usd']:.6f} "
          f"(saved share {summary['saved_cost_usd'] / (summary['cost_usd'] + summary['saved_cost_usd']):.1%})")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
