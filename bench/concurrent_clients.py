"""Under load the default stays the default (#20 item 5): `rag serve` as a real process over the whole
legal_zh corpus (default retrieval: BM25 rescored with the vectors ingest made; extractive answers, no
reranker, as bench/query_latency.py), CLIENTS concurrent clients asking QUESTIONS questions drawn at
random from qa_dev, each question asked once; then the same questions again one at a time, the
reference. Prints how many concurrent answers lost the rescore (its embedder busy past
RAG_RESCORE_WAIT_S: BM25 alone), how many retrieved exactly the passages the one-at-a-time ask did,
latency percentiles and throughput.

    python bench/concurrent_clients.py [--clients 100] [--questions 300] [--seed 0] [--data-dir DIR]

`--data-dir` reuses an ingest (and its embedding pass, ~3 minutes of CPU) across runs; a question asked
before in that dir is not cold, so pick another `--seed` there.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, machine_line  # noqa: E402
from tests.fakes.serve_proc import Serve, serve_env  # noqa: E402
from tracing.ledger import percentile  # noqa: E402


def env(data_dir: Path) -> dict:
    # the default retriever and levers; the reference pass asks the same questions again: no answer cache
    return serve_env(data_dir, None, RAG_RETRIEVER="hybrid", RAG_LLM_MODE="extractive", RAG_ANSWER_CACHE_SIZE="0")


def ingest(data_dir: Path) -> None:
    import subprocess

    cmd = [sys.executable, "-m", "rag_app.cli.main", "ingest", str(CORPUS_ZH)]
    subprocess.run(cmd, env=env(data_dir), check=True, cwd=Path(__file__).resolve().parents[1])


def outcome(body: dict) -> dict:
    retrieve = next((s for s in body["stages"] if s["stage"] == "retrieve"), None)
    assert retrieve is not None, f"no retrieve row: {json.dumps(body, ensure_ascii=False)[:500]}"
    return {"passages": [(p["doc"], p["text"][:80]) for p in body["passages"]],
            "rescored": "rescore" in (retrieve.get("model") or ""), "skipped": retrieve.get("error")}


async def ask_all(url: str, questions: list[str], clients: int) -> tuple[dict, list[float], float]:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for q in questions:
        queue.put_nowait(q)
    results: dict[str, dict] = {}
    latencies: list[float] = []

    async def client(http: httpx.AsyncClient) -> None:
        while not queue.empty():
            q = queue.get_nowait()
            t0 = time.perf_counter()
            r = await http.post(f"{url}/v1/ask", json={"question": q})
            latencies.append(1000 * (time.perf_counter() - t0))
            r.raise_for_status()
            results[q] = outcome(r.json())

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        return results, latencies, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, help="reuse this data dir's ingest (default: a fresh one)")
    args = ap.parse_args()
    print(machine_line())
    rows = [json.loads(line) for line in QA_ZH.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = list(dict.fromkeys(r["question"] for r in random.Random(args.seed).sample(rows, args.questions)))
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp)
        if args.data_dir is None:
            ingest(data_dir)
        with Serve(env(data_dir), Path(tmp) / "serve.log") as srv:
            httpx.post(f"{srv.url}/v1/ask", json={"question": "公司法第五十七条"}, timeout=600).raise_for_status()
            many, lat_many, wall_many = asyncio.run(ask_all(srv.url, questions, args.clients))
            one, lat_one, wall_one = asyncio.run(ask_all(srv.url, questions, 1))
    n = len(questions)
    same = sum(many[q]["passages"] == one[q]["passages"] for q in questions)
    print(f"{n} questions drawn at random (seed {args.seed}) from {QA_ZH.name}, each asked once by one of "
          f"{args.clients} concurrent clients, then again one at a time (the reference)")
    print(f"{'pass':<13}{'rescored':>9}{'skipped':>8}{'same passages':>14}{'p50 ms':>9}{'p95 ms':>9}{'q/s':>7}")
    for name, res, lat, wall in (("concurrent", many, lat_many, wall_many), ("one at a time", one, lat_one, wall_one)):
        rescored = sum(r["rescored"] for r in res.values())
        skipped = sum(bool(r["skipped"]) for r in res.values())
        print(f"{name:<13}{rescored:>9}{skipped:>8}{(same if res is many else n):>14}{percentile(lat, 50):>9.0f}"
              f"{percentile(lat, 95):>9.0f}{n / wall:>7.1f}")
    skips = sorted({r["skipped"] for r in many.values() if r["skipped"]})
    if skips:
        print("why skipped:", "; ".join(skips)[:300])


if __name__ == "__main__":
    main()
