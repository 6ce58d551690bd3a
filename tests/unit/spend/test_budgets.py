"""Budget rules (rag_app/spend/budgets.py): periods, CNY limits at the dated rate, the table."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from rag_app.core.errors import ConfigError
from rag_app.spend.budgets import Limits, load_budgets, period_bounds, render_status
from tests.conftest import HANG_S
from tests.fakes.serve_proc import serve_env
from tracing.pricing import FxTable


def test_periods_are_utc_days_and_months():
    now = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert period_bounds("day", now) == (datetime(2026, 12, 31, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert period_bounds("month", now) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert period_bounds("month", datetime(2026, 2, 10, tzinfo=UTC))[1] == datetime(2026, 3, 1, tzinfo=UTC)


def test_a_cny_limit_uses_the_rate_in_force_when_the_period_began(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"budgets": [{"user": "*", "period": "month", "limit_cny": 70.5}]}))
    [b] = load_budgets(path)
    fx = FxTable.parse({"CNY": [{"from": "2026-01-01", "per_usd": "7.05"}, {"from": "2026-12-15", "per_usd": "7.5"}]})
    limits = Limits(fx)
    limits.check([b], path)
    nano, label = limits.nano(b, datetime(2026, 12, 1, tzinfo=UTC))
    assert nano == 10 * 10**9 and "7.05 CNY/USD (2026-01-01" in label  # ¥70.5 at 7.05: $10, not at 7.5
    assert limits.nano(b, datetime(2027, 1, 1, tzinfo=UTC))[0] == int(Decimal("70.5") / Decimal("7.5") * 10**9)
    with pytest.raises(ConfigError, match="no CNY/USD rate"):
        Limits(FxTable()).check([b], path)


def test_the_table_fits_80_columns_and_marks_unknown_spend():
    rows = [{"budget": "user=* month", "value": "a-very-long-user-name-indeed", "hard": False, "limit_usd": 12345.0,
             "spend_usd": 1234.5678, "spend_known": False, "used": 0.1, "unpriced_calls": 3, "resets_in_s": 200_000}]
    out = render_status(rows).splitlines()
    assert max(map(len, out)) <= 80 and "+?" in out[1] and "~$12,345.00" in out[1] and "$1,234.57+?" in out[1] and "2d 7h" in out[1]
    assert any("unknown" in line for line in out) and any("soft" in line for line in out)
    assert "10%+" in out[1]  # at least 10% used: the unpriced calls' part is unknown, not 0
    long = render_status([{**rows[0], "budget": "variant=unpriced-model day"}]).splitlines()
    # a name too long for its column is a key spelled out below the table, never cut
    assert long[1].startswith("B1 ") and " W1 " in long[1] and max(map(len, long)) <= 80
    assert long[2:4] == ["B1 = variant=unpriced-model day", "W1 = a-very-long-user-name-indeed"]


def test_rag_serve_refuses_a_bad_budgets_file_with_one_line(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"budgets": [{"user": "*", "period": "day", "limit_usd": "five"}]}))
    r = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "serve", "--port", "1"], capture_output=True, text=True,
                       env=serve_env(tmp_path / "data", None, RAG_BUDGETS_FILE=str(path)), timeout=HANG_S)
    assert r.returncode == 2 and "budgets[0].limit_usd" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_usage_past_ten_times_the_limit_still_fits_its_column():
    row = {"budget": "user=* day", "value": "u1", "hard": True, "limit_usd": 0.00001, "spend_usd": 0.0489,
           "spend_known": True, "used": 4890.0, "unpriced_calls": 0, "resets_in_s": 3600}
    out = render_status([row, {**row, "used": 12.3}]).splitlines()
    assert max(map(len, out)) <= 80 and " >999x " in out[1] and " 12x " in out[2]


@pytest.mark.parametrize("nano, shown", [(960_000, "$0.00096"), (10_000, "$0.00001"), (489_750, "$0.0004898"),
                                         (1_500_000_000, "$1.50")])
def test_refusals_show_money_to_four_significant_digits(nano, shown):
    from rag_app.spend.budgets import _usd

    assert _usd(nano) == shown


def _gate(tmp_path, limit_usd, **kw):
    from rag_app.spend.budgets import BudgetGate
    from tracing.ledger import Ledger, url_for_path

    path = tmp_path / "b.json"
    path.write_text(json.dumps({"budgets": [{"user": "*", "period": "day", "limit_usd": limit_usd}]}))
    budgets = load_budgets(path)
    ledger = Ledger.open(url_for_path(tmp_path / "l.sqlite"))
    return BudgetGate(budgets, Limits(FxTable()), lambda fn: fn(ledger), **kw), ledger


def test_on_a_fresh_ledger_each_query_counts_its_price_so_a_burst_stops_at_the_limit(tmp_path):
    """No history: the estimate is the question's price; a limit of 5.5 questions admits 5, not 20."""
    from rag_app.spend.budgets import OverBudget

    price = 100_000  # nano-$ per question
    gate, ledger = _gate(tmp_path, 5.5 * price / 1e9, first_estimate=lambda q: price)
    admitted = refused = 0
    for i in range(20):  # none has finished: each admitted one is in flight at its estimate
        try:
            gate.admit(f"q{i}", {"user": "u1", "variant": "default"}, "工资被拖欠怎么办")
            admitted += 1
        except OverBudget as e:
            refused += 1
            assert e.body["estimate_usd"] == pytest.approx(price / 1e9) and "may cost $0.0001" in e.body["detail"]
    ledger.close()
    assert (admitted, refused) == (5, 15)


@pytest.mark.parametrize("policy", ["closed", "open"])
def test_admission_with_the_ledger_down_follows_the_setting(tmp_path, policy):
    from rag_app.spend.budgets import BudgetGate, LedgerDown
    from tracing.ledger import LedgerUnavailable

    path = tmp_path / "b.json"
    path.write_text(json.dumps({"budgets": [{"user": "*", "period": "day", "limit_usd": 1}]}))

    def down(fn):
        raise LedgerUnavailable("ledger postgresql://db/ledger unreachable")

    gate = BudgetGate(load_budgets(path), Limits(FxTable()), down, ledger_down=policy)
    if policy == "closed":
        with pytest.raises(LedgerDown, match="RAG_BUDGET_LEDGER_DOWN=closed"):
            gate.admit("q1", {"user": "u1"})
    else:
        gate.admit("q1", {"user": "u1"})
        assert gate.admitted_unchecked == 1
    with pytest.raises(ZeroDivisionError):  # a bug is a bug, under either setting: never admitted unchecked
        BudgetGate(load_budgets(path), Limits(FxTable()), lambda fn: 1 / 0, ledger_down="open").admit("q2", {"user": "u"})


@pytest.mark.parametrize("policy", ["block", "allow"])
def test_an_unpriced_models_first_query_is_unknown_spend_from_the_first_call(tmp_path, policy):
    from rag_app.spend.budgets import OverBudget

    gate, ledger = _gate(tmp_path, 100.0, first_estimate=lambda q: None, unpriced=policy)
    try:
        if policy == "block":
            with pytest.raises(OverBudget) as e:
                gate.admit("q1", {"user": "u1", "variant": "default"}, "问题")
            assert "no price" in e.value.body["detail"] and e.value.body["estimate_usd"] is None
        else:
            gate.admit("q1", {"user": "u1", "variant": "default"}, "问题")
    finally:
        ledger.close()


NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # a fixed clock: every admission in one UTC day


def _land(ledger, query_id: str, cost_nano: int | None, user: str = "u1") -> None:
    """What the writer commits when a query ends (its row and its generate row), folded into the totals."""
    from sqlalchemy import insert

    from rag_app.core.clock import stamp
    from tracing.ledger.schema import queries, stage_calls

    at = stamp(NOW)
    with ledger.engine.begin() as db:
        db.execute(insert(queries).values(query_id=query_id, kind="query", status="ok", user_id=user,
                                          variant="default", started_at=at, ended_at=at))
        db.execute(insert(stage_calls).values(query_id=query_id, stage="generate", status="ok", model="m",
                                              cost_nano_usd=cost_nano, started_at=at,
                                              price_source="unpriced" if cost_nano is None else "override"))
    ledger.fold_backlog()


def _ask(gate, query_id: str) -> bool:
    from rag_app.spend.budgets import OverBudget

    try:
        gate.admit(query_id, {"user": "u1", "variant": "default"}, "问题")
        return True
    except OverBudget:
        return False


def test_under_allow_unpriced_calls_count_at_the_assumed_price_in_flight_and_landed(tmp_path):
    """RAG_BUDGET_UNPRICED=allow, RAG_BUDGET_UNPRICED_ASSUME_USD=0.01, a $0.05 hard limit, an unpriced model:
    5 queries in all, whether they are in flight or have landed (0.7.0: every one, the spend unknown)."""
    assume = 10_000_000  # $0.01
    gate, ledger = _gate(tmp_path, 0.05, first_estimate=lambda q: None, unpriced="allow",
                         unpriced_assume_nano=assume, clock=lambda: NOW)
    try:
        assert [_ask(gate, f"q{i}") for i in range(3)] == [True, True, True]  # in flight at $0.01 each
        for i in range(3):
            _land(ledger, f"q{i}", None)  # landed unpriced: still $0.01 each, no longer in flight
        assert [_ask(gate, f"q{i}") for i in range(3, 8)] == [True, True, False, False, False]
        from rag_app.spend.budgets import OverBudget

        with pytest.raises(OverBudget) as e:
            gate.admit("q9", {"user": "u1", "variant": "default"}, "问题")
        body = e.value.body
        assert body["unpriced_calls"] == 3 and body["unpriced_assumed_usd"] == pytest.approx(0.03)
        assert "3 unpriced call(s) at RAG_BUDGET_UNPRICED_ASSUME_USD" in body["detail"]
        assert body["estimate_usd"] == pytest.approx(0.01) and not body["spend_known"]
    finally:
        ledger.close()


def test_under_block_an_unpriced_model_is_refused_from_its_first_call_after_priced_history(tmp_path):
    """The variant's past queries were priced (their mean is an estimate), but its model has no price now:
    the first call to it is refused, not admitted at the old mean."""
    gate, ledger = _gate(tmp_path, 100.0, first_estimate=lambda q: None, unpriced="block", clock=lambda: NOW)
    try:
        _land(ledger, "q0", 50_000)
        assert not _ask(gate, "q1")
        priced_now, again = _gate(tmp_path, 100.0, first_estimate=lambda q: 60_000, unpriced="block",
                                  clock=lambda: NOW)
        assert _ask(priced_now, "q2")  # the same history, a priced model: admitted
        again.close()
    finally:
        ledger.close()


@pytest.mark.parametrize("env, says", [
    ({"RAG_BUDGET_UNPRICED": "allow"}, "RAG_BUDGET_UNPRICED=allow needs RAG_BUDGET_UNPRICED_ASSUME_USD"),
    ({"RAG_BUDGET_UNPRICED": "allow", "RAG_BUDGET_UNPRICED_ASSUME_USD": "free"}, "not 'free'"),
    ({"RAG_BUDGET_UNPRICED_ASSUME_USD": "-0.01"}, "a positive dollar amount"),
])
def test_unbounded_unpriced_spend_stops_start_up_with_one_line(tmp_path, env, says):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"budgets": [{"user": "*", "period": "day", "limit_usd": 1}]}))
    r = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "budgets"], capture_output=True, text=True,
                       env=serve_env(tmp_path / "data", None, RAG_BUDGETS_FILE=str(path), **env), timeout=HANG_S)
    assert r.returncode != 0 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_budgets_file_nested_100000_deep_is_one_line(tmp_path):
    """#46 N7: the JSON parser's recursion limit was a 49-line traceback from `rag serve` and `rag budgets`."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    for cmd in (["budgets"], ["serve", "--port", "1"]):
        r = subprocess.run([sys.executable, "-m", "rag_app.cli.main", *cmd], capture_output=True, text=True,
                           env=serve_env(tmp_path / "data", None, RAG_BUDGETS_FILE=str(path)), timeout=HANG_S)
        assert r.returncode == 2 and "RAG_BUDGETS_FILE" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
