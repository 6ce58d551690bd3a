"""Several real `rag serve` processes writing one PostgreSQL ledger (RAG_LEDGER_URL) at once, behind
a client that spreads asks over them like a load balancer: every attempt the LLM server received is a
row, every answered query has its rows, nothing is lost; `rag report` reads all replicas' traffic.
Prints the figures:

    python -m pytest -q -s tests/e2e/test_ledger_replicas.py
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import httpx
import pytest

from tests.conftest import HANG_S, wait_until
from tests.fakes.openai_server import FakeOpenAI, Reply, Status
from tests.fakes.serve_proc import Serve, serve_env
from tests.fakes.sql_ledger import select_rows

pytestmark = pytest.mark.postgres
REPLICAS, CLIENTS, ASKS = 3, 9, 45


def test_replicas_write_one_postgres_ledger_and_lose_nothing(tmp_path, company_law_edge, postgres):
    url = postgres.new_database()
    llm = FakeOpenAI()
    # every 4th request (in arrival order, across replicas) fails with 503: each retry is a row too;
    # 10 retries make an ask that draws only failures vanishingly rare
    llm.script = [Status(503) if i % 4 == 3 else Reply(prompt_tokens=300 + i, completion_tokens=20) for i in range(400)]
    answered, failed = [], []
    with llm, ExitStack() as stack:
        servers = []
        for k in range(REPLICAS):
            data = tmp_path / f"replica{k}"
            shutil.copytree(company_law_edge, data / "edge")  # one embedded store per process; the ledger is shared
            env = serve_env(data, llm.base_url, RAG_LEDGER_URL=url, RAG_LLM_MAX_RETRIES="10",
                            RAG_LLM_RETRY_BASE_S="0.01", RAG_LEDGER_SPILL_DIR=str(tmp_path / f"spill{k}"))
            servers.append(Serve(env, tmp_path / f"serve{k}.log"))
        for srv in servers:
            stack.enter_context(srv)

        def ask(i):
            srv = servers[i % REPLICAS]  # round robin, as a load balancer would
            r = httpx.post(f"{srv.url}/v1/ask", json={"question": f"一人有限责任公司是什么？第{i}问",
                                                       "user_id": f"u{i}"}, timeout=HANG_S)
            (answered if r.status_code == 200 else failed).append((i, r.status_code, r.text[:300]))
            return r.json() if r.status_code == 200 else None

        t0 = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            bodies = [b for b in pool.map(ask, range(ASKS)) if b]
        wall = time.perf_counter() - t0
        health = [httpx.get(f"{s.url}/healthz", timeout=10).json()["ledger"] for s in servers]
        for srv in servers:
            srv.stop()  # SIGTERM: each writer flushes what it holds
        received = len(llm.requests)
    assert not failed, failed[:3]
    gen = dict(select_rows(url, "SELECT status, COUNT(*) FROM stage_calls WHERE stage = 'generate' GROUP BY status"))
    [(queries,)] = select_rows(url, "SELECT COUNT(*) FROM queries WHERE kind = 'query' AND status = 'ok' "
                                    "AND origin = 'live'")
    per_query = dict(select_rows(url, "SELECT query_id, COUNT(*) FROM stage_calls GROUP BY query_id"))
    [(losses,)] = select_rows(url, "SELECT COUNT(*) FROM ledger_losses")
    [(quarantined,)] = select_rows(url, "SELECT COUNT(*) FROM ledger_quarantine")
    attempts = sum(gen.values())
    assert attempts == received and set(gen) == {"ok", "retry"}, (gen, received)
    assert gen["ok"] == ASKS and gen["retry"] == received - ASKS
    assert queries == ASKS and all(per_query.get(b["query_id"], 0) >= 3 for b in bodies)
    assert (losses, quarantined) == (0, 0)
    assert all(h["lost_rows"] == 0 and h["quarantined_rows"] == 0 for h in health)
    assert sum(h["written_rows"] for h in health) > 0 and all(h["written_rows"] > 0 for h in health)
    # the CLI reads every replica's traffic from the one ledger
    env = serve_env(tmp_path / "reader", None, RAG_LEDGER_URL=url)
    rep = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "report", "--format", "json"], env=env,
                         capture_output=True, text=True, timeout=HANG_S)
    assert rep.returncode == 0, rep.stderr
    out = json.loads(rep.stdout)
    assert out["totals"]["queries"] == ASKS and out["totals"]["retries"] == received - ASKS
    assert out["ledger"]["lost_rows"] == 0 and out["ledger"]["unknown_attempts"] == 0
    print(f"\n[replicas] replicas={REPLICAS}, clients={CLIENTS}, asks={ASKS} answered={len(answered)} in {wall:.1f} s, "
          f"llm_requests_received={received}, attempt_rows={attempts} ({gen['retry']} retries), rows_lost=0")


def test_a_replica_killed_mid_load_leaves_a_row_for_every_request_it_sent(tmp_path, company_law_edge, postgres):
    """kill -9 of one of two replicas while LLM calls are in flight: its `started` rows are already in
    PostgreSQL (written before each request left), so every request the LLM server received has a row."""
    import threading

    from tests.fakes.openai_server import Slow

    url = postgres.new_database()
    llm = FakeOpenAI()
    llm.script = [Slow(0.8, then=Reply(prompt_tokens=300, completion_tokens=20)) for _ in range(400)]
    answered, stop = [], threading.Event()
    with llm, ExitStack() as stack:
        servers = []
        for k in range(2):
            data = tmp_path / f"replica{k}"
            shutil.copytree(company_law_edge, data / "edge")
            servers.append(Serve(serve_env(data, llm.base_url, RAG_LEDGER_URL=url,
                                           RAG_LEDGER_SPILL_DIR=str(tmp_path / f"spill{k}")), tmp_path / f"serve{k}.log"))
        for srv in servers:
            stack.enter_context(srv)

        def client(k):
            i = 0
            while not stop.is_set():
                try:
                    r = httpx.post(f"{servers[0 if k < 6 else 1].url}/v1/ask", json={"question": f"一人有限责任公司是什么？{k}-{i}"},
                                   timeout=30)
                    if r.status_code == 200:
                        answered.append(r.json()["query_id"])
                except httpx.HTTPError:
                    pass
                i += 1

        pool = ThreadPoolExecutor(8)
        for k in range(8):
            pool.submit(client, k)
        # 6 of 8 clients ask replica 0: with 6 requests unanswered, at least 4 are replica 0's, in flight
        # when it is killed (a round-robin split left all of them on the survivor in one run)
        wait_until(lambda: len(answered) >= 12 and len(llm.requests) >= len(answered) + 6,
                   "12 answers and 6 requests in flight", every_s=0.02)
        servers[0].kill9()
        time.sleep(1.5)  # the survivor keeps answering
        stop.set()
        pool.shutdown(wait=True)
        servers[1].stop()
        received = len(llm.requests)
    gen = dict(select_rows(url, "SELECT status, COUNT(*) FROM stage_calls WHERE stage = 'generate' GROUP BY status"))
    assert sum(gen.values()) >= received and set(gen) <= {"ok", "started"}, (gen, received)
    # an answer can leave the killed replica before its final row is committed: its attempt then stays
    # `started` (on disk before the request left), so every answered query still has an attempt row
    assert gen.get("started", 0) >= 1 and gen["ok"] + gen["started"] >= len(answered)
    print(f"\n[replica kill -9] answered={len(answered)}, llm_requests_received={received}, "
          f"attempt_rows={sum(gen.values())} ({gen.get('started', 0)} unknown), rows_lost=0")
