"""Alerts people receive (rag_app/spend/alerts.py, the thresholds in rag_app/spend/budgets.py): each
threshold once a period per budget whoever admits (a restart, a second replica), JSON or Slack's
{"text": ...}, retried after a 500, never on the query's path; the daily digest once a day, a failed one
sent again. Real SQLite ledgers, real local HTTP receivers."""
from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from rag_app.core.errors import ConfigError
from rag_app.spend.alerts import STALE_PENDING, renderer, send_digests
from rag_app.core.clock import stamp
from rag_app.spend.budgets import BudgetGate, Limits, load_budgets
from rag_app.spend.webhook import Webhook
from tests.conftest import HANG_S
from tests.fakes.serve_proc import serve_env
from tests.fakes.webhook_receiver import WebhookReceiver
from tracing.pricing import FxTable
from tracing.ledger import Ledger, url_for_path

LIMIT_USD = 0.001  # one dollar-millionth short of nothing: 1,000,000 nano-dollars
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def write_budgets(tmp_path, *budgets):
    path = tmp_path / "budgets.json"
    path.write_text(json.dumps({"budgets": list(budgets)}), encoding="utf-8")
    return path


class Spend:
    """Queries and their stage costs written into the ledger file as `rag serve`'s writer would."""

    def __init__(self, path):
        self.path, self.n = path, 0

    def add(self, user: str, nano: int, at: datetime = NOW) -> None:
        self.n += 1
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO queries (query_id, kind, variant, status, started_at, user_id) "
                       "VALUES (?, 'query', 'default', 'ok', ?, ?)", (f"s{self.n}", stamp(at), user))
            db.execute("INSERT INTO stage_calls (query_id, stage, status, cost_nano_usd, started_at) "
                       "VALUES (?, 'generate', 'ok', ?, ?)", (f"s{self.n}", nano, stamp(at)))


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(url_for_path(tmp_path / "l.sqlite")) as L:
        yield L, Spend(tmp_path / "l.sqlite")


def gate(ledger, budgets, hook, now=NOW):
    return BudgetGate(budgets, Limits(FxTable()), lambda fn: fn(ledger), webhook=hook, clock=lambda: now,
                      unpriced="allow")


def hook_for(rx, ledger, fmt="json", **kw):
    return Webhook(rx.url, ledger.set_budget_webhook, backoff_s=0.01, render=renderer(fmt), **kw)


def test_each_threshold_is_sent_once_a_period_whoever_admits(tmp_path, ledger):
    L, spend = ledger
    budgets = load_budgets(write_budgets(tmp_path, {"user": "*", "period": "day", "limit_usd": LIMIT_USD,
                                                    "hard": False, "alert_at": [0.5, 0.8, 1.0]}))
    rx = WebhookReceiver(refusals=())
    replicas = [gate(L, budgets, hook_for(rx, L)) for _ in range(2)]  # two replicas, or before and after a restart
    sent = []
    for step, nano in enumerate([300_000, 250_000, 100_000, 200_000, 150_000, 50_000]):  # 30% .. 105%
        spend.add("u1", nano)
        for i in range(3):
            replicas[(step + i) % 2].admit(f"q{step}-{i}", {"user": "u1", "variant": "default"})
        for g in replicas:
            g.webhook.wait()
        sent.append(sorted(str(e.get("threshold", e["kind"])) for e in rx.events[len(sum(sent, [])):]))
    # 30%: nothing; 55%: 50%; 65%: nothing new; 85%: 80%; 100%: the 100% alert and the soft limit's event
    assert sent == [[], ["0.5"], [], ["0.8"], ["1.0", "soft"], []]
    alert = next(e for e in rx.events if e.get("threshold") == 0.8)
    assert alert["kind"] == "alert" and alert["value"] == "u1" and alert["spend_usd"] == pytest.approx(0.00085)
    assert spend.n and [e["webhook"] for e in L.budget_events(stamp(NOW - timedelta(days=1)))] == ["sent"] * 4
    # the next day is a new period: its thresholds are sent again
    tomorrow = gate(L, budgets, hook_for(rx, L), now=NOW + timedelta(days=1))
    spend.add("u1", 600_000, at=NOW + timedelta(days=1))
    tomorrow.admit("t1", {"user": "u1", "variant": "default"})
    tomorrow.webhook.wait()
    assert [e.get("threshold") for e in rx.events[4:]] == [0.5]
    rx.close()


def test_slack_format_posts_text_and_a_500_is_retried(tmp_path, ledger):
    L, spend = ledger
    budgets = load_budgets(write_budgets(tmp_path, {"user": "a<b", "period": "month", "limit_usd": LIMIT_USD,
                                                    "alert_at": 0.8}))
    rx = WebhookReceiver(refusals=(500,))
    g = gate(L, budgets, hook_for(rx, L, "slack"))
    spend.add("a<b", 850_000)
    g.admit("q1", {"user": "a<b", "variant": "default"})
    g.webhook.wait()
    assert rx.calls == 2 and len(rx.events) == 1  # the 500 was retried, and delivered once
    [body] = rx.events
    assert list(body) == ["text"]
    assert body["text"] == ("Budget `user=a&lt;b month`: user *a&lt;b* reached 80% of its limit "
                            "($0.00085 of $0.001 spent since 2026-12-01)")
    assert L.budget_events(stamp(NOW - timedelta(days=31)))[0]["webhook"] == "sent"
    rx.close()


def test_a_dead_receiver_is_never_on_the_querys_path(tmp_path, ledger):
    """The receiver accepts the connection and never answers: admit() returns with the alert booked and
    its delivery unresolved (ordering, not a stopwatch), and the next admission does the same."""
    L, spend = ledger
    budgets = load_budgets(write_budgets(tmp_path, {"user": "*", "period": "day", "limit_usd": LIMIT_USD,
                                                    "hard": False, "alert_at": [0.5, 0.8]}))
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead.listen(8)  # connections wait in the backlog: no answer ever comes
    hook = Webhook(f"http://127.0.0.1:{dead.getsockname()[1]}/", L.set_budget_webhook, tries=1, timeout_s=60,
                   deadline_s=60)
    g = gate(L, budgets, hook)
    spend.add("u1", 600_000)
    g.admit("q1", {"user": "u1", "variant": "default"})
    spend.add("u1", 300_000)
    g.admit("q2", {"user": "u1", "variant": "default"})
    assert (hook.sent, hook.failed) == (0, 0)  # both admissions done while the first delivery still hangs
    events = L.budget_events(stamp(NOW - timedelta(days=1)))
    assert [(e["kind"], e["webhook"]) for e in events] == [("alert@0.8", "pending"), ("alert@0.5", "pending")]
    dead.close()


def test_the_daily_digest_is_sent_once_a_day_and_a_failed_one_again(tmp_path, ledger):
    L, spend = ledger
    budgets = load_budgets(write_budgets(
        tmp_path, {"user": "*", "period": "month", "limit_usd": LIMIT_USD},
        {"variant": "default", "period": "day", "limit_usd": 1, "hard": False}))
    spend.add("u1", 400_000, at=NOW - timedelta(days=2))
    spend.add("u1", 100_000, at=NOW - timedelta(hours=2))
    spend.add("u2", 50_000, at=NOW - timedelta(hours=1))
    rx = WebhookReceiver(refusals=(500,) * 4)  # the first run's digests fail, all their tries
    hook = hook_for(rx, L, tries=2)
    first = send_digests(L, budgets, Limits(FxTable()), hook, NOW)
    hook.wait()
    assert all(event_id for _, event_id in first) and hook.failed == 2 and not rx.events
    for hours, expected in ((1, 2), (2, 0), (24, 2)):  # later today: sent again; then nothing; tomorrow: again
        hook = hook_for(rx, L)
        again = send_digests(L, budgets, Limits(FxTable()), hook, NOW + timedelta(hours=hours))
        hook.wait()
        assert sum(event_id is not None for _, event_id in again) == expected == hook.sent
    users, variant = rx.events[:2]
    assert users["budget"] == "user=* month" and users["spend_usd"] == pytest.approx(0.00055)
    assert [(w["value"], w["spend_usd"], w["last_24h_usd"]) for w in users["who"]] == [
        ("u1", pytest.approx(0.0005), pytest.approx(0.0001)), ("u2", pytest.approx(0.00005), pytest.approx(0.00005))]
    assert variant["budget"] == "variant=default day" and variant["who"][0]["spend_usd"] == pytest.approx(0.00015)
    text = renderer("slack")(users)["text"]
    assert text.splitlines()[0].startswith("Daily spend, budget `user=* month`: $0.00055 this month")
    assert "• u1: $0.0005 (50%), $0.0001 in 24 h, 2 queries" in text
    rx.close()


def test_a_digest_pending_in_another_run_is_not_sent_twice_unless_that_run_died(tmp_path, ledger):
    L, _ = ledger
    budgets = load_budgets(write_budgets(tmp_path, {"user": "*", "period": "day", "limit_usd": 1}))
    rx = WebhookReceiver(refusals=())
    idle = Webhook(rx.url)  # a run that booked its digest and has not sent it yet
    assert send_digests(L, budgets, Limits(FxTable()), _Held(idle), NOW)[0][1] is not None
    hook = hook_for(rx, L)
    assert send_digests(L, budgets, Limits(FxTable()), hook, NOW + timedelta(minutes=1))[0][1] is None
    later = NOW + STALE_PENDING + timedelta(minutes=1)
    assert send_digests(L, budgets, Limits(FxTable()), hook, later)[0][1] is not None  # that run died
    hook.wait()
    assert len(rx.events) == 1
    rx.close()


class _Held:
    """A webhook whose events are never sent (the run holding them died)."""

    def __init__(self, hook):
        self.hook = hook

    def send(self, event_id, event):
        pass


@pytest.mark.parametrize("alert_at", [[], [0.5, 2], "0.8", [True], 0])
def test_a_bad_alert_at_is_one_line_naming_the_field(tmp_path, alert_at):
    path = write_budgets(tmp_path, {"user": "*", "period": "day", "limit_usd": 1, "alert_at": alert_at})
    with pytest.raises(ConfigError, match=r"budgets\[0\]\.alert_at: fractions of the limit") as e:
        load_budgets(path)
    assert "\n" not in str(e.value)


def test_alert_at_takes_one_fraction_or_a_list():
    from rag_app.spend.budgets import _thresholds

    assert _thresholds("x", 0.8) == (0.8,) and _thresholds("x", [1, 0.5, 0.8, 0.5]) == (0.5, 0.8, 1.0)
    assert _thresholds("x", None) == ()


def test_rag_budgets_digest_sends_then_says_already_sent(tmp_path):
    rx = WebhookReceiver(refusals=())
    budgets = write_budgets(tmp_path, {"user": "*", "period": "day", "limit_usd": 1})
    env = serve_env(tmp_path / "data", None, RAG_BUDGETS_FILE=str(budgets), RAG_ALERT_WEBHOOK=rx.url,
                    RAG_ALERT_FORMAT="slack")
    runs = [subprocess.run([sys.executable, "-m", "rag_app.cli.main", "budgets", "--digest"], env=env,
                           capture_output=True, text=True, timeout=HANG_S) for _ in range(2)]
    rx.close()
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout.splitlines() == ["digest user=* day: sent"]
    assert runs[1].stdout.splitlines() == ["digest user=* day: already sent today"]
    assert len(rx.events) == 1 and rx.events[0]["text"].endswith("• no spend this period")


@pytest.mark.parametrize("env, says", [({"RAG_ALERT_FORMAT": "teams"}, "RAG_ALERT_FORMAT"),
                                       ({}, "--digest sends to RAG_ALERT_WEBHOOK, which is not set")])
def test_bad_alert_settings_stop_with_one_line(tmp_path, env, says):
    budgets = write_budgets(tmp_path, {"user": "*", "period": "day", "limit_usd": 1})
    r = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "budgets", "--digest"], capture_output=True,
                       text=True, timeout=HANG_S,
                       env=serve_env(tmp_path / "data", None, RAG_BUDGETS_FILE=str(budgets), **env))
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
