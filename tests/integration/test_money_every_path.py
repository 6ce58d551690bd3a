"""The audit's scenarios of #45, each replayed with the real query path and a scripted LLM (the local
OpenAI-compatible fake), a faked clock where the price depends on the hour, and a real SQLite ledger. Each
lands within 1% of what the provider would bill (its usage at its published price, computed here by hand)
and a hard budget at most 5% over its limit.

    burst after cache hits         1 live answer, 9 hits, 20 concurrent new questions, $0.002 key budget
    burst after a model switch     gpt-4o-mini history, the variant restarted on gpt-4.1, a variant budget
    judge under an evaluation budget   every answer sampled, a hard evaluation budget; answers never refused
    DeepSeek override without a rule   a dated correction of deepseek-flash, a weekday peak-hour call
    the rewrite lever              its stage in every breakdown, the stages adding up to the bill
    a timeout with output at risk  the cut reply's remaining tokens priced at the row's output rate
    a repriced hit                 a peak-hour hit's saving, then a dearer correction and `rag reprice`

0.9.x measured: +284% and +348% over the budget, 12x the key's budget in judge spend, -50% on peak-hour
calls after an override, 17.6% of spend in no per-stage view, $0 at risk, -40% per repriced hit."""
from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from rag_app.service.pool import VariantPool
from rag_app.service.query_service import QueryRequest, QueryService
from rag_app.spend.answer_cache import AnswerCache
from rag_app.spend.budgets import BudgetGate, Limits, OverBudget, load_budgets
from tests.conftest import HANG_S, index_company_law, make_settings, wait_until
from tests.fakes.openai_server import FakeOpenAI, Held, Reply
from tracing.ledger import Ledger
from tracing.pricing import PriceTable, reprice

Q = "一人有限责任公司是什么？"
QUESTIONS = [f"{q}（第{i}问）" for i in range(40) for q in ("股东会的职权有哪些？",)]
PROMPT, COMPLETION = 2000, 300  # every scripted reply's usage
MINI_CALL = PROMPT * 150 + COMPLETION * 600  # gpt-4o-mini, $0.15 / $0.60 per million: 480,000 nano-$
GPT41_CALL = PROMPT * 2000 + COMPLETION * 8000  # gpt-4.1, $2 / $8 per million: 6,400,000 nano-$


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("money")
    index_company_law(root)
    return root


class Service:
    """The query policy (answer cache, budgets, pipeline) over one ledger, as `rag serve` composes it."""

    def __init__(self, indexed, ledger_path, llm, budgets: list[dict] | None = None, **overrides):
        self.budgets_file = None
        if budgets is not None:
            self.budgets_file = ledger_path.parent / "budgets.json"
            self.budgets_file.write_text(json.dumps({"budgets": budgets}))
        self.settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=self.budgets_file,
                                      ledger_url=f"sqlite:///{ledger_path}", **overrides)
        self.pool = VariantPool(self.settings)
        self.ledger = Ledger.open(self.settings.ledger)
        self.gate = BudgetGate(load_budgets(self.budgets_file), Limits(self.pool.base.prices.fx),
                               lambda fn: fn(self.ledger))
        self.service = QueryService(lambda: self.pool, self.gate, AnswerCache(100), self.settings.data_dir)

    def ask(self, question: str, **who):
        return self.service.answer(QueryRequest(question, **who)).answer

    def landed(self) -> None:
        assert self.pool.base.writer.flush(30)

    def close(self) -> None:
        self.pool.close()
        self.ledger.close()


def spend_nano(ledger_path, where: str = "1 = 1") -> int:
    with Ledger.open(ledger_path) as L, L.engine.connect() as db:
        return int(db.exec_driver_sql("SELECT COALESCE(SUM(s.cost_nano_usd), 0) FROM stage_calls s JOIN queries q "
                                      f"USING (query_id) WHERE {where}").scalar())


def concurrent_burst(svc: Service, llm, questions, **who) -> tuple[int, int]:
    """All `questions` asked at once; every admitted one is held at the LLM until all are decided (none
    finishes early and changes what the others see). (answered, refused)."""
    gate = threading.Event()
    llm.script = [Held(gate, then=reply()) for _ in questions] + llm.script
    start = len(llm.requests)

    def one(q):
        try:
            svc.ask(q, **who)
            return 200
        except OverBudget:
            return 429

    with ThreadPoolExecutor(len(questions)) as pool:
        futures = [pool.submit(one, q) for q in questions]
        wait_until(lambda: sum(f.done() for f in futures) + len(llm.requests) - start >= len(questions),
                   "every question admitted or refused")
        gate.set()
        codes = [f.result() for f in futures]
    return codes.count(200), codes.count(429)


def reply(**kw) -> Reply:
    return Reply(prompt_tokens=PROMPT, completion_tokens=COMPLETION, **kw)


@pytest.fixture
def scripted():
    """The fake answers every request with PROMPT / COMPLETION tokens."""
    with FakeOpenAI() as llm:
        llm.script = [reply() for _ in range(200)]
        yield llm


def test_a_burst_after_cache_hits_stays_within_the_key_budget(indexed, tmp_path, scripted):
    llm, path = scripted, tmp_path / "l.sqlite"
    svc = Service(indexed, path, llm, budgets=[{"key": "*", "period": "day", "limit_usd": 0.002}])
    try:
        assert svc.ask(Q, key_id="k1")["cache_hit"] is False
        assert all(svc.ask(Q, key_id="k1")["cache_hit"] for _ in range(9))  # nine hits: $0 each
        svc.landed()
        answered, refused = concurrent_burst(svc, llm, QUESTIONS[:20], key_id="k1")
        svc.landed()
    finally:
        svc.close()
    calls = len(llm.requests)
    billed = calls * MINI_CALL  # what OpenAI bills: every request at its usage
    assert spend_nano(path, "q.api_key_id = 'k1'") == billed  # the ledger says what the provider bills
    print(f"\n[burst after hits] {answered} answered, {refused} refused: ${billed / 1e9:.6f} of $0.002 "
          f"({billed / 2_000_000 - 1:+.1%})")
    assert billed <= 1.05 * 2_000_000 and answered >= 1 and answered + refused == 20  # 0.9.x: 20 of 20, +284%


def test_a_burst_after_a_model_switch_is_reserved_at_the_new_models_price(indexed, tmp_path, scripted):
    llm, path = scripted, tmp_path / "l.sqlite"
    cheap = Service(indexed, path, llm)
    try:
        for q in QUESTIONS[20:25]:  # the variant's history on gpt-4o-mini, no budget yet
            cheap.ask(q, user_id="u1")
        cheap.landed()
    finally:
        cheap.close()
    before = len(llm.requests)
    dear = Service(indexed, path, llm, budgets=[{"variant": "*", "period": "day", "limit_usd": 0.03}],
                   llm_model="gpt-4.1")  # restarted on a model 13x dearer per token
    try:
        answered, refused = concurrent_burst(dear, llm, QUESTIONS[:20], user_id="u2")
        dear.landed()
    finally:
        dear.close()
    billed = before * MINI_CALL + (len(llm.requests) - before) * GPT41_CALL
    assert spend_nano(path, "q.variant = 'default'") == billed
    print(f"\n[burst after a model switch] {answered} answered: ${billed / 1e9:.5f} of $0.03 ({billed / 3e7 - 1:+.1%})")
    assert billed <= 1.05 * 30_000_000 and answered >= 1  # 0.9.x: at gpt-4o-mini's mean, +348%


def test_the_rewrite_lever_is_in_every_breakdown_and_adds_up_to_the_bill(indexed, tmp_path, scripted):
    llm, path = scripted, tmp_path / "l.sqlite"
    svc = Service(indexed, path, llm, query_rewrite=True)
    try:
        for q in QUESTIONS[:3]:
            svc.ask(q, user_id="u1")
        svc.landed()
    finally:
        svc.close()
    assert len(llm.requests) == 6  # a rewrite and an answer per question
    billed = 6 * MINI_CALL
    with Ledger.open(path) as L:
        totals = L.report().totals
        by_stage = {r["stage"]: r for r in L.by("stage")}
        by_model = {r["model"]: r for r in L.by("model")}
        rows = L.report().queries
    assert round(totals["cost_usd"] * 1e9) == billed  # the provider's bill, to the nano-dollar
    assert round(totals["stages"]["rewrite"]["cost_usd"] * 1e9) == 3 * MINI_CALL  # 50% of it (0.9.x: in none)
    assert round(sum(v["cost_usd"] for v in totals["stages"].values()) * 1e9) == billed
    assert round(by_stage["rewrite"]["cost_usd"] * 1e9) == 3 * MINI_CALL
    assert round(by_model["gpt-4o-mini"]["cost_usd"] * 1e9) == billed and by_model["gpt-4o-mini"]["queries"] == 3
    assert all(round(r["rewrite_cost_usd"] * 1e9) == MINI_CALL for r in rows)


def test_judge_spend_stops_at_its_evaluation_budget_and_every_answer_is_given(indexed, tmp_path):
    """`rag serve` with the judge grading every answer (gpt-4o-mini at 2,000 / 300 tokens: $0.00048 a grading)
    under a hard $0.002 evaluation budget: every one of 8 questions is answered, grading stops at the limit;
    the dashboard's summary, `--by day` and the per-query rows carry the evaluation spend the provider bills."""
    from tests.integration.test_service import Server

    grades = '{"faithfulness": 0.9, "relevance": 0.8, "reason": "cites 第五十七条"}'
    with FakeOpenAI() as llm, FakeOpenAI() as judge:
        llm.script = [reply() for _ in range(20)]
        judge.script = [reply(content=grades) for _ in range(20)]
        budgets = tmp_path / "budgets.json"
        budgets.write_text(json.dumps({"budgets": [{"evaluation": "*", "period": "day", "limit_usd": 0.002,
                                                    "hard": True}]}))
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=budgets, judge_model="gpt-4o-mini",
                                 judge_base_url=judge.base_url, judge_sample=1.0,
                                 ledger_url=f"sqlite:///{tmp_path}/l.sqlite")
        server = Server(settings)
        with server as url:
            pool = server.server.config.app.state.svc.pool
            codes = []
            for q in QUESTIONS[:8]:  # one at a time: each grading decided and landed before the next question
                codes.append(httpx.post(f"{url}/v1/ask", json={"question": q, "user_id": "u1"}, timeout=HANG_S).status_code)
                pool.drain()
            summary = httpx.get(f"{url}/v1/reports/summary").json()
            by_day = httpx.get(f"{url}/v1/reports/by", params={"dim": "day"}).json()["rows"]
            rows = httpx.get(f"{url}/v1/reports/queries", params={"last": 20}).json()["queries"]
            stats = pool.base.judge.stats()
    judged = spend_nano(tmp_path / "l.sqlite", "q.kind = 'judge'")
    answers = spend_nano(tmp_path / "l.sqlite", "q.kind = 'query'")
    print(f"\n[judge under an evaluation budget] 8 answered, {len(judge.requests)} graded, {stats['over_budget']} "
          f"not sampled: ${judged / 1e9:.6f} of $0.002 ({judged / 2e6 - 1:+.1%})")
    assert codes == [200] * 8 and answers == 8 * MINI_CALL  # answers never refused for their grading
    assert judged == len(judge.requests) * MINI_CALL  # the provider's bill for the gradings
    assert judged <= 1.05 * 2_000_000 and stats["over_budget"] >= 1 and len(judge.requests) >= 1
    assert round(summary["evaluation_spend"]["cost_usd"] * 1e9) == judged  # the dashboard's tile
    assert round(sum(r["evaluation_cost_usd"] for r in by_day) * 1e9) == judged
    assert round(sum(r["cost_usd"] + r["evaluation_cost_usd"] for r in by_day) * 1e9) == judged + answers
    assert round(sum(r["evaluation_cost_usd"] or 0 for r in rows) * 1e9) == judged  # the cost-over-time series


def test_a_deepseek_override_without_a_rule_keeps_the_peak_price(tmp_path, monkeypatch):
    """A dated correction of deepseek-flash written like the docs' other examples (figures only): a Friday
    11:00 Beijing call after its date bills twice the corrected figures, as DeepSeek does (0.9.x: -50%)."""
    import rag_app.models.attempts
    from tests.integration.test_usage_shapes import MESSAGES
    from rag_app.config.settings import Settings
    from rag_app.models.llm import build_chat_model, invoke_with_retries
    from tests.fakes.openai_server import USAGE_SHAPES
    from tracing.ledger import LedgerWriter
    from tracing.observe import CostTracer
    from tracing.pricing import LedgerPricer

    monkeypatch.setattr(rag_app.models.attempts, "utcnow", lambda: "2026-12-04T03:00:00.000+00:00")  # Fri 11:00
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"version": "fix-1", "models": {"deepseek/deepseek-flash": {"prices": [
        {"from": "2026-11-30", "input_per_mtok": "0.2", "cache_read_per_mtok": "0.004", "output_per_mtok": "0.8"}]}}}))
    with FakeOpenAI() as fake:
        fake.script = [Reply(usage=USAGE_SHAPES["deepseek"])]  # 1,500 in (1,000 cache hits), 200 out
        settings = Settings(_env_file=None, data_dir=tmp_path, openai_base_url=fake.base_url, openai_api_key="sk",
                            llm_model="deepseek-flash", price_overrides=prices)
        writer = LedgerWriter(tmp_path / "l.sqlite")
        tracer = CostTracer(writer, LedgerPricer(PriceTable.load(prices), provider="deepseek"))
        invoke_with_retries(build_chat_model(settings), MESSAGES, {"callbacks": [tracer], "metadata": {"query_id": "q1"}},
                            max_retries=0, base_delay_s=0)
        writer.close()
    bill = 2 * (500 * 200 + 1000 * 4 + 200 * 800)  # DeepSeek's peak: twice the listed (off-peak) figures
    with Ledger.open(tmp_path / "l.sqlite") as L:
        [row] = [r for r in L.stage_rows("q1") if r["stage"] == "generate"]
    assert (row["cost_nano_usd"], row["price_rule"], row["price_source"]) == (bill, "peak", "override")


def test_a_timeout_prices_the_output_at_risk_at_the_rows_output_rate(tmp_path, monkeypatch):
    """A streamed reply cut by the client's timeout: what arrived is billed, and the rest up to
    RAG_LLM_MAX_TOKENS may still be (0.9.x: `at_risk_usd` $0 while those tokens were 14.5% of a period)."""
    import rag_app.models.attempts
    from tests.integration.test_usage_shapes import MESSAGES
    from rag_app.config.settings import Settings
    from rag_app.core.errors import LLMError
    from rag_app.models.llm import build_chat_model, invoke_with_retries
    from rag_app.models.model_tokens import tokenizer_for
    from tests.fakes.openai_server import CHUNK_CHARS
    from tracing.ledger import LedgerWriter
    from tracing.observe import CostTracer
    from tracing.pricing import LedgerPricer

    monkeypatch.setattr(rag_app.models.attempts, "utcnow", lambda: "2026-11-28T03:00:00.000+00:00")
    cut = Reply(stall_after=2, stall_s=3.0)
    with FakeOpenAI() as fake:
        fake.script = [cut]
        settings = Settings(_env_file=None, data_dir=tmp_path, openai_base_url=fake.base_url, openai_api_key="sk",
                            llm_model="gpt-4o-mini", llm_stream=True, llm_timeout_s=0.8, llm_max_tokens=200)
        writer = LedgerWriter(tmp_path / "l.sqlite")
        tracer = CostTracer(writer, LedgerPricer(PriceTable()), llm_max_tokens=200)
        writer.put("queries", {"query_id": "q1", "kind": "query", "status": "timeout",
                               "started_at": "2026-11-28T03:00:00.000+00:00"})
        with pytest.raises(LLMError):
            invoke_with_retries(build_chat_model(settings), MESSAGES,
                                {"callbacks": [tracer], "metadata": {"query_id": "q1"}}, max_retries=0, base_delay_s=0)
        writer.close()
    arrived = tokenizer_for("gpt-4o-mini").count(cut.content[:2 * CHUNK_CHARS])
    with Ledger.open(tmp_path / "l.sqlite") as L:
        totals = L.report().totals
        [row] = [r for r in L.stage_rows("q1") if r["stage"] == "generate"]
    assert row["output_at_risk_tokens"] == 200 - arrived
    assert row["output_at_risk_nano_usd"] == (200 - arrived) * 600  # gpt-4o-mini's $0.60 per million output
    assert round(totals["at_risk_output_usd"] * 1e9) == (200 - arrived) * 600
    assert totals["at_risk_usd"] == pytest.approx(totals["at_risk_output_usd"] + totals["at_risk_unknown_attempts_usd"])


def test_a_repriced_hit_saves_what_a_live_call_at_its_time_would_bill(indexed, tmp_path, monkeypatch):
    """deepseek-flash: answered on a Saturday (off-peak), then a hit on Friday 11:00 Beijing saves the peak
    price; a dearer correction from 2026-11-30 and `rag reprice` re-price the hit's saving as that live call
    under the new table (0.9.x: never re-priced, -40% per hit), and a hit in a 2027 peak hour, without
    the 2027 holiday calendar, warns as the call would."""
    import rag_app.models.attempts
    import rag_app.service.admission.cache as qs
    from tests.fakes.openai_server import USAGE_SHAPES

    clock = {"now": "2026-11-28T03:00:00.000+00:00"}  # Saturday 11:00 Beijing
    for module in (rag_app.models.attempts, qs):
        monkeypatch.setattr(module, "utcnow", lambda: clock["now"])
    path = tmp_path / "l.sqlite"
    with FakeOpenAI() as llm:
        llm.script = [Reply(usage=USAGE_SHAPES["deepseek"])]  # 1,500 in (1,000 cache hits), 200 out
        svc = Service(indexed, path, llm, llm_model="deepseek-flash")
        try:
            live = svc.ask(Q, user_id="u1")
            clock["now"] = "2026-12-04T03:00:00.000+00:00"  # Friday 11:00 Beijing: peak
            hit = svc.ask(Q, user_id="u1")
            clock["now"] = "2027-01-04T03:00:00.000+00:00"  # Monday 11:00 Beijing, 2027: no calendar yet
            late = svc.ask(Q, user_id="u1")
            svc.landed()
        finally:
            svc.close()
    assert len(llm.requests) == 1 and hit["cache_hit"] and hit["cached_from"] == live["query_id"]
    off_peak = 500 * 150 + 1000 * 3 + 200 * 600  # bundled $0.15 miss / $0.003 hit / $0.60 out: 198,000
    assert round(live["total_cost_usd"] * 1e9) == off_peak
    assert round(hit["saved_cost_usd"] * 1e9) == 2 * off_peak and hit["price_warning"] is None
    assert "no CN holiday calendar for 2027" in late["price_warning"]  # as the call's own row would say
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"version": "fix-1", "models": {"deepseek/deepseek-flash": {"prices": [
        {"from": "2026-11-30", "input_per_mtok": "0.2", "cache_read_per_mtok": "0.004", "output_per_mtok": "0.8"}]}}}))
    corrected_peak = 2 * (500 * 200 + 1000 * 4 + 200 * 800)  # the correction keeps DeepSeek's peak rule
    with Ledger.open(path) as L:
        assert [w["warning"][:40] for w in L.price_warnings() if w.get("hits")] == [late["price_warning"][:40]]
        result = reprice(L, PriceTable.load(prices))
        after = {h["query_id"]: h["saved_now"] for h in L.hit_reprice_candidates()}
        repriced = L.report(prices="repriced").totals
        original = L.report().totals
    assert result.changed == 0  # the live answer ran on Saturday, before the correction's date
    assert (result.savings.hits, result.savings.changed) == (2, 2)
    assert after == {hit["query_id"]: corrected_peak, late["query_id"]: corrected_peak}  # each a live peak call
    assert round(original["saved_cost_usd"] * 1e9) == 2 * 2 * off_peak  # the hits' own figures are kept
    assert round(repriced["saved_cost_usd"] * 1e9) == 2 * corrected_peak  # 0.9.x: 2 x 396,000, -25%
