"""LiteLLM's proxy as a real upstream nobody here wrote: a `mock_response` model answers without any
provider, and reports its own usage and cost (`x-litellm-response-cost`). The ledger must agree.

Heavy (its own venv, ~40 s to start), so behind the `litellm` marker and skipped unless
RAG_LITELLM_BIN names the proxy's `litellm` executable, e.g.
    python3 -m venv /work/venvs/litellm && /work/venvs/litellm/bin/pip install litellm==1.105.7 ...
    RAG_LITELLM_BIN=/work/venvs/litellm/bin/litellm pytest -m litellm tests/integration/test_litellm_proxy.py
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from decimal import Decimal

import httpx
import pytest

from tests.conftest import HANG_S
from tests.integration.test_usage_shapes import MESSAGES, call

LITELLM_BIN = os.environ.get("RAG_LITELLM_BIN")
MASTER_KEY = "sk-ledger-test-0123456789abcdefghijklmnop"
REPLY = "依据《中华人民共和国公司法》第五十七条[1]，一人有限责任公司适用本节规定。"

pytestmark = [pytest.mark.litellm,
              pytest.mark.skipif(not LITELLM_BIN, reason="set RAG_LITELLM_BIN to LiteLLM's proxy executable")]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    cfg = tmp_path_factory.mktemp("litellm") / "config.yaml"
    cfg.write_text("model_list:\n  - model_name: gpt-4o-mini\n    litellm_params:\n      model: openai/gpt-4o-mini\n"
                   f"      api_key: sk-none\n      mock_response: \"{REPLY}\"\n", encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LITELLM_MASTER_KEY": MASTER_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen([LITELLM_BIN, "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HANG_S  # a hang guard that holds at load 20, not a speed check
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "LiteLLM proxy exited during start-up"
            time.sleep(1)
        else:
            pytest.fail(f"LiteLLM proxy did not start within {HANG_S} s")
        yield f"{base}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class Upstream:  # what `call` needs from a server: its base URL and the requests it saw
    def __init__(self, base_url):
        self.base_url = base_url
        self.requests = []


def proxy_says(base_url: str, stream: bool) -> tuple[dict, int]:
    """The proxy's own usage and cost for the same request (its mock answers deterministically).

    A JSON reply carries the cost LiteLLM computed (`x-litellm-response-cost`); a stream's cost header
    is sent before the stream and reads 0, so there the cost is the stream's usage chunk times the
    per-token prices the proxy itself publishes on /model/info."""
    auth = {"Authorization": f"Bearer {MASTER_KEY}"}
    body = {"model": "gpt-4o-mini", "max_tokens": 512, "temperature": 0,
            "messages": [{"role": {"human": "user"}.get(m.type, m.type), "content": m.content} for m in MESSAGES]}
    if not stream:
        r = httpx.post(f"{base_url}/chat/completions", json=body, headers=auth, timeout=30)
        r.raise_for_status()
        return r.json()["usage"], int((Decimal(r.headers["x-litellm-response-cost"]) * 10**9).to_integral_value())
    body.update(stream=True, stream_options={"include_usage": True})
    usage = None
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, headers=auth, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                usage = json.loads(line[6:]).get("usage") or usage
    info = httpx.get(base_url.removesuffix("/v1") + "/model/info", headers=auth, timeout=30).json()["data"][0]["model_info"]
    usd = (usage["prompt_tokens"] * Decimal(str(info["input_cost_per_token"]))
           + usage["completion_tokens"] * Decimal(str(info["output_cost_per_token"])))
    return usage, int((usd * 10**9).to_integral_value())


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_ledger_tokens_and_dollars_equal_what_the_proxy_reports(tmp_path, proxy, stream):
    rows, error = call(tmp_path, Upstream(proxy), "gpt-4o-mini", stream=stream, api_key=MASTER_KEY)
    assert error is None and len(rows) == 1
    usage, cost_nano = proxy_says(proxy, stream)
    row = rows[0]
    assert row["usage_source"] == "provider"
    assert (row["input_tokens"], row["output_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert row["cost_nano_usd"] == cost_nano > 0
