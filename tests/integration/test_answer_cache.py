"""The answer cache of `rag serve` (#23 item 2), over real sockets with the local fake LLM: a repeated
question (however spaced or in full-width characters) is a hit: one query row with cache_hit, no stage
rows, zero billed tokens and a saved cost equal to what the original answer cost; a hit spends no budget;
a document of the collection replaced drops the entries; an experiment's arms never share them;
reports give hit rate and $ saved per day, user and variant."""
from __future__ import annotations

import json
import shutil

import httpx
import pytest

from rag_app.app import RagApp
from tests.conftest import HANG_S, LAWS, make_settings, wait_until
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.sql_ledger import select_rows
from tests.integration.test_service import Server

Q = "一人有限责任公司是什么？"
LAW = LAWS / "民法商法/公司法(2018-10-26).md"


@pytest.fixture
def indexed(tmp_path):
    with RagApp(make_settings(tmp_path)) as app:
        assert not app.ingest([LAW]).errors
    return tmp_path


def ask(url, question=Q, **kw):
    r = httpx.post(f"{url}/v1/ask", json={"question": question, **kw}, timeout=HANG_S)
    assert r.status_code == 200, r.text
    return r.json()


NEW_QUESTIONS = ["公司的股东会有哪些职权？", "董事会由几人组成？", "监事会的职权是什么？", "公司合并需要什么程序？",
                 "公司解散的原因有哪些？", "清算组行使哪些职权？", "公司的法定代表人由谁担任？", "公司债券如何发行？",
                 "股东可以查阅哪些公司资料？", "有限责任公司的股东人数有限制吗？"]


def test_a_repeated_question_is_a_hit_that_books_what_it_saved(indexed, tmp_path):
    budgets = tmp_path / "budgets.json"  # spent by a few answers: a hit still passes (it bills nothing)
    budgets.write_text(json.dumps({"budgets": [{"user": "*", "period": "day", "limit_usd": 0.0006}]}))
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=budgets)
        with Server(settings) as url:
            first = ask(url, user_id="u1")
            spent = [first["total_cost_usd"]]
            for question in NEW_QUESTIONS:  # new questions are not hits: they spend until one is refused
                r = httpx.post(f"{url}/v1/ask", json={"question": question, "user_id": "u1"}, timeout=HANG_S)
                if r.status_code == 429:
                    break
                assert r.status_code == 200, r.text
                spent.append(r.json()["total_cost_usd"])
            else:
                raise AssertionError("the budget never refused a new question")
            answered = len(spent)
            again = ask(url, "  一人有限责任公司是什么?  ", user_id="u1")  # spaces, a half-width "?"
            assert (first["cache_hit"], again["cache_hit"]) == (False, True)
            assert len([r for r in llm.requests if r["path"].endswith("/chat/completions")]) == answered
            assert again["answer"] == first["answer"] and again["citations"] == first["citations"]
            assert again["total_cost_usd"] == 0.0 and again["stages"] == []
            assert again["saved_cost_usd"] == pytest.approx(first["total_cost_usd"]) and first["total_cost_usd"] > 0
            assert again["query_id"] != first["query_id"] and again["cached_from"] == first["query_id"]
            wait_until(lambda: httpx.get(f"{url}/v1/queries/{again['query_id']}").status_code == 200, "hit row")
            row = httpx.get(f"{url}/v1/queries/{again['query_id']}").json()
            assert row["cost_usd"] == 0.0 and row["input_tokens"] == row["output_tokens"] == 0 and row["stages"] == []
            summary = httpx.get(f"{url}/v1/reports/summary").json()
            assert summary["answer_cache_hits"] == 1
            assert summary["answer_cache_hit_rate"] == pytest.approx(1 / (answered + 1), abs=1e-3)
            assert summary["saved_cost_usd"] == pytest.approx(first["total_cost_usd"])
            by_user = httpx.get(f"{url}/v1/reports/by", params={"dim": "user"}).json()["rows"]
            assert [(r["user"], r["answer_cache_hits"]) for r in by_user] == [("u1", 1)]
            day = httpx.get(f"{url}/v1/reports/by", params={"dim": "day"}).json()["rows"][0]
            assert day["saved_cost_usd"] == pytest.approx(first["total_cost_usd"])
            # the hit's saving: the original's cost, billed spend untouched (the budget counts billed spend only)
            spend = httpx.get(f"{url}/v1/budgets").json()["budgets"][0]
            assert spend["spend_usd"] == pytest.approx(sum(spent)) and spend["queries"] == answered
    [(hits, saved)] = select_rows(settings.ledger, "SELECT SUM(cache_hit), SUM(saved_cost_nano_usd) FROM queries")
    assert (hits, saved / 1e9) == (1, pytest.approx(first["total_cost_usd"]))


def test_a_hit_on_an_unpriced_answer_saved_an_unknown_amount(indexed):
    """An unpriced model's answer costs an unknown amount, and so does what a hit on it saved: never $0."""
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, llm_model="acme-secret-7b")
        with Server(settings) as url:
            first, again = ask(url), ask(url)
            assert (first["cache_hit"], again["cache_hit"]) == (False, True)
            assert first["unpriced"] is True and first["total_cost_usd"] is None
            assert again["saved_cost_usd"] is None
            wait_until(lambda: httpx.get(f"{url}/v1/queries/{again['query_id']}").status_code == 200, "hit row")
            summary = httpx.get(f"{url}/v1/reports/summary").json()
            assert (summary["answer_cache_hits"], summary["saved_unknown_hits"]) == (1, 1)
    [(saved,)] = select_rows(settings.ledger, "SELECT saved_cost_nano_usd FROM queries WHERE cache_hit = 1")
    assert saved is None


def test_a_changed_document_drops_the_cached_answers(indexed, tmp_path):
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url)
        with Server(settings) as url:
            assert ask(url)["cache_hit"] is False
            assert ask(url)["cache_hit"] is True
            amended = tmp_path / "up" / LAW.name
            amended.parent.mkdir()
            shutil.copy(LAW, amended)
            amended.write_text(amended.read_text(encoding="utf-8") + "\n\n第二百一十九条 本法自公布之日起施行。\n",
                               encoding="utf-8")
            with amended.open("rb") as f:
                up = httpx.post(f"{url}/v1/ingest", files=[("files", (LAW.name, f, "text/markdown"))], timeout=HANG_S)
            assert up.status_code == 200, up.text
            assert ask(url)["cache_hit"] is False  # the collection changed: asked again
            assert ask(url)["cache_hit"] is True


def test_experiment_arms_never_share_an_entry(indexed, tmp_path):
    exp = tmp_path / "exp.json"
    exp.write_text(json.dumps({"variants": {"a": {}, "b": {"top_n": 1}}, "experiments": {
        "e": {"control": "a", "treatment": "b", "rollout_pct": 50, "seed": "s"}}}))
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, experiments_file=exp, experiment="e")
        with Server(settings) as url:
            seen: dict[str, list[bool]] = {}
            for i in range(12):  # sticky per user: users land on both arms
                body = ask(url, user_id=f"user{i}")
                seen.setdefault(body["variant"], []).append(body["cache_hit"])
    assert set(seen) == {"a", "b"}
    # each arm's first answer is a miss whoever asked before on the other arm; later ones are hits
    assert all(hits[0] is False and all(hits[1:]) for hits in seen.values()), seen


def test_a_hit_saves_what_a_live_answer_would_cost_at_the_hits_time(indexed):
    """The saving is the original's successful usage priced at the hit's own start (DeepSeek's peak rule
    decides by then), never the original's recorded cost with its failed attempt."""
    from tracing.pricing import PriceTable
    from tests.fakes.openai_server import USAGE_SHAPES, Reply

    with FakeOpenAI() as llm:
        llm.script = [Reply(reset_after=2), Reply(usage=USAGE_SHAPES["deepseek"])]  # a reset, then the answer
        settings = make_settings(indexed, openai_base_url=llm.base_url, llm_model="deepseek-flash", llm_stream=True)
        with Server(settings) as url:
            first, again = ask(url), ask(url)
            assert (first["cache_hit"], again["cache_hit"]) == (False, True)
            wait_until(lambda: httpx.get(f"{url}/v1/queries/{again['query_id']}").status_code == 200, "hit row")
    [(started, saved)] = select_rows(settings.ledger, "SELECT started_at, saved_cost_nano_usd FROM queries "
                                     "WHERE cache_hit = 1")
    live = PriceTable().quote("deepseek-flash", 1500, 200, 1000, at=started).cost_nano  # peak or not, at the hit
    assert saved == live and again["saved_cost_usd"] == pytest.approx(live / 1e9)
    [(attempts,)] = select_rows(settings.ledger, "SELECT COUNT(*) FROM stage_calls WHERE query_id = :q AND "
                                "stage = 'generate'", q=first["query_id"])
    assert attempts == 2 and first["total_cost_usd"] * 1e9 > live  # the reset attempt was the original's, not ours
