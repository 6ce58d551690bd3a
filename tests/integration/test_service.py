"""The HTTP service over real sockets (uvicorn in a thread), with the local fake LLM server."""
from __future__ import annotations

import json
from pathlib import Path
import socket
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

from rag_app.app import RagApp
from rag_app.service.app import api_key_id, create_app
from tests.conftest import HANG_S, LAWS, make_settings, wait_until
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.sql_ledger import select_rows
from tracing.ledger import Ledger


class Server:
    def __init__(self, settings):
        # bound here and handed to uvicorn: a port picked and released first could be taken by a test
        # running beside this one (pytest -n 2) before uvicorn binds it
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: self.server.started, "server start", alive=self.thread.is_alive)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.socket.close()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, ):
    root = tmp_path_factory.mktemp("svc")
    with RagApp(make_settings(root)) as app:
        app.ingest([LAWS / "民法商法/公司法(2018-10-26).md"])
    return root


def test_ask_auth_and_ledger(indexed, monkeypatch):
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, api_token="s3cret")
        with Server(settings) as url:
            health = httpx.get(f"{url}/healthz").json()  # no token needed, and no details without it
            assert health == {"status": "up"}
            detail = httpx.get(f"{url}/healthz", headers={"Authorization": "Bearer s3cret"}).json()
            assert detail["status"] == "up" and detail["ledger"]["buffered_rows"] == 0
            assert httpx.post(f"{url}/v1/ask", json={"question": "x"}).status_code == 401
            bad = httpx.post(f"{url}/v1/ask", json={"question": "x"}, headers={"Authorization": "Bearer nope"})
            assert bad.status_code == 401
            h = {"Authorization": "Bearer s3cret"}
            r = httpx.post(f"{url}/v1/ask", json={"question": "一人有限责任公司是什么？", "user_id": "u1"}, headers=h, timeout=HANG_S)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["mode"] == "llm" and body["citations"] and body["variant"] == "default"
            assert [s["stage"] for s in body["stages"]] == ["embed_query", "retrieve", "rerank", "generate"]
            one = httpx.get(f"{url}/v1/queries/{body['query_id']}", headers=h).json()
            assert one["cost_usd"] == pytest.approx(body["total_cost_usd"]) and len(one["stages"]) == 4
            assert httpx.get(f"{url}/v1/queries/nope", headers=h).status_code == 404
            assert httpx.post(f"{url}/v1/ask", json={"question": ""}, headers=h).status_code == 422
            summary = httpx.get(f"{url}/v1/reports/summary", headers=h).json()
            assert summary["queries"] == 1 and summary["cost_usd"] == pytest.approx(body["total_cost_usd"])
            assert summary["ledger"]["unknown_attempts"] == 0 and summary["ledger"]["orphan_stage_rows"] == 0
            # spend per user and per API key (#11 item 4): the key is a short hash of the token, never the token
            by_user = httpx.get(f"{url}/v1/reports/by", params={"dim": "user"}, headers=h).json()
            assert [(r["user"], r["queries"]) for r in by_user["rows"]] == [("u1", 1)]
            assert by_user["rows"][0]["cost_usd"] == pytest.approx(body["total_cost_usd"])
            by_key = httpx.get(f"{url}/v1/reports/by", params={"dim": "key"}, headers=h).json()["rows"]
            assert [r["key"] for r in by_key] == [api_key_id("s3cret")] and "s3cret" not in json.dumps(by_key)
            assert httpx.get(f"{url}/v1/reports/by", params={"dim": "planet"}, headers=h).status_code == 422
            assert httpx.get(f"{url}/v1/reports/by", params={"dim": "user"}).status_code == 401
            assert httpx.get(f"{url}/openapi.json").status_code == 401  # the API description follows the token
            assert httpx.get(f"{url}/openapi.json", headers=h).status_code == 200


def test_fifty_concurrent_asks_all_reach_the_ledger(indexed, tmp_path):
    settings = make_settings(indexed, data_dir=indexed / "data")
    with Server(settings) as url:
        before = httpx.get(f"{url}/v1/queries", params={"limit": 1}).json()["total"]
        with ThreadPoolExecutor(max_workers=50) as pool:
            codes = list(pool.map(lambda i: httpx.post(f"{url}/v1/ask", json={
                "question": f"股东会的职权有哪些？第{i}问", "session_id": f"s{i}"}, timeout=HANG_S).status_code, range(50)))
        assert codes == [200] * 50
        page = httpx.get(f"{url}/v1/queries", params={"limit": 500}).json()
        assert page["total"] == before + 50
    conn = sqlite3.connect(indexed / "data" / "ledger.sqlite")
    per_query = conn.execute("SELECT COUNT(*) FROM (SELECT query_id, COUNT(*) n FROM stage_calls WHERE query_id IN "
                             "(SELECT query_id FROM queries WHERE question LIKE '股东会的职权有哪些？第%问') "
                             "GROUP BY query_id HAVING n = 4)").fetchone()[0]
    assert per_query == 50


def test_upload_limits_and_bad_files(indexed):
    settings = make_settings(indexed, max_upload_mb=0.05)
    law = (LAWS / "社会法/劳动法(2018-12-29).md").read_text(encoding="utf-8")[:6000].encode()
    with Server(settings) as url:
        files = [("files", ("劳动法.md", law, "text/markdown")),
                 ("files", ("big.md", b"x" * 60000, "text/markdown")),
                 ("files", ("evil.exe", b"MZ...", "application/octet-stream")),
                 ("files", ("empty.txt", b"", "text/plain"))]
        r = httpx.post(f"{url}/v1/ingest", files=files, timeout=HANG_S)
        assert r.status_code == 200, r.text
        by = {f["file"]: f for f in r.json()["files"]}
        assert by["劳动法.md"]["status"] == "written" and by["劳动法.md"]["chunks"] > 0
        assert "larger than" in by["big.md"]["error"]
        assert "unsupported file type .exe" in by["evil.exe"]["error"]
        assert by["empty.txt"]["status"] == "error" and "empty" in by["empty.txt"]["error"]


def test_split_and_shadow_experiments(indexed, tmp_path):
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top3": {"top_n": 3}}, "experiments": {
        "split": {"control": "default", "treatment": "top3", "rollout_pct": 50, "seed": "s"},
        "shadow": {"control": "default", "treatment": "top3", "rollout_pct": 100, "seed": "s", "mode": "shadow"}}}))
    for name in ("split", "shadow"):
        # the answer cache off: one question asked 20 times must run 20 times (and start 20 shadow runs)
        settings = make_settings(indexed, data_dir=tmp_path / name, experiments_file=cfg, experiment=name,
                                 answer_cache_size=0)
        import shutil
        shutil.copytree(indexed / "data" / "edge", tmp_path / name / "edge")
        with Server(settings) as url:
            arms = {}
            for i in range(20):
                body = httpx.post(f"{url}/v1/ask", json={"question": "公司的董事会有哪些职权？", "user_id": f"u{i % 10}"},
                                  timeout=HANG_S).json()
                arms.setdefault(f"u{i % 10}", set()).add(body["variant"])
                assert body["experiment"] == name
            assert all(len(v) == 1 for v in arms.values())  # sticky per user
            want = 20  # split: both arms together; shadow: the 20 background runs

            def counted() -> bool:  # shadow runs finish in the background: poll, never sleep a fixed time
                nonlocal res
                res = httpx.get(f"{url}/v1/experiments/{name}").json()
                arms_ = res["arms"]
                got = (arms_["treatment"]["queries"] if name == "shadow"
                       else arms_["control"]["queries"] + arms_["treatment"]["queries"])
                return got >= want

            res: dict = {}
            wait_until(counted, f"{name}: {want} queries in the comparison")
        if name == "split":
            assert {v.pop() for v in arms.values()} == {"default", "top3"}
            assert res["arms"]["control"]["queries"] + res["arms"]["treatment"]["queries"] == 20
        else:
            assert all(v == {"default"} for v in arms.values())
            conn = sqlite3.connect(tmp_path / name / "ledger.sqlite")
            pairs = conn.execute("SELECT topk_jaccard, top3_overlap FROM shadow_pairs").fetchall()
            assert len(pairs) == 20 and all(0.5 <= j <= 1 and t == 1.0 for j, t in pairs)  # top-3 ⊂ top-5
            assert res["arms"]["treatment"]["queries"] == 20


def test_replay_compares_arms_on_identical_questions(indexed, tmp_path):
    import shutil

    from rag_app.experiments.comparison import replay
    from rag_app.evaluation.qa import Gold, Question
    from rag_app.service.pool import VariantPool

    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top1": {"top_n": 1}}, "experiments": {
        "topn": {"control": "default", "treatment": "top1", "rollout_pct": 10, "seed": "s"}}}))
    shutil.copytree(indexed / "data" / "edge", tmp_path / "d" / "edge")
    law = LAWS / "民法商法/公司法(2018-10-26).md"
    text = law.read_text(encoding="utf-8")
    qs = []
    for n, label in enumerate(["第五十七条", "第二十条", "第三十七条", "第七十八条"]):
        start = text.index(f"\n{label}") + 1
        end = text.index("\n第", start + 3)
        qs.append(Question(f"q{n}", f"公司法{label}的内容是什么？", "recitation",
                           (Gold("民法商法/公司法(2018-10-26).md", start, end),)))
    pool = VariantPool(make_settings(tmp_path, data_dir=tmp_path / "d", experiments_file=cfg))
    try:
        res = replay(pool, pool.config.experiments["topn"], qs, LAWS, k=5)
    finally:
        pool.close()
    assert res["arms"]["control"]["recall@5"] == 1.0  # citation-aware retrieval puts the article first
    assert res["arms"]["treatment"]["recall@5"] == 1.0  # top-1 holds it too
    assert res["arms"]["control"]["mrr"] == 1.0 and res["differences"]["mrr"]["diff"] == 0.0
    # extractive answers quote their passages: grounded by construction, in both arms, no difference
    assert res["arms"]["control"]["groundedness"] == res["arms"]["treatment"]["groundedness"] == 1.0
    assert res["arms"]["treatment"]["invalid_citation_rate"] == 0.0 and res["differences"]["groundedness"]["diff"] == 0.0
    assert res["cost_metric"] == "shadow_cost_usd"  # extractive: the prompt's shadow cost is compared
    assert res["arms"]["treatment"]["cost_per_query"] < res["arms"]["control"]["cost_per_query"]
    assert res["differences"]["cost_per_query"]["ci95_high"] < 0
    assert res["verdict"] == "promote"


def test_api_says_unpriced_and_where_counts_came_from(tmp_path):
    with RagApp(make_settings(tmp_path)) as app:
        app.ingest([LAWS / "民法商法/公司法(2018-10-26).md"])
    with FakeOpenAI() as llm:
        settings = make_settings(tmp_path, openai_base_url=llm.base_url, llm_model="house-llm-7b")
        with Server(settings) as url:
            # a generous hang guard, not a latency bound (pytest-timeout ends a real hang)
            r = httpx.post(f"{url}/v1/ask", json={"question": "一人有限责任公司是什么？"}, timeout=HANG_S)
            assert r.status_code == 200, r.text
            qid = r.json()["query_id"]
            one = httpx.get(f"{url}/v1/queries/{qid}").json()
            assert one["cost_usd"] is None and one["unpriced_rows"] == 1  # unpriced, never $0
            gen = [s for s in one["stages"] if s["stage"] == "generate"][0]
            assert (gen["usage_source"], gen["price_source"], gen["cost_usd"]) == ("provider", "unpriced", None)
            listed = httpx.get(f"{url}/v1/queries").json()["queries"][0]
            assert listed["cost_usd"] is None and listed["unpriced_rows"] == 1
            summary = httpx.get(f"{url}/v1/reports/summary").json()
            assert (summary["unpriced_rows"], summary["unpriced_queries"], summary["cost_is_lower_bound"]) == (1, 1, True)


def test_live_comparison_ignores_replayed_questions(indexed, tmp_path):
    """10 live asks per arm through the service's pool, then one replay of 4 labelled questions through
    both arms: the live comparison still sees 10 per arm; the replay rows carry origin=replay."""
    import shutil

    from rag_app.experiments.comparison import compare_live, replay
    from rag_app.evaluation.qa import Gold, Question
    from rag_app.service.pool import VariantPool

    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top1": {"top_n": 1}}, "experiments": {
        "topn": {"control": "default", "treatment": "top1", "rollout_pct": 50, "seed": "s"}}}))
    shutil.copytree(indexed / "data" / "edge", tmp_path / "d" / "edge")
    pool = VariantPool(make_settings(tmp_path, data_dir=tmp_path / "d", experiments_file=cfg, experiment="topn"))
    try:
        per_arm = {"control": 0, "treatment": 0}
        user = 0
        while min(per_arm.values()) < 10:
            user += 1
            from rag_app.experiments.variants import assign
            arm = assign(pool.experiment, f"user{user}").arm
            if per_arm[arm] == 10:
                continue
            _, a = pool.ask("股东会的职权有哪些？", user_id=f"user{user}")
            per_arm[a.arm] += 1
        law = LAWS / "民法商法/公司法(2018-10-26).md"
        text = law.read_text(encoding="utf-8")
        start = text.index("\n第五十七条") + 1
        q = Question("q0", "公司法第五十七条的内容是什么？", "recitation",
                     (Gold("民法商法/公司法(2018-10-26).md", start, text.index("\n第", start + 3)),))
        replay(pool, pool.experiment, [q] * 4, LAWS, k=5)
        pool.drain()
        ledger = tmp_path / "d" / "ledger.sqlite"
        origins = dict(select_rows(ledger, "SELECT origin, COUNT(*) FROM queries GROUP BY origin"))
        assert origins == {"live": 20, "replay": 8}
        with Ledger.open(ledger) as L:
            res = compare_live(L, pool.experiment)
    finally:
        pool.close()
    assert res["arms"]["control"]["queries"] == 10 and res["arms"]["treatment"]["queries"] == 10
    assert res["srm"]["pvalue"] == 1.0


def test_reuploading_an_amended_law_replaces_its_old_chunks(tmp_path):
    law = (LAWS / "社会法/劳动法(2018-12-29).md").read_text(encoding="utf-8")
    assert law.count("试用期最长不得超过六个月") == 1
    amended = law.replace("试用期最长不得超过六个月", "试用期最长不得超过九个月")
    question = {"question": "劳动合同的试用期最长不得超过多长时间？"}
    with Server(make_settings(tmp_path)) as url:
        for text in (law, amended):
            r = httpx.post(f"{url}/v1/ingest", files=[("files", ("劳动法.md", text.encode(), "text/markdown"))],
                           timeout=HANG_S)
            assert r.json()["files"][0]["status"] == "written", r.text
        body = httpx.post(f"{url}/v1/ask", json=question, timeout=HANG_S).json()
    assert "不得超过九个月" in body["answer"] and "不得超过六个月" not in body["answer"], body["answer"]
    assert {c["doc"] for c in body["citations"]} == {"uploads/劳动法.md"}  # relative to the data dir


def test_an_upload_named_like_a_folder_ingested_law_replaces_it(tmp_path):
    """0.7.0: the amended law became a second document, and answers cited both texts."""
    src = tmp_path / "laws" / "劳动法.md"
    src.parent.mkdir()
    law = (LAWS / "社会法/劳动法(2018-12-29).md").read_text(encoding="utf-8")
    src.write_text(law, encoding="utf-8")
    twin = tmp_path / "laws2" / "劳动法.md"
    settings = make_settings(tmp_path)
    with RagApp(settings) as app:
        assert app.ingest([src]).outcomes[0].status == "written"  # `rag ingest laws/`
    amended = law.replace("试用期最长不得超过六个月", "试用期最长不得超过九个月")
    question = {"question": "劳动合同的试用期最长不得超过多长时间？"}
    with Server(settings) as url:
        r = httpx.post(f"{url}/v1/ingest", files=[("files", ("劳动法.md", amended.encode(), "text/markdown"))],
                       timeout=HANG_S)
        out = r.json()["files"][0]
        assert out["status"] == "written" and out["replaced"]["source"] == "劳动法.md", r.text
        body = httpx.post(f"{url}/v1/ask", json=question, timeout=HANG_S).json()
    assert "不得超过九个月" in body["answer"] and "不得超过六个月" not in body["answer"], body["answer"]
    assert {c["doc"] for c in body["citations"]} == {"uploads/劳动法.md"}
    with RagApp(settings) as app:
        docs = app.store.documents(settings.collection)
        assert [Path(d["source_path"]).name for d in docs] == ["劳动法.md"] and "uploads" in docs[0]["source_path"]
        # two documents of that name elsewhere: none is guessed, both kept, the reply says so
        twin.parent.mkdir()
        twin.write_text(law + "\n\n附：另一份副本。\n", encoding="utf-8")
        app.ingest([src, twin])
        report = app.ingest_uploads([settings.data_dir / "uploads" / "劳动法.md"])
        assert report.outcomes[0].replaced is None and "2 documents" in report.outcomes[0].warning
        assert len(app.store.documents(settings.collection)) == 3


def test_a_ramped_experiment_serves_the_ledgers_step_and_keeps_users_sticky(indexed, tmp_path):
    """The pool serves the rollout of the ramp's latest move; users treated at 10% stay treated at 50%."""
    import shutil

    from rag_app.experiments.variants import assign
    from rag_app.service.pool import VariantPool

    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top1": {"top_n": 1}}, "experiments": {"topn": {
        "control": "default", "treatment": "top1", "rollout_pct": 10, "seed": "s",
        "ramp": {"steps": [10, 50, 100], "min_queries_per_step": 2}}}}))
    shutil.copytree(indexed / "data" / "edge", tmp_path / "d" / "edge")
    pool = VariantPool(make_settings(tmp_path, data_dir=tmp_path / "d", experiments_file=cfg, experiment="topn",
                                     ramp_check_s=3600))  # the test looks itself
    try:
        pool.start_ramp()
        assert pool.experiment.rollout_pct == 10
        treated_at_10 = [f"u{i}" for i in range(200) if assign(pool.experiment, f"u{i}").arm == "treatment"]
        users = treated_at_10[:2] + [u for u in (f"u{i}" for i in range(200)) if u not in treated_at_10][:18]
        for u in users:
            _, a = pool.ask("股东会的职权有哪些？", user_id=u)
            assert a.arm == ("treatment" if u in treated_at_10 else "control")
        pool.drain()
        d = pool.ramp.look()
        assert (d.action, d.rollout_pct) == ("advance", 50), d.reason
        assert pool.experiment.rollout_pct == 50
        _, a = pool.ask("股东会的职权有哪些？", user_id=treated_at_10[0])
        assert a.arm == "treatment"  # sticky across the move
        at_50 = sum(assign(pool.experiment, f"u{i}").arm == "treatment" for i in range(200))
        assert at_50 > 2 * len(treated_at_10)
    finally:
        pool.close()


def test_quality_rides_on_every_front_door(indexed):
    from tests.fakes.openai_server import FakeOpenAI

    with FakeOpenAI() as llm, Server(make_settings(indexed, openai_base_url=llm.base_url, answer_cache_size=0)) as url:
        asked = httpx.post(f"{url}/v1/ask", json={"question": "一人有限责任公司是什么？"}, timeout=HANG_S).json()
        chat = httpx.post(f"{url}/v1/chat/completions", timeout=HANG_S, json={
            "model": "legal-rag", "messages": [{"role": "user", "content": "一人有限责任公司是什么？"}]}).json()
        streamed = httpx.post(f"{url}/v1/ask", json={"question": "一人有限责任公司是什么？", "stream": True},
                              timeout=HANG_S).text
    for q in (asked["quality"], chat["quality"]):
        assert set(q) == {"groundedness", "invalid_citations", "retrieval_confidence", "refusal", "claims"}
        assert q["groundedness"] == 1.0 and [c["supported"] for c in q["claims"]] == [True]
    answer_event = [json.loads(line[6:]) for line in streamed.splitlines() if line.startswith("data: ")][-1]
    assert answer_event["quality"]["groundedness"] == 1.0 and answer_event["quality"]["claims"] == asked["quality"]["claims"]


def test_users_can_say_an_answer_was_wrong(indexed, tmp_path):
    settings = make_settings(indexed, ledger_url=f"sqlite:///{tmp_path}/l.sqlite")
    with Server(settings) as url:
        qid = httpx.post(f"{url}/v1/ask", json={"question": "一人有限责任公司是什么？"}, timeout=HANG_S).json()["query_id"]
        said = httpx.post(f"{url}/v1/queries/{qid}/feedback",
                          json={"score": -1, "comment": "第五十七条说的不是这个", "user_id": "u1"})
        assert said.status_code == 200 and said.json()["score"] == -1, said.text
        again = httpx.post(f"{url}/v1/queries/{qid}/feedback", json={"score": 1, "user_id": "u1"})  # changed mind
        other = httpx.post(f"{url}/v1/queries/{qid}/feedback", json={"score": 0})
        assert again.status_code == other.status_code == 200
        shown = httpx.get(f"{url}/v1/queries/{qid}").json()
        assert sorted((f["user_id"], f["score"], f["comment"]) for f in shown["feedback"]) == [("", 0, None), ("u1", 1, None)]
        assert shown["quality"]["groundedness"] is not None or shown["mode"] == "extractive"
        assert httpx.post(f"{url}/v1/queries/nope/feedback", json={"score": 1}).status_code == 404
        for bad in ({"score": 5}, {"score": "1"}, {}, {"score": 1, "comment": "x\x00"}, {"score": 1, "extra": 1}):
            r = httpx.post(f"{url}/v1/queries/{qid}/feedback", json=bad)
            assert r.status_code == 422, (bad, r.text)


def test_the_audits_cheaper_arm_that_invents_an_article_is_rolled_back_over_http(indexed, tmp_path):
    """A 50% split, control gpt-4o-mini quoting passage [1], treatment gpt-4.1-nano (a third cheaper)
    answering with an article that does not exist and a passage never sent: 0.7.0 said promote."""
    import shutil

    from rag_app.experiments.variants import ExperimentConfig, assign
    from tests.fakes.openai_server import FakeOpenAI, Reply

    invented = "根据《中华人民共和国劳动法》第九百九十九条，用人单位可以随时无理由辞退劳动者且无需支付任何补偿[7]"
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"nano": {"llm_model": "gpt-4.1-nano"}}, "experiments": {
        "cheaper": {"control": "default", "treatment": "nano", "rollout_pct": 50, "seed": "s"}}}))
    exp = ExperimentConfig.load(cfg).experiments["cheaper"]
    shutil.copytree(indexed / "data" / "edge", tmp_path / "d" / "edge")
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, data_dir=tmp_path / "d", experiments_file=cfg, experiment="cheaper",
                                 answer_cache_size=0, openai_base_url=llm.base_url)
        with Server(settings) as url:
            for i in range(80):
                user = f"u{i}"
                treated = assign(exp, user).arm == "treatment"
                llm.script = [Reply(content=invented) if treated else Reply()]
                r = httpx.post(f"{url}/v1/ask", json={"question": "一人有限责任公司是什么？", "user_id": user},
                               timeout=HANG_S)
                assert r.status_code == 200 and (r.json()["quality"]["groundedness"] == 0.0) == treated, r.text
            res: dict = {}

            def counted() -> bool:
                nonlocal res
                res = httpx.get(f"{url}/v1/experiments/cheaper").json()
                return res["arms"]["control"]["queries"] + res["arms"]["treatment"]["queries"] >= 80
            wait_until(counted, "80 queries in the comparison")
    c, t = res["arms"]["control"], res["arms"]["treatment"]
    assert t["cost_per_query"]["mean"] < 0.9 * c["cost_per_query"]["mean"]  # cost alone would promote
    assert c["quality"]["groundedness"] == 1.0 and t["quality"]["groundedness"] == 0.0
    assert t["quality"]["invalid_citation_rate"] == 1.0 and min(c["quality"]["scored"], t["quality"]["scored"]) >= 30
    assert res["verdict"] == "roll back" and res["decided_by"] == "groundedness", res["reason"]
