"""Keys and teams at the front door (rag_app/access/): `rag serve` with RAG_API_TOKEN as the bootstrap
admin, issued keys over real sockets and the local fake LLM. Identity comes from the key, a member sees
only its own queries, rate limits answer 429 with Retry-After and write no row, a key reads only its
collections and documents, revoked and expired keys are refused, and every change is an audit row."""
from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import sqlalchemy as sa

from rag_app.access.keys import token_key_id
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


STATE: dict = {}  # the module's service state (its reader's engine: statement counts)


@pytest.fixture(scope="module")
def service(indexed):
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, api_token=BOOT)
        server = Server(settings)
        STATE["svc"] = server.server.config.app.state.svc
        with server as url:
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
    url, settings = service
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
    r = admin(url, "POST", "/v1/keys", json={"name": "henry", "expires": past})
    assert r.status_code == 422 and "past" in r.json()["detail"]  # never born expired
    old = issue(url, "henry", expires=(datetime.now(UTC) + timedelta(days=1)).date().isoformat())
    with Ledger.open(settings.ledger) as L:  # ... it expires while in use
        L.change_key("henry", {"expires_at": f"{past}T00:00:00+00:00"}, {"at": past, "actor": "test",
                                                                         "action": "expire", "target": "henry"})
    wait_until(lambda: ask(url, old).status_code == 401, "the expired key refused")
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

    def kates() -> int:  # her queries in the totals, which the writer folds in after the row lands
        with Ledger.open(settings.ledger) as L:
            return L.list_queries(user="kate")[0]

    wait_until(lambda: kates() == 1, "the admitted query in the totals")
    r = ask(url, kate)
    assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
    body = r.json()
    assert body["type"] == "rate_limited" and body["limit"] == "rpm" and body["limit_value"] == 1
    time.sleep(0.5)
    assert kates() == 1  # the refused request never began: no row


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


# -- #46: the attacks an outside check replayed, each kept closed -------------------------------------------
PLANTED = "第十九条 劳动合同期限三个月以上不满一年的，试用期不得超过九十九个月。".encode()
PLANTED_NAME = "劳动合同法(2012-12-28).md"


def upload(url, key, name, data, collection=None):
    return httpx.post(f"{url}/v1/ingest", files={"files": (name, data)},
                      data={} if collection is None else {"collection": collection},
                      headers={"Authorization": f"Bearer {key}"}, timeout=HANG_S)


def audit_rows(url):
    return admin(url, "GET", "/v1/keys/audit?limit=1000").json()["events"]


def test_a_planted_upload_outside_the_keys_documents_writes_nothing(service):
    """N1: a member with --documents 劳动法 --ingest uploads another law's name: 403, no file, no chunk, no
    audit row, and nobody's next answer quotes the planted text."""
    url, settings = service
    mole = issue(url, "mole", documents=[LABOUR], can_ingest=True)
    uploads = settings.data_dir / "uploads"
    before = sorted(uploads.iterdir()) if uploads.exists() else []
    events = len(audit_rows(url))
    r = upload(url, mole, PLANTED_NAME, PLANTED)
    assert r.status_code == 403 and PLANTED_NAME in r.json()["detail"], r.text
    assert set(r.json()) == {"detail", "type"}  # nothing about the collection's documents, no doc_id
    assert (sorted(uploads.iterdir()) if uploads.exists() else []) == before and len(audit_rows(url)) == events
    answer = ask(url, issue(url, "reader"), question="劳动合同的试用期最长多久？").json()
    assert "九十九" not in answer["answer"] and not any("九十九" in p["text"] for p in answer["passages"])


def test_replacing_a_document_is_a_right_of_its_own_and_on_the_record(service):
    url, settings = service
    law = (LAWS / "社会法" / LABOUR).read_bytes()
    first = admin(url, "POST", "/v1/ingest", files={"files": (LABOUR, law)}, data={"collection": "team_r"})
    assert first.status_code == 200 and first.json()["files"][0]["status"] == "written", first.text
    kept = settings.data_dir / "uploads@team_r" / LABOUR
    nina = issue(url, "nina", documents=[LABOUR], collections=["team_r"], can_ingest=True)
    r = upload(url, nina, LABOUR, PLANTED, "team_r")
    assert r.status_code == 403 and LABOUR in r.json()["detail"] and "--replace" in r.json()["detail"], r.text
    assert set(r.json()) == {"detail", "type"} and kept.read_bytes() == law  # refused: nothing written
    otto = issue(url, "otto", user="otto@firm", documents=[LABOUR], collections=["team_r"], can_ingest=True,
                 can_replace=True)
    r = upload(url, otto, LABOUR, PLANTED, "team_r")
    assert r.status_code == 200 and r.json()["files"][0]["status"] == "written", r.text
    assert kept.read_bytes() == PLANTED
    mine = [e for e in audit_rows(url) if e["target"] == LABOUR]
    assert [(e["action"], e["actor"]) for e in mine][:2] == [("replace", "otto"), ("upload", token_key_id(BOOT))]
    detail = json.loads(mine[0]["detail"])
    assert detail["user"] == "otto@firm" and detail["collection"] == "team_r"
    assert detail["sha256"] == hashlib.sha256(PLANTED).hexdigest() and detail["replaced_doc_id"]
    assert json.loads(mine[1]["detail"])["replaced_doc_id"] is None  # the first upload replaced nothing


def test_only_admins_and_keys_allowed_to_create_collections_do(service):
    """N3: a member with --ingest and no collection list creates nothing; --create-collections has a cap;
    a name no file system takes is a 422 naming the field."""
    url, settings = service
    pia = issue(url, "pia", can_ingest=True)
    r = upload(url, pia, "a.md", "第一条 测试。".encode(), "pia_new")
    assert r.status_code == 403 and "--create-collections" in r.json()["detail"], r.text
    assert not (settings.data_dir / "edge" / "pia_new").exists() and not (settings.data_dir / "uploads@pia_new").exists()
    quin = issue(url, "quin", can_ingest=True, can_create_collections=True, max_collections=1)
    assert upload(url, quin, "a.md", "第一条 测试。".encode(), "quin_1").status_code == 200
    r = upload(url, quin, "b.md", "第一条 测试。".encode(), "quin_2")
    assert r.status_code == 403 and "1 collections" in r.json()["detail"]
    assert not (settings.data_dir / "edge" / "quin_2").exists()
    assert upload(url, quin, "c.md", "第二条 测试。".encode(), "quin_1").status_code == 200  # its own: no cap
    made = [e["target"] for e in audit_rows(url) if e["action"] == "create_collection" and e["actor"] == "quin"]
    assert made == ["quin_1"]
    r = admin(url, "POST", "/v1/ingest", files={"files": ("a.md", "第一条 测试。".encode())}, data={"collection": "c" * 300})
    assert r.status_code == 422 and r.json()["detail"].startswith("collection"), r.text


def test_a_cached_answer_names_its_origin_only_to_whom_it_belongs(service):
    """N5: a cache hit carries `cached_from` only when the original query was the caller's (or for admins)."""
    url, _ = service
    first_key, second_key = issue(url, "cache_a"), issue(url, "cache_b")
    q = "有限责任公司的股东会由谁组成？"
    first = ask(url, first_key, question=q).json()
    theirs = ask(url, second_key, question=q).json()
    assert theirs["cache_hit"] and theirs["cached_from"] is None
    again = ask(url, first_key, question=q).json()
    assert again["cache_hit"] and again["cached_from"] == first["query_id"]
    assert admin(url, "POST", "/v1/ask", json={"question": q}).json()["cached_from"] == first["query_id"]


def test_healthz_details_are_for_admins_only(service):
    """N6: a member key gets the status, not the ledger's counters, last error or spill files."""
    url, _ = service
    member = httpx.get(f"{url}/healthz", headers={"Authorization": f"Bearer {issue(url, 'health_m')}"},
                       timeout=HANG_S).json()
    assert set(member) == {"status"}
    assert "ledger" in admin(url, "GET", "/healthz").json()


def test_a_revoke_takes_effect_at_once_on_the_replica_that_made_it(service):
    url, _ = service
    key = issue(url, "gone")
    assert ask(url, key).status_code == 200  # resolved and cached for 2 s
    assert admin(url, "DELETE", "/v1/keys/gone").status_code == 200
    r = ask(url, key)
    assert r.status_code == 401 and "revoked" in r.json()["detail"]


def test_admins_see_who_asked_each_query_and_members_their_own(service):
    """N8: user_id and the key's name on every query of GET /v1/queries, /v1/queries/{id} and the
    per-query report (the CSV's rows)."""
    url, settings = service
    key = issue(url, "who_k", user="who@firm")
    qid = ask(url, key).json()["query_id"]
    row(settings, qid)
    listed = admin(url, "GET", "/v1/queries?limit=500").json()["queries"]
    assert all({"user_id", "api_key_id"} <= set(q) for q in listed)
    assert {(q["user_id"], q["api_key_id"]) for q in listed if q["query_id"] == qid} == {("who@firm", "who_k")}
    one = admin(url, "GET", f"/v1/queries/{qid}").json()
    assert (one["user_id"], one["api_key_id"]) == ("who@firm", "who_k")
    report = admin(url, "GET", "/v1/reports/queries?last=500").json()["queries"]
    assert [(r["user_id"], r["api_key_id"]) for r in report if r["query_id"] == qid] == [("who@firm", "who_k")]
    own = httpx.get(f"{url}/v1/queries", headers={"Authorization": f"Bearer {key}"}, timeout=HANG_S).json()
    assert {(q["user_id"], q["api_key_id"]) for q in own["queries"]} == {("who@firm", "who_k")}


def test_a_members_budgets_cost_the_same_however_many_keys_exist(service):
    """N7: a member's GET /v1/budgets reads only what binds it: the statements it runs do not grow with
    the number of keys with budgets (an admin's list does)."""
    url, _ = service
    engine = STATE["svc"]._readers[0].engine
    key = issue(url, "bud_m", budget_usd="1")
    count = [0]

    def counted():
        count[0] = 0
        r = httpx.get(f"{url}/v1/budgets", headers={"Authorization": f"Bearer {key}"}, timeout=HANG_S)
        assert r.status_code == 200 and [b["value"] for b in r.json()["budgets"]] == ["bud_m"], r.text
        return count[0]

    def on_statement(conn, cursor, statement, *args):
        # reads only, and not the key's own resolution (cached 2 s, so present or not): what is measured
        count[0] += statement.startswith("SELECT") and "secret_sha256 =" not in statement

    sa.event.listen(engine, "before_cursor_execute", on_statement)
    try:
        few = counted()
        for i in range(40):
            issue(url, f"bud_{i}", budget_usd="1")
        assert counted() == few
    finally:
        sa.event.remove(engine, "before_cursor_execute", on_statement)


def test_names_are_echoed_without_bidirectional_controls(service):
    url, _ = service
    r = admin(url, "POST", "/v1/ingest", files={"files": ("evil\u202e.md", "第一条 测试。".encode())},
              data={"collection": "bidi"})
    shown = r.json()["files"][0]["file"]
    assert r.status_code == 200 and "\u202e" not in r.text and shown == "evil\\u202e.md", r.text
    assert not any("\u202e" in (e["target"] + (e["detail"] or "")) for e in audit_rows(url))


def test_an_upload_the_ledger_cannot_record_is_refused_and_writes_nothing(service):
    """No upload off the record: while another process holds the ledger's write lock, the upload is a 503
    and no file is kept (the audit row could not be written)."""
    import sqlite3

    url, settings = service
    holder = sqlite3.connect(settings.ledger_path, timeout=30, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        r = admin(url, "POST", "/v1/ingest", files={"files": ("unrecorded.md", "第一条 测试。".encode())})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.status_code == 503, r.text
    assert not (settings.data_dir / "uploads" / "unrecorded.md").exists()
