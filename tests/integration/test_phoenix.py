"""OpenTelemetry export into a real receiver nobody here wrote: Arize Phoenix, run locally offline.
Queries go through the app against the scripted OpenAI-compatible server; the spans read back from
Phoenix's REST API must carry the ledger's tokens and costs, and Phoenix's own cost for each LLM span
(computed from the tokens with its price list) must equal the ledger's where both price the model.

Heavy (its own venv, ~40 s to start), so behind the `phoenix` marker and skipped unless
RAG_PHOENIX_BIN names Phoenix's `phoenix` executable, e.g.
    python3 -m venv /work/venvs/phoenix && /work/venvs/phoenix/bin/pip install arize-phoenix==20.26.1
    RAG_PHOENIX_BIN=/work/venvs/phoenix/bin/phoenix pytest -m phoenix tests/integration/test_phoenix.py
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from datetime import datetime, timezone

import httpx
import pytest

from rag_app.app import RagApp
from tests.conftest import HANG_S, make_settings
from tests.fakes.openai_server import USAGE_SHAPES, FakeOpenAI, Reply, Slow, Status
from tests.integration.trace_check import check_trace_equals_ledger, index_one_small_law, ledger

PHOENIX_BIN = os.environ.get("RAG_PHOENIX_BIN")  # read at import: the autouse fixture clears RAG_*
QUESTION = "一人有限责任公司是什么？"
pytestmark = [pytest.mark.phoenix,
              pytest.mark.skipif(not PHOENIX_BIN, reason="set RAG_PHOENIX_BIN to Arize Phoenix's `phoenix` executable")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false"}
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen([PHOENIX_BIN, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + HANG_S  # a hang guard that holds at load 20, not a speed check
    try:
        while True:
            assert proc.poll() is None, f"phoenix exited: {(work / 'phoenix.log').read_text()[-2000:]}"
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"phoenix did not start in {HANG_S} s"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    return index_one_small_law(tmp_path_factory.mktemp("phx-corpus"))


STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def as_received(span: dict) -> dict:
    """Phoenix's REST span -> the shape trace_check reads (its times are microseconds)."""
    def ns(iso: str) -> int:
        d = datetime.fromisoformat(iso) - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000

    return {"id": span["id"], "name": span["name"], "trace_id": span["context"]["trace_id"],
            "span_id": span["context"]["span_id"], "parent_id": span["parent_id"],
            "start_ns": ns(span["start_time"]), "end_ns": ns(span["end_time"]),
            "status_code": STATUS[span["status_code"]], "span_kind": span["span_kind"],
            # Phoenix files openinference.span.kind as the span's kind; put it back for the shared checks
            "attributes": {**span["attributes"], "openinference.span.kind": span["span_kind"]}}


def phoenix_spans(url: str, want: int, timeout_s: float = HANG_S) -> list[dict]:
    """Every span of the default project, once at least `want` arrived (Phoenix ingests asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans, cursor = [], None
        while True:
            params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
            body = httpx.get(f"{url}/v1/projects/default/spans", params=params, timeout=10).json()
            spans += body["data"]
            cursor = body.get("next_cursor")
            if not cursor:
                break
        if len(spans) >= want or time.monotonic() > deadline:
            return [as_received(s) for s in spans]
        time.sleep(0.5)


def phoenix_cost(url: str, span_id: str) -> float | None:
    """The cost Phoenix computed itself for one span, from its tokens and its own price list."""
    q = '{ node(id: "%s") { ... on Span { costSummary { total { cost } } } } }' % span_id
    body = httpx.post(f"{url}/graphql", json={"query": q}, timeout=10).json()
    summary = body["data"]["node"]["costSummary"]  # None: Phoenix recorded no cost (no tokens)
    return summary and summary["total"]["cost"]


def test_phoenix_receives_traces_equal_to_the_ledger(phoenix, indexed, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    endpoint = f"{phoenix}/v1/traces"
    scripts = {  # one query each: the ledger's shapes that matter for money
        "cache+reasoning": [Reply(usage=USAGE_SHAPES["openai"])],
        "429 then ok": [Status(429, headers={"retry-after-ms": "20"}), Reply(prompt_tokens=300, completion_tokens=20)],
        "timeout then ok": [Slow(2.5), Reply(prompt_tokens=333, completion_tokens=11)],
    }
    qids: dict[str, str] = {}
    fake = FakeOpenAI()
    with fake:
        settings = make_settings(indexed, retriever="bm25", openai_base_url=fake.base_url, llm_timeout_s=1.0,
                                 llm_retry_base_s=0.01, otel_endpoint=endpoint)
        with RagApp(settings) as app:
            for name, script in scripts.items():
                fake.script = list(script)
                qids[name] = str(uuid.uuid4())
                assert app.ask(QUESTION, query_id=qids[name]).mode == "llm"
        extractive = make_settings(indexed, retriever="bm25", llm_mode="extractive", otel_endpoint=endpoint)
        with RagApp(extractive) as app:
            qids["extractive"] = str(uuid.uuid4())
            assert app.ask(QUESTION, query_id=qids["extractive"]).mode == "extractive"
            health = app.otel.health()
    assert health["faults"] == 0

    expected = 0
    per_query = {}
    for name, qid in qids.items():
        query, rows = ledger(settings, qid)
        per_query[name] = (query, rows)
        expected += 1 + len(rows) + len({r["call_id"] for r in rows if r["attempt_id"]})
    spans = phoenix_spans(phoenix, expected)
    assert len(spans) == expected, f"Phoenix holds {len(spans)} spans, the ledger implies {expected}"

    compared = 0
    for name, (query, rows) in per_query.items():
        got = check_trace_equals_ledger(spans, query, rows, tol_ns=2000)  # Phoenix keeps microseconds
        for span, row in zip(got["attempts"], sorted((r for r in rows if r["attempt_id"]), key=lambda r: r["attempt"])):
            theirs = phoenix_cost(phoenix, span["id"])
            print(f"{name:16} attempt {row['attempt']} {row['status']:8} in={row['input_tokens']:5} "
                  f"out={row['output_tokens']:4} cached={row['cached_tokens']:5} ledger={row['cost_nano_usd']} nano$ "
                  f"phoenix={None if theirs is None else round(theirs * 1e9, 3)} nano$")
            if row["input_tokens"] or row["output_tokens"]:
                # Phoenix prices gpt-4o-mini itself (input, cache read, output, reasoning): same dollars
                assert theirs is not None and abs(theirs * 1e9 - row["cost_nano_usd"]) <= 1
                compared += 1
    assert compared == 4  # cache+reasoning, the 429's retry success, the timeout (possibly billed) and its retry
    cache = [s for s in spans if s["attributes"].get("rag.query_id") == qids["cache+reasoning"]
             and s["attributes"].get("openinference.span.kind") == "LLM"]
    assert cache[0]["attributes"]["llm.token_count.prompt_details.cache_read"] == 1024
    assert cache[0]["attributes"]["gen_ai.usage.reasoning.output_tokens"] == 128
