"""Fuzz the request models and query parameters over a real socket: no input reaches a 500.

Bounded (max_examples per endpoint). The server has an index (one small law, default settings and
levers), so fuzzed questions run through every stage; the fixed cases below are inputs that once gave a 500.
"""
from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_app.app import RagApp
from tests.conftest import HANG_S, LAWS, make_settings
from tests.integration.test_service import Server

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
text = st.text(max_size=300)  # lone surrogates included: JSON escapes them as \udxxx
param_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=100)
numberish = st.one_of(st.integers(min_value=-2**80, max_value=2**80).map(str), param_text,
                      st.floats(allow_nan=True).map(str))
json_value = st.recursive(st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
                          | st.floats() | text, lambda kids: st.lists(kids, max_size=3)
                          | st.dictionaries(text, kids, max_size=3), max_leaves=8)


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    with RagApp(make_settings(root)) as app:  # 9 chunks: rescore embeds each once, then answers from its cache
        assert not app.ingest([LAWS / "行政法规/仲裁委员会仲裁收费办法(1995-07-28).md"]).errors
    with Server(make_settings(root, api_token="tok")) as u:
        yield u


def test_a_real_question_reaches_every_stage(url):
    r = httpx.post(f"{url}/v1/ask", json={"question": "申请仲裁应当交纳哪些费用？"}, headers=AUTH, timeout=HANG_S)
    assert r.status_code == 200, r.text
    assert [s["stage"] for s in r.json()["stages"]] == ["embed_query", "retrieve", "rerank", "generate"]


@pytest.mark.parametrize("params", [{"since": "0001-01-01T00:00:00+01:00"}, {"until": "9999-12-31T23:59:59-01:00"}])
def test_timestamps_outside_the_utc_range_are_a_422(url, params):
    r = httpx.get(f"{url}/v1/queries", params=params, headers=AUTH)
    assert r.status_code == 422 and "UTC" in r.text


AUTH = {"Authorization": "Bearer tok"}


def no_5xx(r: httpx.Response) -> None:
    assert r.status_code < 500, (r.request.method, str(r.request.url)[:300], r.status_code, r.text[:500])


@FUZZ
@given(body=st.one_of(
    st.fixed_dictionaries({"question": text}, optional={"user_id": json_value, "session_id": json_value,
                                                        "scope": st.one_of(json_value, st.fixed_dictionaries(
                                                            {}, optional={"docs": json_value, "laws": json_value}))}),
    json_value))
def test_ask_bodies(url, body):
    payload = json.dumps(body, allow_nan=True).encode()
    no_5xx(httpx.post(f"{url}/v1/ask", content=payload, headers={**AUTH, "Content-Type": "application/json"},
                      timeout=HANG_S))


@FUZZ
@given(params=st.fixed_dictionaries({}, optional={
    "limit": numberish, "offset": numberish, "since": param_text, "until": param_text, "variant": param_text,
    "status": param_text, "experiment": param_text}))
def test_query_list_params(url, params):
    no_5xx(httpx.get(f"{url}/v1/queries", params=params, headers=AUTH))


@FUZZ
@given(last=numberish, variant=param_text, ident=param_text)
def test_reports_and_lookups(url, last, variant, ident):
    for path in ("/v1/reports/summary", "/v1/reports/queries"):
        no_5xx(httpx.get(f"{url}{path}", params={"last": last, "variant": variant}, headers=AUTH))
    for path in (f"/v1/queries/{quote(ident, safe='')}", f"/v1/experiments/{quote(ident, safe='')}"):
        no_5xx(httpx.get(f"{url}{path}", headers=AUTH))


@settings(FUZZ, max_examples=20)
@given(token=st.binary(max_size=40), query_token=param_text)
def test_tokens(url, token, query_token):
    header = b"Bearer x" + bytes(c for c in token if c >= 0x20 and c != 0x7F).rstrip()  # what HTTP can carry
    for path in ("/v1/queries", "/dashboard", "/openapi.json"):
        no_5xx(httpx.get(f"{url}{path}", headers={"Authorization": header}))
        no_5xx(httpx.get(f"{url}{path}", params={"token": query_token}))


@settings(FUZZ, max_examples=20)
@given(names=st.lists(st.text(max_size=300).filter(lambda s: "\x00" not in s), min_size=1, max_size=3),
       data=st.binary(max_size=200))
def test_upload_names(url, names, data):
    files = [("files", (n.encode("utf-8", "replace").decode("utf-8"), data, "text/plain")) for n in names]
    r = httpx.post(f"{url}/v1/ingest", files=files, headers=AUTH, timeout=HANG_S)
    no_5xx(r)
    if r.status_code == 200:
        assert len(r.json()["files"]) == len(names)  # every file answered, the batch never lost


part = st.one_of(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "bogus"])},
                                       optional={"text": json_value}), json_value)


@FUZZ
@given(body=st.one_of(
    st.fixed_dictionaries({"model": st.one_of(st.just("legal-rag"), json_value),
                           "messages": st.lists(st.fixed_dictionaries(
                               {"role": st.one_of(st.just("user"), json_value)},
                               optional={"content": st.one_of(text, st.lists(part, max_size=3), json_value)}),
                               max_size=3)},
                          optional={"user": json_value, "scope": json_value, "stream": json_value}),
    json_value))
def test_chat_bodies(url, body):
    payload = json.dumps(body, allow_nan=True).encode()
    r = httpx.post(f"{url}/v1/chat/completions", content=payload,
                   headers={**AUTH, "Content-Type": "application/json"}, timeout=HANG_S)
    no_5xx(r)
    if 400 <= r.status_code < 500:
        assert r.headers["content-type"].startswith("application/json") and r.json()["detail"]


def chat(url, content, **kw):
    body = {"model": "legal-rag", "messages": [{"role": "user", "content": content}], **kw}
    return httpx.post(f"{url}/v1/chat/completions", content=json.dumps(body).encode(),
                      headers={**AUTH, "Content-Type": "application/json"}, timeout=HANG_S)


def ask_raw(url, **body):
    return httpx.post(f"{url}/v1/ask", content=json.dumps(body).encode(),
                      headers={**AUTH, "Content-Type": "application/json"}, timeout=HANG_S)


@pytest.mark.parametrize("bad", ["仲裁\ud800费用", "仲裁\x00费用", "\udcff"], ids=["surrogate", "NUL", "argv byte"])
def test_text_no_database_can_store_is_a_422_at_every_front_door(url, bad):
    """One rule at the edge (rag_app/text/edge_text.py): the question, the user, a text part, a scope name."""
    cases = {
        "question": ask_raw(url, question=bad),
        "user_id": ask_raw(url, question="申请仲裁应当交纳哪些费用？", user_id=bad),
        "question (stream)": ask_raw(url, question=bad, stream=True),
        "docs": ask_raw(url, question="申请仲裁应当交纳哪些费用？", scope={"docs": [bad]}),
        "content": chat(url, bad),
        "text": chat(url, [{"type": "text", "text": bad}]),
        "user": chat(url, "申请仲裁应当交纳哪些费用？", user=bad),
    }
    for field, r in cases.items():
        assert r.status_code == 422, (field, r.status_code, r.text[:300])
        fields = [e["field"] for e in r.json()["detail"]]
        want = {"docs": "scope.docs[0]", "content": "messages[0].content", "text": "messages[0].content[0].text",
                "user": "user"}.get(field.split()[0], field.split()[0])
        assert want in fields, (field, r.json())
    # and the ledger still takes rows: a good question after them is recorded
    ok = ask_raw(url, question="申请仲裁应当交纳哪些费用？")
    assert ok.status_code == 200
    qid = ok.json()["query_id"]
    from tests.conftest import wait_until
    wait_until(lambda: httpx.get(f"{url}/v1/queries/{qid}", headers=AUTH).status_code == 200, "the row lands")


@pytest.mark.parametrize("value", [7, 1.5, ["a"], {"x": 1}, None, True], ids=repr)
def test_a_text_part_of_any_json_type_is_a_422_naming_the_field(url, value):
    r = chat(url, [{"type": "text", "text": "费用"}, {"type": "text", "text": value}])
    assert r.status_code == 422, r.text
    assert "messages[0].content[1].text" in [e["field"] for e in r.json()["detail"]], r.json()


@pytest.mark.parametrize("parts", [[7], [None], ["text"], [{"text": "no type"}], [{"type": "video", "text": "x"}]],
                         ids=repr)
def test_a_content_part_that_is_not_a_part_is_a_422(url, parts):
    r = chat(url, parts)
    assert r.status_code == 422 and any(e["field"].startswith("messages[0].content") for e in r.json()["detail"]), r.text


def test_an_image_part_beside_the_text_is_accepted_and_not_read(url):
    r = chat(url, [{"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": "申请仲裁应当交纳哪些费用？"}])
    assert r.status_code == 200, r.text
