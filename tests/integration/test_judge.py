"""The LLM judge against real local HTTP servers (one answering, one judging) and a real SQLite ledger:
graded off the answer path, each call an attempt row of stage `judge`, its spend apart from the query's."""
from __future__ import annotations

import io
import json
import sqlite3
import threading
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price
from rich.console import Console

from rag_app.core.usage import judge_run_id
from rag_app.present.report_export import write_report
from rag_app.service.pool import VariantPool
from rag_app.service.query_service import QueryRequest, QueryService
from rag_app.spend.budgets import BudgetGate, Limits, load_budgets
from tests.conftest import index_company_law, make_settings, wait_until
from tests.fakes.openai_server import FakeOpenAI, Held, Reply, Status
from tracing.ledger import Ledger

Q = "一人有限责任公司是什么？"
GRADED = Reply(content='{"faithfulness": 0.8, "relevance": 0.6, "reason": "cites 第五十七条"}',
               prompt_tokens=900, completion_tokens=30)


def gpt4o_mini_nano(inp: int, out: int) -> int:
    return int(calc_price(Usage(input_tokens=inp, output_tokens=out), model_ref="gpt-4o-mini").total_price
               * Decimal(10**9))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge")
    index_company_law(root, retriever="bm25")
    return root


@pytest.fixture
def judged(indexed, tmp_path):
    """build(judge_script, **settings) -> (QueryService, pool, answering server, judging server)."""
    made = []

    def build(script=(), **overrides):
        llm, judge = FakeOpenAI().__enter__(), FakeOpenAI().__enter__()
        judge.script = list(script)
        settings = make_settings(indexed, **{
            "retriever": "bm25", "openai_base_url": llm.base_url, "ledger_url": f"sqlite:///{tmp_path}/ledger.sqlite",
            "judge_model": "gpt-4o-mini", "judge_base_url": judge.base_url, "judge_sample": 1.0,
            "llm_max_retries": 2, "llm_retry_base_s": 0.01, **overrides})
        pool = VariantPool(settings)
        made.append((llm, judge, pool))
        gate = BudgetGate(load_budgets(None), Limits(pool.base.prices.fx), lambda fn: None)
        return QueryService(lambda: pool, gate, None, settings.data_dir), pool, llm, judge

    yield build
    for llm, judge, pool in made:
        pool.close()
        llm.__exit__(None, None, None)
        judge.__exit__(None, None, None)


def rows(pool, sql: str, *args) -> list[dict]:
    conn = sqlite3.connect(pool.settings.ledger_path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def test_a_judged_answer_costs_its_query_nothing_and_is_evaluation_spend(judged):
    service, pool, llm, judge = judged([Status(500), GRADED])
    result = service.answer(QueryRequest(Q, user_id="u1"))
    payload, route = result.answer, result.route
    pool.drain()
    qid = route.query_id
    # the judge saw the question, the passages and the answer, and asked its own model
    sent = judge.requests[-1]["body"]
    assert sent["model"] == "gpt-4o-mini" and len(judge.requests) == 2 and len(llm.requests) == 1
    text = "\n".join(m["content"] for m in sent["messages"])
    assert Q in text and payload["answer"] in text and "[1]" in text
    # each judge call is an attempt row of stage `judge` (its retry too), priced like generation, under the
    # judge's own run: none of the judged query's rows
    judge_rows = rows(pool, "SELECT * FROM stage_calls WHERE stage = 'judge' ORDER BY attempt")
    assert [(r["query_id"], r["attempt"], r["status"]) for r in judge_rows] == [
        (judge_run_id(qid), 1, "retry"), (judge_run_id(qid), 2, "ok")]
    assert judge_rows[1]["cost_nano_usd"] == gpt4o_mini_nano(900, 30) and judge_rows[1]["price_source"]
    assert judge_rows[0]["call_id"] == judge_rows[1]["call_id"]
    assert [r["stage"] for r in rows(pool, "SELECT stage FROM stage_calls WHERE query_id = ?", qid)] == [
        "embed_query", "retrieve", "rerank", "generate"]
    run = rows(pool, "SELECT kind, status, origin, variant, question FROM queries WHERE query_id = ?", judge_run_id(qid))
    assert run == [{"kind": "judge", "status": "ok", "origin": "judge", "variant": "default", "question": Q}]
    # the grades belong to the judged query, source `judge`, beside the local signals
    grades = {r["metric"]: r["value"] for r in rows(pool, "SELECT metric, value FROM query_quality WHERE "
                                                          "query_id = ? AND source = 'judge'", qid)}
    assert grades == {"faithfulness": 0.8, "relevance": 0.6, "judge_score": 0.7}
    with Ledger.open(pool.settings.ledger) as ledger:
        # the query's cost, its report's cost and cost per query are what the answer said: no judge in them
        assert ledger.query(qid)["cost_nano_usd"] == round(payload["total_cost_usd"] * 1e9)
        totals = ledger.report_totals()
        assert totals["queries"] == 1 and totals["cost_usd"] == payload["total_cost_usd"]
        assert totals["cost_per_query_p50_usd"] == payload["total_cost_usd"]
        assert "judge" not in totals["stages"] and ledger.list_queries()[0] == 1
        spend = {"cost_usd": gpt4o_mini_nano(900, 30) / 1e9, "cost_is_lower_bound": False, "judge_calls": 2,
                 "judged_answers": 1, "failed_runs": 0, "unpriced_rows": 0, "retries": 1, "timeouts": 0}
        assert totals["evaluation_spend"] == spend
        assert ledger.report_full().totals["evaluation_spend"] == spend  # the rows agree with the rollups
        assert ledger.report_totals(last=1)["evaluation_spend"] == spend
        assert ledger.report_totals(variant="other")["evaluation_spend"]["judge_calls"] == 0
        shown = ledger.judge(qid)
        assert (shown["faithfulness"], shown["relevance"], shown["judge_score"]) == (0.8, 0.6, 0.7)
        assert (shown["reason"], shown["model"], shown["prompt_version"]) == ("cites 第五十七条", "gpt-4o-mini", "v1")
        assert (shown["status"], shown["calls"], shown["cost_usd"]) == ("ok", 2, spend["cost_usd"])
        out = io.StringIO()
        write_report(ledger, "table", out, Console(file=out, width=80), last=None, variant=None,
                     prices="original", table_rows=10)
        line = next(x for x in out.getvalue().splitlines() if x.startswith("evaluation spend"))
        assert line == (f"evaluation spend: ${spend['cost_usd']:.6f} (2 judge calls, 1 answer judged), "
                        "not in cost per query")
        js = io.StringIO()
        write_report(ledger, "json", js, Console(file=io.StringIO()), last=None, variant=None, prices="original",
                     table_rows=10)
        assert json.loads(js.getvalue())["totals"]["evaluation_spend"] == spend


def test_a_failing_or_garbled_judge_never_fails_the_answer(judged):
    service, pool, _, judge = judged([Status(500), Status(500), Status(500),
                                      Reply(content="Looks right to me.", prompt_tokens=800, completion_tokens=5)])
    first = service.answer(QueryRequest(Q)).answer
    r1 = first["query_id"]
    pool.drain()
    second = service.answer(QueryRequest(Q)).answer
    r2 = second["query_id"]
    pool.drain()
    assert first["mode"] == second["mode"] == "llm" and first["answer"]
    with Ledger.open(pool.settings.ledger) as ledger:
        failed, garbled = ledger.judge(r1), ledger.judge(r2)
        assert failed["status"] == "error" and "[judge]" in failed["error"] and failed["judge_score"] is None
        assert failed["calls"] == 3 and failed["cost_usd"] == 0.0  # refused thrice, nothing billed
        assert garbled["status"] == "error" and "not a JSON object" in garbled["error"] and garbled["calls"] == 1
        assert garbled["cost_usd"] == gpt4o_mini_nano(800, 5) / 1e9  # a garbled reply is still billed
        spend = ledger.report_totals()["evaluation_spend"]
        assert (spend["judge_calls"], spend["judged_answers"], spend["failed_runs"], spend["retries"]) == (4, 0, 2, 2)
        assert ledger.report_totals()["queries"] == 2
    assert [r["status"] for r in rows(pool, "SELECT status FROM stage_calls WHERE query_id = ? ORDER BY attempt",
                                      judge_run_id(r1))] == ["retry", "retry", "error"]
    assert pool.base.judge.stats()["failed"] == 2


def test_the_judge_waits_its_own_timeout_not_the_answers(judged):
    """RAG_JUDGE_TIMEOUT_S: a judge slower than it times out (recorded, retried, counted), whatever the
    answer's own, longer timeout; the answer never waits on it."""
    from tests.fakes.openai_server import Slow

    service, pool, _, judge = judged([Slow(1.5, GRADED), Slow(1.5, GRADED)], judge_timeout_s=0.3,
                                     llm_timeout_s=30.0, llm_max_retries=1)
    result = service.answer(QueryRequest(Q))
    payload, r = result.answer, result.route
    assert payload["answer"]
    pool.drain()
    statuses = [x["status"] for x in rows(pool, "SELECT status FROM stage_calls WHERE query_id = ? ORDER BY attempt",
                                          judge_run_id(r.query_id))]
    assert statuses == ["timeout", "timeout"], statuses  # both attempts cut at 0.3 s, not 30
    with Ledger.open(pool.settings.ledger) as ledger:
        assert ledger.judge(r.query_id)["judge_score"] is None


def test_a_full_queue_drops_the_judging_and_never_holds_the_answer(judged):
    gate = threading.Event()
    service, pool, _, judge = judged([Held(gate, GRADED), GRADED], judge_queue=1)
    try:
        r1 = service.answer(QueryRequest(Q)).route
        wait_until(lambda: len(judge.requests) == 1, "the first grading in flight")
        r2 = service.answer(QueryRequest(Q)).route  # waits in the queue (its one place)
        done = []
        asker = threading.Thread(target=lambda: done.append(service.answer(QueryRequest(Q))))
        asker.start()  # the queue is full: this answer must still come back while the judge is held
        wait_until(lambda: done, "an answer while the judge's queue is full", alive=asker.is_alive)
        assert pool.base.judge.stats() == {"offered": 3, "queued": 2, "judged": 0, "failed": 0, "dropped": 1,
                                           "over_budget": 0, "waiting": 1}
    finally:
        gate.set()
    pool.drain()
    r3 = done[0].route
    with Ledger.open(pool.settings.ledger) as ledger:
        assert ledger.judge(r1.query_id)["judge_score"] == 0.7 and ledger.judge(r2.query_id)["judge_score"] == 0.7
        assert ledger.judge(r3.query_id) is None  # dropped: not judged, and nothing spent on it
    assert pool.base.judge.stats()["judged"] == 2


def test_only_the_sampled_share_of_live_queries_is_judged(judged):
    service, pool, _, judge = judged(judge_sample=0.0)
    service.answer(QueryRequest(Q))
    pool.drain()
    assert judge.requests == [] and pool.base.judge.stats()["offered"] == 0


def test_a_cli_question_is_never_judged(judged):
    _, pool, _, judge = judged([GRADED])
    answer = pool.base.ask(Q)  # origin cli: only live queries are judged, whatever the share
    pool.drain()
    assert judge.requests == [] and rows(pool, "SELECT * FROM queries WHERE query_id = ?",
                                         judge_run_id(answer.query_id)) == []


def test_the_query_page_shows_the_judges_grades(indexed, tmp_path):
    from fastapi.testclient import TestClient

    from rag_app.service.app import create_app

    with FakeOpenAI() as llm, FakeOpenAI() as judge:
        judge.script = [GRADED]
        settings = make_settings(indexed, retriever="bm25", openai_base_url=llm.base_url, judge_model="gpt-4o-mini",
                                 judge_base_url=judge.base_url, judge_sample=1.0,
                                 ledger_url=f"sqlite:///{tmp_path}/ledger.sqlite")
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as api:
            asked = api.post("/v1/ask", json={"question": Q}).json()
            qid = asked["query_id"]

            def graded():
                return (api.get(f"/v1/queries/{qid}").json()["quality"] or {}).get("judge")

            wait_until(lambda: (graded() or {}).get("judge_score") is not None, "the judge's grades in the ledger")
            page = api.get(f"/v1/queries/{qid}").json()
            assert page["quality"]["groundedness"] == asked["quality"]["groundedness"]  # the local signals stay
            assert {k: page["quality"]["judge"][k] for k in ("faithfulness", "relevance", "judge_score", "status")} == {
                "faithfulness": 0.8, "relevance": 0.6, "judge_score": 0.7, "status": "ok"}
            assert page["cost_usd"] == pytest.approx(asked["total_cost_usd"])  # the judge is not in it
            assert [s["stage"] for s in page["stages"]] == ["embed_query", "retrieve", "rerank", "generate"]
            health = api.get("/healthz").json()
            assert health["judge"]["judged"] == 1 and health["judge"]["dropped"] == 0
            summary = api.get("/v1/reports/summary").json()
            assert summary["evaluation_spend"]["judge_calls"] == 1 and summary["queries"] == 1


def test_a_judge_prompt_version_with_no_file_stops_start_up_and_releases_the_store(indexed, tmp_path):
    from rag_app.core.errors import ConfigError

    settings = make_settings(indexed, retriever="bm25", openai_base_url="http://127.0.0.1:9/v1",
                             judge_model="gpt-4o-mini", judge_prompt_version="v9",
                             ledger_url=f"sqlite:///{tmp_path}/ledger.sqlite")
    with pytest.raises(ConfigError, match="prompt 'judge' version 'v9' not found"):
        VariantPool(settings)
    VariantPool(settings.model_copy(update={"judge_prompt_version": "v1"})).close()  # the store was let go
