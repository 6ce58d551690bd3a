"""A tokens-per-minute limit held by two `rag serve` replicas sharing one ledger (#46 N2): a member key
with `--tpm 1000` sends 20 questions from 10 clients at once, round robin over the replicas, to an LLM
slow enough that many are in flight together. Before #46 tokens were counted only when a query ended, so
every request was admitted (7.4x the limit); now each reserves its ceiling at admission, so the key uses
at most the limit plus one request's tokens. The replicas share a SQLite file (a PostgreSQL ledger holds
the same: tests/contract/test_keys_backends.py); prints the figures:

    python -m pytest -q -s tests/e2e/test_rate_replicas.py
"""
from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import httpx

from rag_app.access import manage
from rag_app.access.keys import KeySpec
from tests.conftest import HANG_S, make_settings
from tests.fakes.openai_server import FakeOpenAI, Reply, Slow
from tests.fakes.sql_ledger import select_rows
from tests.integration.test_service import Server
from tracing.ledger import Ledger, url_for_path

TPM, PER_QUERY = 1000, 740 + 1  # a query's LLM tokens as the fake LLM reports them (as the outside check saw)


def test_two_replicas_hold_a_token_limit_within_one_request(tmp_path, company_law_edge):
    ledger = url_for_path(tmp_path / "shared-ledger.sqlite")
    with Ledger.open(ledger) as L:
        key = manage.create(L, KeySpec.parse({"name": "burst", "tpm": TPM}), "test")
    llm = FakeOpenAI()
    llm.script = [Slow(0.5, then=Reply(prompt_tokens=700, completion_tokens=41)) for _ in range(40)]
    with llm, ExitStack() as stack:
        urls = []
        for k in range(2):
            data = tmp_path / f"replica{k}" / "data"
            shutil.copytree(company_law_edge, data / "edge")
            settings = make_settings(tmp_path / f"replica{k}", openai_base_url=llm.base_url, retriever="bm25",
                                     ledger_url=ledger, ledger_spill_dir=tmp_path / f"spill{k}")
            urls.append(stack.enter_context(Server(settings)))

        def ask(i):
            r = httpx.post(f"{urls[i % 2]}/v1/ask", json={"question": f"一人有限责任公司是什么？第{i}问"},
                           headers={"Authorization": f"Bearer {key}"}, timeout=HANG_S)
            return r.status_code, r.json()

        with ThreadPoolExecutor(10) as pool:
            results = list(pool.map(ask, range(20)))
    codes = [c for c, _ in results]
    assert set(codes) <= {200, 429}, results
    refused = [b for c, b in results if c == 429]
    assert refused and all(b["limit"] == "tpm" and b["limit_value"] == TPM for b in refused)
    [(used,)] = select_rows(ledger, "SELECT COALESCE(SUM(s.input_tokens + s.output_tokens), 0) FROM stage_calls s "
                                    "JOIN queries q ON q.query_id = s.query_id "
                                    "WHERE q.api_key_id = 'burst' AND s.stage = 'generate'")
    print(f"\n[tpm replicas] replicas=2, clients=10, asks=20, tpm={TPM}: answered={codes.count(200)}, "
          f"refused={len(refused)}, LLM tokens used={used} ({used / TPM:.2f}x the limit)")
    assert codes.count(200) * PER_QUERY == used <= TPM + PER_QUERY
