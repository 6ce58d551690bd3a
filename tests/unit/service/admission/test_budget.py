"""The `budget` step alone, on a real BudgetGate over the app's ledger: a hard budget refuses before any
spend (nothing reserved), a question within it is reserved under its key, user and variant, and a cache
hit passes whatever the budget."""
from __future__ import annotations

import json

import pytest

from rag_app.access.keys import Principal
from rag_app.service.admission import AdmitBudget, QueryRequest, QueryResult, key_budget
from rag_app.spend.budgets import BudgetGate, Limits, OverBudget, load_budgets
from tests.unit.service.admission.conftest import rows


@pytest.fixture
def gate(app, ledger, tmp_path):
    def build(*budgets: dict) -> BudgetGate:
        path = tmp_path / "budgets.json"
        path.write_text(json.dumps({"budgets": list(budgets)}))
        return BudgetGate.from_settings(load_budgets(path), Limits(app.prices.fx), lambda fn: fn(ledger),
                                        app.settings, app.prices)
    return build


def reserved(app, user):
    return rows(app, "SELECT api_key_id, user_id, variant FROM budget_reservations WHERE user_id = :u", u=user)


def test_a_spent_hard_budget_refuses_naming_itself_and_reserves_nothing(app, ctx, gate):
    step = AdmitBudget(gate({"user": "ann", "period": "day", "limit_usd": 0.00001, "hard": True}))
    c = ctx(QueryRequest("q", user_id="ann", key_id="cli"))
    with pytest.raises(OverBudget) as e:
        step.enter(c)
    assert e.value.body["budget"] == "user=ann day" and e.value.body["estimate_usd"] > 0.00001
    assert str(e.value).startswith("budget user=ann day for user 'ann' exhausted: ")
    assert reserved(app, "ann") == []


def test_a_question_within_the_budget_is_reserved_under_its_key_user_and_variant(app, ctx, gate):
    step = AdmitBudget(gate({"key": "cli", "period": "day", "limit_usd": 5}))
    step.enter(ctx(QueryRequest("q", user_id="bob", key_id="cli")))
    assert reserved(app, "bob") == [("cli", "bob", "default")]


def test_a_keys_own_budget_binds_too(app, ctx, gate):
    key = Principal("kb", "kb", "member", budget_nano_usd=10_000, budget_period="day")
    assert [b.label for b in key_budget(key)] == ["key=kb day"] and key_budget(Principal("x", None, "admin")) == ()
    with pytest.raises(OverBudget, match="budget key=kb day"):
        AdmitBudget(gate()).enter(ctx(QueryRequest("q", user_id="kb", key_id="kb", principal=key)))


def test_a_cache_hit_spends_nothing_so_passes_a_spent_budget(app, ctx, gate):
    step = AdmitBudget(gate({"user": "cat", "period": "day", "limit_usd": 0.00001}))
    c = ctx(QueryRequest("q", user_id="cat"))
    c.result = QueryResult({"answer": "cached"}, c.route, cache_hit=True)
    step.enter(c)
    assert reserved(app, "cat") == []
