"""The query policy without HTTP (rag_app/service/query_service.py): cache, budgets, unpriced, scope."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_app.access.keys import Principal
from rag_app.access.rate import RateLimited, RateLimiter
from rag_app.query.scope import Scope
from rag_app.spend.answer_cache import AnswerCache
from rag_app.spend.budgets import BudgetGate, Limits, OverBudget, load_budgets, price_of_a_question
from rag_app.service.pool import VariantPool
from rag_app.service.query_service import QueryRequest, QueryService
from tests.conftest import index_company_law, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tracing.ledger import Ledger

Q = "一人有限责任公司是什么？"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("qs")
    index_company_law(root)
    return root


@pytest.fixture
def service_for(indexed, tmp_path):
    made = []

    def build(limit_usd=None, cache_size=100, rate=False, **overrides):
        llm = FakeOpenAI().__enter__()
        budgets_file = None
        if limit_usd is not None:
            budgets_file = tmp_path / "budgets.json"
            budgets_file.write_text(json.dumps({"budgets": [{"user": "*", "period": "day", "limit_usd": limit_usd}]}))
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=budgets_file,
                                 ledger_url=f"sqlite:///{tmp_path}/ledger.sqlite", **overrides)
        pool = VariantPool(settings)
        ledger = Ledger.open(settings.ledger)
        gate = BudgetGate(load_budgets(budgets_file), Limits(pool.base.prices.fx), lambda fn: fn(ledger),
                          first_estimate=price_of_a_question(pool.base.prices, settings))
        made.append((llm, pool, ledger))
        limiter = RateLimiter(lambda fn: fn(ledger)) if rate else None
        return QueryService(lambda: pool, gate, AnswerCache(cache_size) if cache_size else None,
                            settings.data_dir, limiter), llm

    yield build
    for llm, pool, ledger in made:
        pool.close()
        ledger.close()
        llm.__exit__(None, None, None)


def llm_calls(llm):
    return len([r for r in llm.requests if r["path"].endswith("/chat/completions")])


def test_a_repeated_question_is_a_cache_hit_that_calls_no_llm(service_for):
    service, llm = service_for()
    result = service.answer(QueryRequest(Q, user_id="u1"))
    first, route = result.answer, result.route
    again = service.answer(QueryRequest(Q + " ", user_id="u1")).answer
    assert (first["cache_hit"], again["cache_hit"]) == (False, True) and llm_calls(llm) == 1
    assert again["cached_from"] == first["query_id"] == route.query_id and again["total_cost_usd"] == 0.0


def test_over_a_hard_budget_the_query_is_refused_before_it_is_admitted(service_for):
    service, llm = service_for(limit_usd=0.00001)
    admitted = []
    with pytest.raises(OverBudget) as e:
        service.answer(QueryRequest(Q, user_id="u1"), admitted=lambda qid, variant: admitted.append(qid))
    assert e.value.body["budget"] == "user=* day" and e.value.body["estimate_usd"] > 0.00001
    assert admitted == [] and llm_calls(llm) == 0


def test_an_unpriced_models_answer_costs_an_unknown_amount_never_zero(service_for):
    service, llm = service_for(llm_model="house-llm-7b", cache_size=0)
    payload = service.answer(QueryRequest(Q)).answer
    assert llm_calls(llm) == 1 and payload["total_cost_usd"] is None


def test_a_scope_limits_the_citations_to_its_law(service_for):
    service, _ = service_for(cache_size=0)
    payload = service.answer(QueryRequest("董事会由几人组成？", scope=Scope(laws=("公司法",)))).answer
    assert payload["citations"] and {c["title"] for c in payload["citations"]} == {"中华人民共和国公司法"}


INVENTED = "根据《中华人民共和国劳动法》第九百九十九条，用人单位可以随时无理由辞退劳动者且无需支付任何补偿[7]"


def test_every_answer_carries_its_quality_signals(service_for):
    """The audit's cheaper arm: an article that does not exist, a passage never sent."""
    from tests.fakes.openai_server import Reply

    service, llm = service_for(cache_size=0)
    good = service.answer(QueryRequest(Q)).answer
    llm.script = [Reply(content=INVENTED)]
    bad = service.answer(QueryRequest(Q)).answer
    assert set(good["quality"]) == {"groundedness", "invalid_citations", "retrieval_confidence", "refusal", "claims"}
    assert good["quality"]["groundedness"] == 1.0 and good["quality"]["invalid_citations"] == []
    assert [c["supported"] for c in good["quality"]["claims"]] == [True] and good["quality"]["refusal"] is False
    assert bad["quality"]["groundedness"] == 0.0
    assert bad["quality"]["claims"][0]["why"].startswith("cites passage [7], which was not sent"), bad["quality"]
    llm.script = [Reply(content="根据检索到的条文无法确定。")]
    refused = service.answer(QueryRequest("公司法对人工智能有什么规定？")).answer
    assert (refused["quality"]["refusal"], refused["quality"]["groundedness"]) == (True, None)
    assert [c["citation"] for c in bad["quality"]["invalid_citations"]] == ["[7]", "《中华人民共和国劳动法》", "article 999"]
    assert 0 <= good["quality"]["retrieval_confidence"] <= 1


def test_the_quality_signals_are_in_the_ledger_beside_the_cost(service_for, tmp_path):
    from tests.conftest import wait_until
    from tests.fakes.openai_server import Reply

    service, llm = service_for(cache_size=0)
    llm.script = [Reply(content=INVENTED)]
    bad = service.answer(QueryRequest(Q)).answer
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.sqlite")
    try:
        wait_until(lambda: ledger.quality(bad["query_id"]) is not None, "quality rows")
        assert ledger.quality(bad["query_id"]) == bad["quality"]
    finally:
        ledger.close()


def test_reports_show_quality_and_feedback_beside_the_cost(service_for, tmp_path):
    import io

    from rich.console import Console

    from rag_app.present.report_export import write_report
    from tests.conftest import wait_until
    from tests.fakes.openai_server import Reply

    service, llm = service_for(cache_size=0)
    good = service.answer(QueryRequest(Q)).answer
    llm.script = [Reply(content=INVENTED)]
    bad = service.answer(QueryRequest("董事会由几人组成？")).answer
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.sqlite")
    try:
        wait_until(lambda: ledger.quality(bad["query_id"]) is not None, "quality rows")
        ledger.add_feedback(bad["query_id"], "u1", -1, "没有第九百九十九条", "2026-12-01T00:00:00+00:00")
        summary = ledger.quality_summary()
        assert summary == {"scored_answers": 2, "mean_groundedness": 0.5, "invalid_citation_rate": 0.5,
                           "refusals": 0, "refusal_rate": 0.0, "feedback": {"right": 0, "unsure": 0, "wrong": 1},
                           "judge_agreement": None}
        text = io.StringIO()
        write_report(ledger, "table", text, Console(file=text, width=80), last=None, variant=None,
                     prices="original", table_rows=20)
        lines = text.getvalue().splitlines()
        assert "quality: 2 answers scored, groundedness 50%, 50.0% cite what was not sent" in lines
        assert "feedback: 0 right, 0 unsure, 1 wrong" in lines and max(map(len, lines)) <= 80
        assert "refusals: 0 (0.0%), not counted in groundedness" in lines
        js = io.StringIO()
        write_report(ledger, "json", js, Console(file=io.StringIO()), last=None, variant=None, prices="original",
                     table_rows=20)
        assert json.loads(js.getvalue())["quality"] == summary
    finally:
        ledger.close()


def window_of(tmp_path, key):
    """(requests, tokens) in `key`'s rate window now, read from the ledger's rate_events."""
    from tests.fakes.sql_ledger import select_rows

    [(n, tokens)] = select_rows(f"sqlite:///{tmp_path}/ledger.sqlite",
                                "SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM rate_events WHERE key_name = :k", k=key)
    return n, tokens


def test_a_key_reserves_its_ceiling_then_settles_what_the_llm_used(service_for, tmp_path):
    """A tpm key's request reserves its LLM tokens at their ceiling before any work, the next one in the
    same window is refused while that reservation stands, and the real count replaces it at the end."""
    service, llm = service_for(rate=True, cache_size=100, limit_usd=1)
    key = Principal("tk", "tk", "member", tpm=1000)
    first = service.answer(QueryRequest(Q, user_id="tk", key_id="tk", principal=key)).answer
    assert window_of(tmp_path, "tk") == (1, 321 + 45)  # what the fake LLM reported, settled
    hit = service.answer(QueryRequest(Q, user_id="tk", key_id="tk", principal=key)).answer
    assert hit["cache_hit"] and window_of(tmp_path, "tk") == (2, 366)  # a hit counts a request, no token
    with pytest.raises(RateLimited) as e:  # 366 used, and the next one's ceiling reserved...
        service.answer(QueryRequest("董事会由几人组成？", user_id="tk", key_id="tk",
                                    principal=Principal("tk", "tk", "member", tpm=300)))
    assert e.value.body["limit"] == "tpm" and llm_calls(llm) == 1


def test_a_request_refused_by_a_budget_leaves_the_keys_window(service_for, tmp_path):
    service, llm = service_for(rate=True, limit_usd=0.00001)
    key = Principal("bk", "bk", "member", rpm=5, tpm=10**6)
    with pytest.raises(OverBudget):
        service.answer(QueryRequest(Q, user_id="bk", key_id="bk", principal=key))
    assert window_of(tmp_path, "bk") == (0, 0) and llm_calls(llm) == 0


def test_the_ceiling_a_key_reserves_bounds_the_prompt_the_llm_is_sent(indexed):
    """What admission reserves (rag_app/spend/estimate.py question_estimate) is at least the prompt each
    question of the fixture set is sent, at two context budgets: the generate row of an extractive answer
    counts the very prompt an LLM would get, passages and labels included."""
    from rag_app.app import RagApp
    from rag_app.spend.estimate import question_estimate

    questions = [json.loads(line)["question"] for line in
                 (Path(__file__).parents[1] / "fixtures" / "laws_qa.jsonl").read_text(encoding="utf-8").splitlines()]
    for budget in (1000, 3000):
        with RagApp(make_settings(indexed, context_tokens=budget)) as app:
            for q in questions:
                prompt = next(u for u in app.ask(q).usage if u.stage == "generate").input_tokens
                est = question_estimate(q, app.settings, app.prices, use_llm=True)
                ceiling = next(c.input_tokens for c in est.calls if c.stage == "generate")
                assert prompt <= ceiling, (budget, q, prompt, ceiling)
