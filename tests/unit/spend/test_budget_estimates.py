"""What a query reserves under a hard budget (#45 item 1) and evaluation budgets (item 2), on a real ledger.

The reservation is never below the price of a question on the model it will call (rag_app/spend/estimate.py)
and learns only from live queries on that model of the key, user or variant the budget is on: a history of
answer-cache hits ($0 each) or of a cheaper model no longer lets a burst through. 0.9.x: 1 live answer and 9
hits, then 20 concurrent questions under a $0.002 key budget: 20 admitted, +284%."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from prompts import load_prompt
from rag_app.config.settings import Settings
from rag_app.models.model_tokens import tokenizer_for
from rag_app.spend.budgets import BudgetGate, Limits, OverBudget, load_budgets
from rag_app.spend.estimate import (ANSWER_OVERHEAD_TOKENS, JUDGE_OVERHEAD_TOKENS, REWRITE_OVERHEAD_TOKENS,
                                    grading_estimate, question_estimate)
from tracing.ledger import Ledger, LedgerWriter
from tracing.pricing import FxTable, PriceTable

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
DAY = "2026-11-20"
Q = "一人有限责任公司是什么？"
MINI = (1250 + ANSWER_OVERHEAD_TOKENS + len(Q)) * 150 + 512 * 600  # gpt-4o-mini: $0.15 in, $0.60 out, nano-$


def settings(**kw) -> Settings:
    return Settings(_env_file=None, openai_base_url="http://127.0.0.1:9/v1", **kw)


@pytest.mark.parametrize("model", ["gpt-4o-mini", "deepseek-flash", "qwen-plus", "gpt-4.1"])
def test_the_overheads_bound_the_shipped_prompts_in_each_tokenizer(model):
    tok = tokenizer_for(model)
    for name, bound, extra in (("answer", ANSWER_OVERHEAD_TOKENS, 10 * 20), ("rewrite", REWRITE_OVERHEAD_TOKENS, 0),
                               ("judge", JUDGE_OVERHEAD_TOKENS, 0)):
        p = load_prompt(name, "v1")
        empty = tok.count_messages(p.format_messages(**{v: "" for v in p.input_variables}))
        assert empty + extra <= bound, (name, model, empty)  # + ten passage labels for the answer


def test_the_price_of_a_question_is_its_largest_bill_on_the_variants_model():
    t = PriceTable()
    est = question_estimate(Q, settings(), t, at=NOW)
    assert (est.model, est.input_tokens, est.output_tokens, est.cost_nano) == (
        "gpt-4o-mini", 1250 + ANSWER_OVERHEAD_TOKENS + len(Q), 512, MINI)
    rewrite = question_estimate(Q, settings(query_rewrite=True), t, at=NOW)  # one more call, the rewrite's
    assert [c.stage for c in rewrite.calls] == ["rewrite", "generate"]
    assert rewrite.cost_nano == MINI + (REWRITE_OVERHEAD_TOKENS + len(Q)) * 150 + 128 * 600
    dear = question_estimate(Q, settings(llm_model="gpt-4.1"), t, at=NOW)  # $2 in, $8 out
    assert dear.cost_nano == (1250 + ANSWER_OVERHEAD_TOKENS + len(Q)) * 2000 + 512 * 8000
    peak = question_estimate(Q, settings(llm_model="deepseek-flash"), t, at="2026-11-20T03:00:00Z")  # Fri 11:00
    off = question_estimate(Q, settings(llm_model="deepseek-flash"), t, at="2026-11-21T03:00:00Z")  # Sat
    assert peak.cost_nano == 2 * off.cost_nano
    assert question_estimate(Q, settings(llm_model="house-llm"), t).cost_nano is None  # unpriced, never $0
    assert question_estimate(Q, Settings(_env_file=None, llm_mode="extractive"), t).tokens == 0
    judge = grading_estimate(Q, "答" * 100, "文" * 500, settings(judge_model="gpt-4o-mini"), t, at=NOW)
    assert judge.cost_nano == (JUDGE_OVERHEAD_TOKENS + len(Q) + 600) * 150 + 300 * 600


def write_history(path, rows) -> None:
    """(query id, key, model, cost nano-$ or None for a cache hit) queries of today."""
    w = LedgerWriter(path)
    for i, (qid, key, model, cost) in enumerate(rows):
        q = {"query_id": qid, "kind": "query", "status": "ok", "variant": "default", "api_key_id": key,
             "started_at": f"{DAY}T0{i // 60}:{i % 60:02d}:00.000+00:00", "origin": "live"}
        if cost is None:  # an answer-cache hit: nothing billed
            w.put("queries", {**q, "origin": "cache", "cache_hit": 1, "saved_cost_nano_usd": 300_000})
            continue
        w.put("queries", q)
        w.put("stage_calls", {"query_id": qid, "stage": "generate", "status": "ok", "model": model,
                              "started_at": q["started_at"], "cost_nano_usd": cost, "price_source": "genai-prices"})
    assert w.flush(30)
    w.close()


def gate_over(tmp_path, budgets: list[dict]) -> tuple[BudgetGate, Ledger]:
    f = tmp_path / "b.json"
    f.write_text(json.dumps({"budgets": budgets}))
    ledger = Ledger.open(tmp_path / "l.sqlite")
    return BudgetGate(load_budgets(f), Limits(FxTable()), lambda fn: fn(ledger), clock=lambda: NOW), ledger


def burst(gate, n, estimate, who) -> int:
    """`n` questions admitted one after another with none landing (all in flight at once): how many got in."""
    admitted = 0
    for i in range(n):
        try:
            gate.admit(f"new{i}", who, Q, estimate=estimate)
            admitted += 1
        except OverBudget:
            pass
    return admitted


def test_a_history_of_cache_hits_never_lowers_the_reservation(tmp_path):
    write_history(tmp_path / "l.sqlite", [("live", "k1", "gpt-4o-mini", 384_000)]
                  + [(f"hit{i}", "k1", None, None) for i in range(9)])
    gate, ledger = gate_over(tmp_path, [{"key": "*", "period": "day", "limit_usd": 0.002}])
    est = question_estimate(Q, settings(), PriceTable(), at=NOW)
    with ledger:
        admitted = burst(gate, 20, est, {"key": "k1", "user": None, "variant": "default"})
    # $0.002 - $0.000384 spent leaves room for 2 questions at their price ($0.000557 each), never 20
    assert admitted == (2_000_000 - 384_000) // est.cost_nano == 2
    assert 384_000 + admitted * 384_000 <= 2_000_000  # each costing what the live one did: under the limit


def test_a_model_switch_is_reserved_at_the_new_models_price(tmp_path):
    write_history(tmp_path / "l.sqlite", [(f"old{i}", "k1", "gpt-4o-mini", 80_000) for i in range(20)])
    gate, ledger = gate_over(tmp_path, [{"key": "k1", "period": "day", "limit_usd": 0.05}])
    dear = question_estimate(Q, settings(llm_model="gpt-4.1"), PriceTable(), at=NOW)
    with ledger:
        admitted = burst(gate, 20, dear, {"key": "k1", "user": None, "variant": "default"})
    assert admitted == (50_000_000 - 20 * 80_000) // dear.cost_nano  # 0.9.x: at gpt-4o-mini's mean, 20 of 20


def test_a_keys_own_dearer_history_on_the_model_raises_its_reservation(tmp_path):
    write_history(tmp_path / "l.sqlite", [(f"k1-{i}", "k1", "gpt-4o-mini", 3 * MINI) for i in range(5)]
                  + [(f"k2-{i}", "k2", "gpt-4o-mini", MINI // 4) for i in range(5)]
                  + [(f"k1-other{i}", "k1", "gpt-4.1", 50 * MINI) for i in range(3)]
                  + [(f"k1-hit{i}", "k1", None, None) for i in range(5)])  # hits, $0: not answers on the model
    gate, ledger = gate_over(tmp_path, [{"key": "*", "period": "month", "limit_usd": 1.0}])
    est = question_estimate(Q, settings(), PriceTable(), at=NOW)
    with ledger:
        gate.admit("a", {"key": "k1", "user": None, "variant": "default"}, Q, estimate=est)
        gate.admit("b", {"key": "k2", "user": None, "variant": "default"}, Q, estimate=est)
        reserved = dict(ledger.engine.connect().exec_driver_sql(
            "SELECT query_id, estimate_nano_usd FROM budget_reservations").fetchall())
    # k1's retried answers on gpt-4o-mini cost 3 questions' price: reserved at that; its gpt-4.1 history is
    # another model's; k2's cheap history never lowers the floor
    assert reserved == {"a": 3 * MINI, "b": MINI}


def test_an_evaluation_budget_stops_grading_never_an_answer(tmp_path):
    gate, ledger = gate_over(tmp_path, [
        {"evaluation": "*", "period": "day", "limit_usd": 0.013, "hard": True, "alert_at": 0.5},
        {"user": "*", "period": "day", "limit_usd": 100}])
    w = LedgerWriter(tmp_path / "l.sqlite")
    for i in range(2):  # two gradings so far today, $0.004 each
        run = {"query_id": f"judge:q{i}", "started_at": f"{DAY}T01:0{i}:00.000+00:00", "variant": "default"}
        w.put("queries", {**run, "kind": "judge", "status": "ok", "origin": "judge"})
        w.put("stage_calls", {**run, "stage": "judge", "status": "ok", "model": "gpt-4.1", "cost_nano_usd": 4_000_000,
                              "price_source": "genai-prices"})
    assert w.flush(30)
    w.close()
    with ledger:
        # reserved at the gradings' mean so far ($0.004, above this one's estimate): $0.008 + 0.004 fits
        assert gate.admit_evaluation("judge:q2", "default", 1_500_000)
        assert not gate.admit_evaluation("judge:q3", "v2", 1_500_000)  # the one in flight counts: refused
        # the grading's reservation is not a query's: the user budget's in-flight figure ignores it
        gate.admit("q9", {"key": None, "user": "u1", "variant": "default"}, Q, estimate=None)
        flight = ledger.budget_tx(lambda tx: (tx.in_flight("variant", "default", DAY), tx.in_flight("evaluation", "*", DAY)))
        assert flight == ((1, 0), (1, 4_000_000))  # q9 is the variant's; judge:q2 is evaluation's alone
        events = sorted(e["kind"] for e in ledger.budget_events("2026-11-01", 10))
        status = {r["budget"]: r for r in __import__("rag_app.spend.budgets", fromlist=["x"]).budget_status(
            ledger, gate.budgets, gate.limits, NOW)}
    assert events == ["alert@0.5", "hard"]
    assert status["evaluation=* day"]["spend_usd"] == pytest.approx(0.008) and status["evaluation=* day"]["value"] == "*"


def test_an_evaluation_budget_names_a_variant_or_everything(tmp_path):
    f = tmp_path / "b.json"
    f.write_text(json.dumps({"budgets": [{"evaluation": "*", "period": "week", "limit_cny": 70, "hard": False},
                                         {"evaluation": "v2", "period": "day", "limit_usd": 1}]}))
    pooled, v2 = load_budgets(f)
    assert (pooled.label, pooled.hard, pooled.currency) == ("evaluation=* week", False, "CNY")
    assert pooled.applies({"evaluation": "v1"}) == "*" and v2.applies({"evaluation": "v1"}) is None
    assert v2.applies({"evaluation": "v2"}) == "v2" and v2.applies({"user": "u1"}) is None
