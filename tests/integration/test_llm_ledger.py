"""The generate stage against a real local HTTP server: every physical attempt is a ledger row."""
from __future__ import annotations

import sqlite3
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from rag_app.app import RagApp
from rag_app.core.errors import LLMError
from rag_app.present.presenter import answer_payload
from tracing.ledger import usage_json
from tests.conftest import make_settings, wait_until
from tests.fakes.openai_server import Drop, FakeOpenAI, Held, Reply, Slow, Status



def nano(usd: Decimal) -> int:
    return int(usd * Decimal(10**9))


def gpt4o_mini_cost(inp: int, out: int) -> int:
    return nano(calc_price(Usage(input_tokens=inp, output_tokens=out), model_ref="gpt-4o-mini").total_price)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """One ingested small corpus shared by the scenarios (BM25 leg; the dense leg is covered elsewhere)."""
    import shutil

    from tests.conftest import LAWS, SMALL_LAWS

    root = tmp_path_factory.mktemp("llm")
    corpus = root / "corpus"
    for rel in SMALL_LAWS[:1]:
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(LAWS / rel, corpus / rel)
    with RagApp(make_settings(root, retriever="bm25")) as app:
        report = app.ingest([corpus])
    assert not report.errors
    return root


def rows(app: RagApp, query_id: str) -> list[dict]:
    app.writer.flush()
    conn = sqlite3.connect(app.settings.ledger_path)
    conn.row_factory = sqlite3.Row
    out = [dict(r) for r in conn.execute(
        "SELECT * FROM stage_calls WHERE query_id = ? AND stage = 'generate' ORDER BY id", (query_id,))]
    conn.close()
    return out


def shape(rs):
    return [(r["attempt"], r["status"], r["input_tokens"], r["output_tokens"], r["cost_nano_usd"],
             r["possibly_billed"]) for r in rs]


def run(indexed, script, monkeypatch, **overrides):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake = FakeOpenAI()
    fake.script = list(script)
    with fake:
        settings = make_settings(indexed, **{"retriever": "bm25", "openai_base_url": fake.base_url,
                                             "llm_timeout_s": 1.0, "llm_max_retries": 2, "llm_retry_base_s": 0.01,
                                             **overrides})
        with RagApp(settings) as app:
            try:
                answer = app.ask("一人有限责任公司是什么？", query_id=f"q-{len(script)}-{id(script)}")
                error = None
            except LLMError as e:
                answer, error = None, e
            generate_rows = rows(app, f"q-{len(script)}-{id(script)}")
            conn = sqlite3.connect(settings.ledger_path)
            query = conn.execute("SELECT status, mode FROM queries WHERE query_id = ?",
                                 (f"q-{len(script)}-{id(script)}",)).fetchone()
            conn.close()
    return answer, error, generate_rows, query, fake


def test_success_records_usage_and_price(indexed, monkeypatch):
    answer, error, rs, query, fake = run(indexed, [Reply(prompt_tokens=321, completion_tokens=45)], monkeypatch)
    assert error is None and answer.mode == "llm"
    assert "第五十七条" in answer.text
    assert shape(rs) == [(1, "ok", 321, 45, gpt4o_mini_cost(321, 45), 0)]
    assert gpt4o_mini_cost(321, 45) == 75_150  # $0.15/M in + $0.60/M out, the published gpt-4o-mini price
    assert rs[0]["price_version"].startswith("genai-prices@")
    assert query == ("ok", "llm")
    assert len(fake.requests) == 1 and fake.requests[0]["body"]["model"] == "gpt-4o-mini"
    # the context packing the prompt was built from is on the attempt row (RAG_CONTEXT_TOKENS, default 1,000)
    assert rs[0]["context_budget_tokens"] == 1000 and 0 < rs[0]["context_tokens"] <= 1000


def test_429_is_retried_after_retry_after_ms(indexed, monkeypatch):
    script = [Status(429, headers={"retry-after-ms": "150"}), Reply(prompt_tokens=300, completion_tokens=20)]
    answer, error, rs, _, fake = run(indexed, script, monkeypatch)
    assert error is None
    assert shape(rs) == [(1, "retry", 0, 0, 0, 0), (2, "ok", 300, 20, gpt4o_mini_cost(300, 20), 0)]
    assert rs[0]["call_id"] == rs[1]["call_id"] and rs[0]["call_id"]
    assert "RateLimitError" in rs[0]["error"]
    # the second attempt waited for the server's retry-after-ms, not the 10 ms base delay
    from datetime import datetime
    gap = datetime.fromisoformat(rs[1]["started_at"]) - datetime.fromisoformat(rs[0]["ended_at"])
    assert gap.total_seconds() >= 0.14


def test_500_then_success(indexed, monkeypatch):
    _, error, rs, _, _ = run(indexed, [Status(500), Reply(prompt_tokens=310, completion_tokens=30)], monkeypatch)
    assert error is None
    assert shape(rs) == [(1, "retry", 0, 0, 0, 0), (2, "ok", 310, 30, gpt4o_mini_cost(310, 30), 0)]
    assert "500" in rs[0]["error"]


def test_timeout_is_recorded_as_possibly_billed(indexed, monkeypatch):
    _, error, rs, _, _ = run(indexed, [Slow(2.5), Reply(prompt_tokens=333, completion_tokens=11)], monkeypatch)
    assert error is None
    first, second = rs
    assert (first["attempt"], first["status"], first["possibly_billed"]) == (1, "timeout", 1)
    # the prompt's estimated tokens, priced as if billed
    assert first["input_tokens"] > 200 and first["output_tokens"] == 0
    assert first["cost_nano_usd"] == gpt4o_mini_cost(first["input_tokens"], 0)
    assert first["latency_ms"] >= 900
    assert shape([second]) == [(2, "ok", 333, 11, gpt4o_mini_cost(333, 11), 0)]


def test_dropped_connection_is_retried(indexed, monkeypatch):
    _, error, rs, _, _ = run(indexed, [Drop(), Reply(prompt_tokens=300, completion_tokens=5)], monkeypatch)
    assert error is None
    assert [(r["attempt"], r["status"]) for r in rs] == [(1, "retry"), (2, "ok")]
    assert "Connection" in rs[0]["error"]


def test_exhausted_retries_fail_the_query_with_every_attempt_recorded(indexed, monkeypatch):
    answer, error, rs, query, fake = run(indexed, [Status(500), Status(503), Status(500)], monkeypatch)
    assert answer is None and isinstance(error, LLMError) and error.attempts == 3
    assert [(r["attempt"], r["status"]) for r in rs] == [(1, "retry"), (2, "retry"), (3, "error")]
    assert query[0] == "error"
    assert len(fake.requests) == 3


def test_a_stream_reset_mid_reply_is_possibly_billed_for_the_prompt_and_what_arrived(indexed, monkeypatch):
    """0.4.0 wrote a reset stream as $0, not possibly billed: the prompt and the delivered tokens vanished."""
    reply = Reply(prompt_tokens=300, completion_tokens=20)
    _, error, rs, _, _ = run(indexed, [Reply(reset_after=3), reply], monkeypatch, llm_stream=True)
    assert error is None
    cut, ok = rs
    delivered = Reply().content[:3 * 8]  # three chunks of CHUNK_CHARS
    from rag_app.models.model_tokens import tokenizer_for
    out = tokenizer_for("gpt-4o-mini").count(delivered)
    assert (cut["attempt"], cut["status"], cut["possibly_billed"]) == (1, "retry", 1)
    assert cut["input_tokens"] > 200 and cut["output_tokens"] == out > 0
    assert cut["cost_nano_usd"] == gpt4o_mini_cost(cut["input_tokens"], out)
    assert "Connection" in cut["error"] and f"after {out} output tokens" in cut["estimate_note"]
    assert shape([ok]) == [(2, "ok", 300, 20, gpt4o_mini_cost(300, 20), 0)]


def test_a_stream_that_ends_without_a_finish_reason_is_marked_incomplete(indexed, monkeypatch):
    answer, error, rs, query, _ = run(indexed, [Reply(end_after=2)], monkeypatch, llm_stream=True)
    assert error is None and answer.incomplete
    assert answer.text == Reply().content[:2 * 8]
    assert [(r["attempt"], r["status"]) for r in rs] == [(1, "incomplete")]
    assert "without a finish reason" in rs[0]["estimate_note"] and rs[0]["cost_nano_usd"] > 0
    assert answer_payload(answer, stage_view=usage_json)["incomplete"] is True and query[0] == "ok"
    whole, _, _, _, _ = run(indexed, [Reply()], monkeypatch, llm_stream=True)
    assert not whole.incomplete and answer_payload(whole, stage_view=usage_json)["incomplete"] is False


def test_a_query_whose_every_attempt_timed_out_is_a_timeout(indexed, monkeypatch):
    answer, error, rs, query, _ = run(indexed, [Slow(2.5), Slow(2.5)], monkeypatch, llm_max_retries=1)
    assert answer is None and isinstance(error, LLMError)
    assert [r["status"] for r in rs] == ["timeout", "timeout"]
    assert query[0] == "timeout"  # 0.4.0: `error`


def test_unknown_model_is_unpriced_not_free(indexed, monkeypatch):
    _, error, rs, _, _ = run(indexed, [Reply(prompt_tokens=100, completion_tokens=10)], monkeypatch,
                             llm_model="house-llm-7b")
    assert error is None
    assert rs[0]["cost_nano_usd"] is None and rs[0]["price_source"] == "unpriced"


def test_a_broken_tracer_never_breaks_the_query(indexed, monkeypatch):
    class ExplodingPrices:
        version = "broken"

        def quote(self, *a, **k):
            raise RuntimeError("price table exploded")

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI() as fake:
        settings = make_settings(indexed, retriever="bm25", openai_base_url=fake.base_url, llm_retry_base_s=0.01)
        with RagApp(settings) as app:
            app.pricer.prices = ExplodingPrices()  # the one pricer both the chain and the tracer use
            answer = app.ask("一人有限责任公司是什么？", query_id="q-broken-prices")
            assert answer.mode == "llm" and answer.text
            assert app.pricer.faults >= 1
            # the billed attempt is still on the ledger, with the provider's usage, unpriced (never $0)
            rs = rows(app, "q-broken-prices")
            assert [(r["status"], r["input_tokens"], r["output_tokens"]) for r in rs] == [("ok", 321, 45)]
            assert rs[0]["cost_nano_usd"] is None and rs[0]["price_source"] == "unpriced"
            assert len(fake.requests) == 1
            # and the answer says the same: unpriced, not $0
            payload = answer_payload(answer, stage_view=usage_json)
            assert payload["unpriced"] is True and payload["unpriced_rows"] == 1
            # the total is unknown, as the ledger's per-query total (a client summing it must not count $0)
            assert (payload["total_cost_usd"], payload["priced_cost_usd"]) == (None, 0.0)
            assert payload["total_shadow_cost_usd"] is None


def test_an_extractive_answer_keeps_its_generate_row_when_the_price_table_fails(indexed):
    """A price lookup that raises costs the shadow figure, never the row (it used to vanish, and the
    query showed $0 with 0 unpriced rows)."""
    class ExplodingPrices:
        version = "broken"

        def quote(self, *a, **k):
            raise RuntimeError("price table exploded")

    with RagApp(make_settings(indexed, retriever="bm25")) as app:
        app.pricer.prices = ExplodingPrices()
        answer = app.ask("一人有限责任公司是什么？", query_id="q-broken-extractive")
        generate = [u for u in answer.usage if u.stage == "generate"]
        rs = rows(app, "q-broken-extractive")
    assert answer.mode == "extractive" and len(generate) == 1 and len(rs) == 1
    assert (rs[0]["status"], rs[0]["cost_nano_usd"], rs[0]["shadow_cost_nano_usd"], rs[0]["price_source"]) == \
        ("skipped", 0, None, "unpriced")  # nothing billed; what the reply would have cost is unknown, and says so
    assert rs[0]["input_tokens"] == generate[0].input_tokens > 0
    payload = answer_payload(answer, stage_view=usage_json)  # the answer says what the ledger says: $0 billed, shadow unknown
    assert (payload["total_cost_usd"], payload["total_shadow_cost_usd"]) == (0.0, None)
    assert (payload["unpriced"], payload["unpriced_rows"]) == (True, 1)


def test_the_attempt_is_on_disk_before_the_request_leaves(indexed, monkeypatch):
    """While the server holds the request, the ledger already has a `started` row for it."""
    import threading
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake = FakeOpenAI()
    answer_now = threading.Event()  # the reply waits for the test, not for a clock: a busy machine cannot overtake it
    fake.script = [Held(answer_now, then=Reply(prompt_tokens=300, completion_tokens=9))]
    with fake:
        settings = make_settings(indexed, retriever="bm25", openai_base_url=fake.base_url, llm_timeout_s=600,
                                 llm_retry_base_s=0.01)
        with RagApp(settings) as app:
            t = threading.Thread(target=app.ask, args=("一人有限责任公司是什么？",), kwargs={"query_id": "q-inflight"})
            t.start()
            try:
                wait_until(lambda: fake.requests, "the LLM request", alive=t.is_alive)
                conn = sqlite3.connect(settings.ledger_path)  # another connection: only committed rows show
                during = conn.execute("SELECT status, input_tokens, possibly_billed, cost_nano_usd, attempt_id FROM "
                                      "stage_calls WHERE query_id = 'q-inflight' AND stage = 'generate'").fetchall()
                conn.close()
            finally:
                answer_now.set()
            t.join()
            final = rows(app, "q-inflight")
    assert len(during) == 1 and during[0][0] == "started" and during[0][2] == 1
    assert during[0][1] > 100 and during[0][3] == gpt4o_mini_cost(during[0][1], 0)  # input estimate, priced
    assert shape(final) == [(1, "ok", 300, 9, gpt4o_mini_cost(300, 9), 0)]  # updated in place, one row
    assert final[0]["attempt_id"] == during[0][4]
