"""The sequence itself (rag_app/service/admission/__init__.py): its order, and what a refusal undoes."""
from __future__ import annotations

import pytest

from rag_app.service.admission import QueryResult, steps, walk
from rag_app.spend.budgets import BudgetGate, Limits


class Step:
    def __init__(self, name, log, refuse=False, begin=False, answer=False):
        self.name, self.log, self.refuse, self.begin, self.answer = name, log, refuse, begin, answer

    def enter(self, ctx):
        self.log.append(f"enter {self.name}")
        ctx.began = ctx.began or self.begin
        if self.refuse:
            raise PermissionError(self.name)
        if self.answer:
            ctx.result = QueryResult({"answer": self.name}, ctx.route, cache_hit=False)

    def undo(self, ctx):
        self.log.append(f"undo {self.name}")


def test_the_declared_order(app):
    names = [s.name for s in steps(BudgetGate([], Limits(app.prices.fx), lambda fn: None), None, None)]
    assert names == ["models", "rate", "cache", "budget", "run", "settle"]


def test_a_refusal_undoes_the_steps_passed_latest_first_and_goes_out_unchanged(ctx):
    log = []
    with pytest.raises(PermissionError, match="budget"):
        walk([Step("rate", log), Step("cache", log), Step("budget", log, refuse=True), Step("run", log)], ctx())
    assert log == ["enter rate", "enter cache", "enter budget", "undo cache", "undo rate"]


def test_a_failure_once_begun_undoes_nothing(ctx):
    log = []
    with pytest.raises(PermissionError):
        walk([Step("rate", log), Step("run", log, refuse=True, begin=True)], ctx())
    assert log == ["enter rate", "enter run"]


def test_every_step_runs_and_the_result_comes_back(ctx):
    log = []
    r = walk([Step("rate", log), Step("run", log, answer=True), Step("settle", log)], ctx())
    assert r.answer["answer"] == "run" and log == ["enter rate", "enter run", "enter settle"]
    with pytest.raises(RuntimeError, match="without an answer"):
        walk([Step("rate", [])], ctx())
