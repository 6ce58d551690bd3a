"""The OpenAI-compatible endpoint (#23 item 3) and /v1/ask streaming (item 4), driven by the official
`openai` client and LangChain's ChatOpenAI pointed at `rag serve` (uvicorn over a real socket, the local
fake LLM behind it): same token auth, one model per variant, SSE with a final usage chunk, citations in
the message and in an extra field, every call one ledger query like /v1/ask."""
from __future__ import annotations

import json

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI

from tests.conftest import HANG_S, index_company_law, make_settings
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.test_service import Server

Q = "一人有限责任公司是什么？"  # each test adds its own suffix: a repeated question is an answer-cache hit
TOKEN = "s3cret"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("oai")
    index_company_law(root)
    exp = root / "exp.json"
    exp.write_text(json.dumps({"variants": {"a": {}, "b": {"top_n": 1}}, "experiments": {}}))
    with FakeOpenAI() as llm:
        settings = make_settings(root, openai_base_url=llm.base_url, api_token=TOKEN, experiments_file=exp)
        with Server(settings) as url:
            yield url, llm, settings


def client(url, key=TOKEN):
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def ledger_query(url, query_id):
    r = httpx.get(f"{url}/v1/queries/{query_id}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    return r.json()


def test_models_and_auth(served):
    url, _, _ = served
    assert [m.id for m in client(url).models.list()] == ["legal-rag", "a", "b", "default"]
    with pytest.raises(openai.AuthenticationError):
        client(url, "wrong").models.list()
    with pytest.raises(openai.AuthenticationError):
        client(url, "wrong").chat.completions.create(model="a", messages=[{"role": "user", "content": Q}])
    with pytest.raises(openai.NotFoundError):
        client(url).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": Q}])
    with pytest.raises(openai.BadRequestError):
        client(url).chat.completions.create(model="a", messages=[{"role": "system", "content": "hi"}])


def test_openai_client_answer_is_one_ledger_query_with_citations(served):
    url, _, _ = served
    r = client(url).chat.completions.create(model="b", messages=[{"role": "system", "content": "be brief"},
                                                                 {"role": "user", "content": Q + "（一）"}], user="alice")
    msg = r.choices[0].message
    extra = r.model_extra
    assert r.model == "b" and r.choices[0].finish_reason == "stop"
    assert extra["citations"] and "Sources:\n[1] 《" in msg.content and msg.model_extra["citations"] == extra["citations"]
    row = ledger_query(url, extra["query_id"])
    assert row["variant"] == "b" and row["cost_usd"] == pytest.approx(extra["cost_usd"])
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (row["stages"][-1]["input_tokens"],
                                                                  row["stages"][-1]["output_tokens"])
    by_user = httpx.get(f"{url}/v1/reports/by", params={"dim": "user"},
                        headers={"Authorization": f"Bearer {TOKEN}"}).json()["rows"]
    assert "alice" in [u["user"] for u in by_user]


def test_openai_client_streams_deltas_then_a_usage_chunk(served):
    url, llm, _ = served
    before = len(llm.requests)
    chunks = list(client(url).chat.completions.create(model="a", messages=[{"role": "user", "content": Q + "（二）"}],
                                                      stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    deltas = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 3  # the reply came token by token (the fake LLM sends 8-character pieces)
    assert llm.requests[before]["body"]["stream"] is True  # rag serve asked the LLM for a stream
    last, usage = chunks[-2], chunks[-1]
    assert last.choices[0].finish_reason == "stop" and last.model_extra["citations"]
    assert usage.choices == [] and usage.usage.completion_tokens > 0 and usage.usage.model_extra["cost_usd"] > 0
    assert "Sources:\n[1]" in text and len({c.id for c in chunks}) == 1
    row = ledger_query(url, last.model_extra["query_id"])
    assert row["cost_usd"] == pytest.approx(usage.usage.model_extra["cost_usd"])
    assert text.startswith(Reply().content)


def test_langchain_chat_openai_against_rag_serve(served):
    url, _, _ = served
    chat = ChatOpenAI(model="legal-rag", base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
    reply = chat.invoke(Q + "（三）")
    assert "Sources:" in reply.content and reply.usage_metadata["output_tokens"] > 0
    pieces = list(ChatOpenAI(model="a", base_url=f"{url}/v1", api_key=TOKEN, max_retries=0,
                             stream_usage=True).stream(Q + "（四）"))
    assert len([p for p in pieces if p.content]) > 3
    total = pieces[0]
    for p in pieces[1:]:
        total += p
    assert "Sources:" in total.content and total.usage_metadata["output_tokens"] > 0


def test_ask_streams_tokens_then_the_answer_with_its_cost(served):
    url, _, _ = served
    events = []
    with httpx.stream("POST", f"{url}/v1/ask", json={"question": Q + "（五）", "stream": True},
                      headers={"Authorization": f"Bearer {TOKEN}"}, timeout=HANG_S) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        kind = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                events.append((kind, json.loads(line[6:])))
    kinds = [k for k, _ in events]
    assert kinds[-1] == "answer" and kinds.count("token") > 3 and set(kinds) == {"token", "answer"}
    answer = events[-1][1]
    assert "".join(d["text"] for k, d in events if k == "token") == answer["answer"]
    assert answer["total_cost_usd"] > 0 and answer["citations"]
    assert ledger_query(url, answer["query_id"])["cost_usd"] == pytest.approx(answer["total_cost_usd"])


def test_a_streamed_cache_hit_sends_the_booked_answer_and_zero_usage(served):
    url, llm, _ = served
    ask = dict(model="a", messages=[{"role": "user", "content": Q + "（六）"}], stream=True)
    first = list(client(url).chat.completions.create(**ask))
    calls = len(llm.requests)
    again = list(client(url).chat.completions.create(**ask))
    assert len(llm.requests) == calls  # answered from the cache: no LLM call
    text = lambda chunks: "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)  # noqa: E731
    assert text(again) == text(first)
    assert again[-1].usage.total_tokens == 0 and again[-1].usage.model_extra["cost_usd"] == 0.0
    assert again[-2].model_extra["citations"] == first[-2].model_extra["citations"]
