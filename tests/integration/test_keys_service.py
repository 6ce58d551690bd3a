"""Keys and teams at the front door (rag_app/access/): `rag serve` with RAG_API_TOKEN as the bootstrap
admin, issued keys over real sockets and the local fake LLM. Identity comes from the key, a member sees
only its own queries, rate limits answer 429 with Retry-After and write no row, a key reads only its
collections and documents, revoked and expired keys are refused, and every change is an audit row."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from rag_app.app import RagApp
from tests.conftest import HANG_S, LAWS, make_settings, wait_until
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.test_service import Server
from tracing.ledger import Ledger

BOOT = "boot-s3cret"
COMPANY, LABOUR = "公司法(2018-10-26).md", "劳动法(2018-12-29).md"
QUESTIONS = iter(f"公司的股东会有哪些职权？第{i}问" for i in range(10_000))  # new each time: no cache hit


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    with RagApp(make_settings(root)) as app:
        assert not app.ingest([LAWS / "民法商法" / COMPANY, LAWS / "社会法" / LABOUR]).errors
    return root


@pytest.fixture(scope="module")
def service(indexed):
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, api_token=BOOT)
        with Server(settings) as url:
            yield url, settings


def admin(url, method, path, **kw):
    return httpx.request(method, f"{url}{path}", headers={"Authorization": f"Bearer {BOOT}"}, timeout=HANG_S, **kw)


def issue(url, name, **spec):
    r = admin(url, "POST", "/v1/keys", json={"name": name, **spec})
    assert r.status_code == 201, r.text
    return r.json()["key"]


def ask(url, key, question=None, **body):
    return httpx.post(f"{url}/v1/ask", json={"question": question or next(QUESTIONS), **body},
                      headers={"Authorization": f"Bearer {key}"}, timeout=HANG_S)


def row(settings, query_id):
    wait_until(lambda: admin_query(settings, query_id) is not None, "the query's row")
    return admin_query(settings, query_id)


def admin_query(settings, query_id):
    with Ledger.open(settings.ledger) as L:
        return L.query(query_id)


def test_identity_comes_from_the_key_not_the_body(service):
    url, settings = service
    alice = issue(url, "alice", user="alice@firm")
    r = ask(url, alice)
    assert r.status_code == 200, r.text
    q = row(settings, r.json()["query_id"])
    assert (q["user_id"], q["api_key_id"]) == ("alice@firm", "alice")
    r = ask(url, alice, user_id="bob@firm")  # a member cannot write another user's id
    assert r.status_code == 403 and "alice@firm" in r.json()["detail"]
    assert ask(url, alice, user_id="alice@firm").status_code == 200  # its own is fine
    r = admin(url, "POST", "/v1/ask", json={"question": next(QUESTIONS), "user_id": "carol"})  # an admin acts for
    q = row(settings, r.json()["query_id"])
    assert q["user_id"] == "carol" and q["api_key_id"] not in (None, "carol")  # ... and its key is recorded


def test_a_member_sees_only_its_own_queries(service):
    url, settings = service
    dan, erin = issue(url, "dan"), issue(url, "erin")
    mine = ask(url, dan).json()["query_id"]
    theirs = ask(url, erin).json()["query_id"]
    row(settings, theirs)
    listed = httpx.get(f"{url}/v1/queries?limit=500", headers={"Authorization": f"Bearer {dan}"}, timeout=HANG_S)
    ids = {q["query_id"] for q in listed.json()["queries"]}
    assert mine in ids and theirs not in ids and listed.json()["total"] == len(ids)
    other = httpx.get(f"{url}/v1/queries/{theirs}", headers={"Authorization": f"Bearer {dan}"}, timeout=HANG_S)
    assert other.status_code == 404  # the same answer as a query that does not exist
    assert admin(url, "GET", f"/v1/queries/{theirs}").status_code == 200
    for path in ("/v1/reports/summary", "/v1/experiments", "/v1/keys", "/v1/review"):
        r = httpx.get(f"{url}{path}", headers={"Authorization": f"Bearer {dan}"}, timeout=HANG_S)
        assert r.status_code == 403 and r.json()["type"] == "forbidden", path
    by = httpx.get(f"{url}/v1/reports/by?dim=user", headers={"Authorization": f"Bearer {dan}"}, timeout=HANG_S)
    assert [r["user"] for r in by.json()["rows"]] == ["dan"]


def test_revoked_rotated_and_expired_keys_are_refused(service):
    url, _ = service
    frank = issue(url, "frank")
    assert ask(url, frank).status_code == 200
    assert admin(url, "DELETE", "/v1/keys/frank").status_code == 200
    wait_until(lambda: ask(url, frank).status_code == 401, "the revoked key refused (within the 2 s cache)")
    assert "revoked" in ask(url, frank).json()["detail"]
    gina = issue(url, "gina")
    new = admin(url, "POST", "/v1/keys/gina/rotate").json()["key"]
    assert ask(url, new).status_code == 200
    wait_until(lambda: ask(url, gina).status_code == 401, "the old secret refused")
    past = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    old = issue(url, "henry", expires=past)
    r = ask(url, old)
    assert r.status_code == 401 and "expired" in r.json()["detail"] and r.headers["www-authenticate"] == "Bearer"
    assert ask(url, "rag_not-a-key").status_code == 401


def test_keys_are_listed_without_secrets_and_every_change_is_audited(service):
    url, _ = service
    secret = issue(url, "ivy", role="member", rpm=5, budget_usd="2.5", period="week")
    listed = admin(url, "GET", "/v1/keys").json()["keys"]
    ivy = next(k for k in listed if k["name"] == "ivy")
    assert ivy["prefix"] == secret[:8] and ivy["rpm"] == 5 and ivy["budget_usd"] == 2.5 and ivy["state"] == "active"
    assert secret not in str(listed) and "secret_sha256" not in ivy
    assert admin(url, "POST", "/v1/keys", json={"name": "ivy"}).status_code == 409  # names are never reused
    assert admin(url, "POST", "/v1/keys", json={"name": "x", "role": "owner"}).status_code == 422
    r = httpx.post(f"{url}/v1/keys", json={"name": "j"}, headers={"Authorization": f"Bearer {secret}"}, timeout=HANG_S)
    assert r.status_code == 403  # a member manages no keys
    admin(url, "DELETE", "/v1/keys/ivy")
    events = admin(url, "GET", "/v1/keys/audit").json()["events"]
    mine = [(e["action"], e["target"]) for e in events if e["target"] == "ivy"]
    assert mine == [("revoke", "ivy"), ("create", "ivy")]
    assert all(e["actor"] and secret not in (e["detail"] or "") for e in events)


def test_a_rate_limit_answers_429_with_retry_after_and_writes_no_row(service):
    url, settings = service
    while datetime.now(UTC).second >= 50:  # both requests inside one minute window
        time.sleep(1)
    kate = issue(url, "kate", rpm=1)
    assert ask(url, kate).status_code == 200
    with Ledger.open(settings.ledger) as L:
        before = L.list_queries(user="kate")[0]
    r = ask(url, kate)
    assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
    body = r.json()
    assert body["type"] == "rate_limited" and body["limit"] == "rpm" and body["limit_value"] == 1
    time.sleep(0.5)
    with Ledger.open(settings.ledger) as L:
        assert L.list_queries(user="kate")[0] == before  # the refused request never began: no row


def test_tokens_per_minute_count_what_queries_used(service):
    url, _ = service
    while datetime.now(UTC).second >= 50:
        time.sleep(1)
    leo = issue(url, "leo", tpm=1)  # the first query is admitted (0 tokens so far), its tokens fill the minute
    assert ask(url, leo).status_code == 200
    r = ask(url, leo)
    assert r.status_code == 429 and r.json()["limit"] == "tpm" and r.json()["used"] > 1


def test_a_key_reads_only_its_collections_and_documents(service):
    url, settings = service
    mia = issue(url, "mia", documents=[LABOUR])
    r = ask(url, mia, question="公司的股东会有哪些职权？")
    assert r.status_code == 200, r.text
    sources = {p["doc"] for p in r.json()["passages"]} | {c["doc"] for c in r.json()["citations"]}
    assert sources and all(LABOUR in s for s in sources), sources  # never a company-law passage
    r = ask(url, mia, scope={"docs": [COMPANY]})
    assert r.status_code == 403 and COMPANY in r.json()["detail"]
    ned = issue(url, "ned", collections=["other_team"])
    r = ask(url, ned, collection=settings.collection)
    assert r.status_code == 403 and "other_team" in r.json()["detail"]
    assert ask(url, ned).status_code == 404  # its own collection holds nothing yet: said, not answered empty


def test_a_model_list_and_ingest_rights_are_enforced(service):
    url, settings = service
    olive = issue(url, "olive", models=["some-other-model"])
    r = ask(url, olive)
    assert r.status_code == 403 and "some-other-model" in r.json()["detail"]
    paul = issue(url, "paul", models=[settings.llm_model])
    assert ask(url, paul).status_code == 200
    up = httpx.post(f"{url}/v1/ingest", files={"files": ("x.md", "第一条 测试。".encode())},
                    headers={"Authorization": f"Bearer {paul}"}, timeout=HANG_S)
    assert up.status_code == 403 and "--ingest" in up.json()["detail"]


def test_a_keys_own_budget_binds_it(service):
    url, _ = service
    quinn = issue(url, "quinn", budget_usd="0.0000001", period="day")
    r = ask(url, quinn)
    assert r.status_code == 429 and r.json()["budget"] == "key=quinn day", r.text


@pytest.mark.parametrize("name", ["../etc", "a/b", ".hidden", "x y", "\u202ex"])
def test_a_bad_collection_name_is_a_422_naming_the_field(service, name):
    url, _ = service
    r = admin(url, "POST", "/v1/ask", json={"question": "公司是什么？", "collection": name})
    assert r.status_code == 422 and "collection" in str(r.json()["detail"]), r.text


def test_each_team_reads_and_writes_its_own_collection(service):
    url, settings = service
    law = (LAWS / "行政法规" / "仲裁委员会仲裁收费办法(1995-07-28).md").read_bytes()
    up = admin(url, "POST", "/v1/ingest", files={"files": ("仲裁收费.md", law)}, data={"collection": "team_b"})
    assert up.status_code == 200 and up.json()["files"][0]["status"] == "written", up.text
    rita = issue(url, "rita", collections=["team_b"], can_ingest=True)
    r = ask(url, rita, question="仲裁收费标准是什么？")  # no collection named: its first
    assert r.status_code == 200, r.text
    assert {p["doc"] for p in r.json()["passages"]} == {"uploads@team_b/仲裁收费.md"}
    other = ask(url, issue(url, "sam"), question="仲裁收费标准是什么？")  # the default collection's key
    assert other.status_code == 200 and not any("仲裁收费" in p["doc"] for p in other.json()["passages"])
    refused = httpx.post(f"{url}/v1/ingest", files={"files": ("x.md", "第一条 测试。".encode())},
                         headers={"Authorization": f"Bearer {rita}"}, timeout=HANG_S)  # default: not its collection
    assert refused.status_code == 403 and "team_b" in refused.json()["detail"]
    assert (settings.data_dir / "uploads@team_b" / "仲裁收费.md").exists()
