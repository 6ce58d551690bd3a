"""Alerts people receive at RAG_ALERT_WEBHOOK: budget events and ramp roll backs, POSTed as the JSON event
itself (RAG_ALERT_FORMAT=json) or as a Slack-compatible incoming-webhook message, {"text": ...}
(RAG_ALERT_FORMAT=slack); and the daily spend digest, one message per budget per UTC day
(`rag budgets --digest`, run from cron).

What was sent is what the ledger's `budget_events` rows say. A threshold's alert (rag_app/spend/budgets.py)
and a day's digest are written under the budget lock every replica takes, before they are sent: a
restart, a second replica or a second cron run finds the row and sends nothing again. A digest whose
delivery failed, or that was lost with its process while pending, is sent by the next run that day.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from rag_app.core import usd_json
from rag_app.core import stamp
from rag_app.spend.budgets import Budget, Limits, _left, _money, period_bounds
from rag_app.spend.webhook import Webhook
from tracing.ledger import Ledger
from tracing.ledger import BudgetTx

DIGEST = "digest"  # the budget_events kind of a digest
DIGEST_TOP = 10  # the keys, users or variants a "*" budget's digest names: the biggest spenders
STALE_PENDING = timedelta(minutes=10)  # a digest still pending after this died with its run: send it again


def alert_webhook(settings: Any, ledger: Callable[[Callable[[Ledger], Any]], Any]) -> Webhook | None:
    """RAG_ALERT_WEBHOOK as `rag serve` and `rag ask` send budget events to (None: unset), each delivery's
    outcome marked on its event row through `ledger`."""
    if not settings.alert_webhook:
        return None
    return Webhook(settings.alert_webhook, lambda event_id, status: ledger(lambda L: L.set_budget_webhook(event_id, status)),
                   deadline_s=settings.alert_webhook_deadline_s, render=renderer(settings.alert_format))


def renderer(fmt: str) -> Callable[[dict], dict]:
    """The body POSTed for an event in RAG_ALERT_FORMAT `fmt`."""
    return slack_payload if fmt == "slack" else _as_is


def _as_is(event: dict) -> dict:
    return event


def slack_payload(event: dict) -> dict:
    """An incoming webhook's message: Slack (and Mattermost, Rocket.Chat) show `text`."""
    return {"text": message(event)}


def message(event: dict) -> str:
    """An event in words, for people (Slack's mrkdwn: &, < and > escaped)."""
    if event.get("event") == "experiment.rolled_back":
        return (f"Experiment *{_esc(event['experiment'])}* rolled back from {event['from_pct']}% to "
                f"{event['to_pct']}%: {_esc(event['reason'])}")
    kind = event.get("kind")
    if kind == DIGEST:
        return _digest_text(event)
    if kind not in ("alert", "soft", "hard"):
        return _esc(json.dumps(event, ensure_ascii=False))
    who = f"{event['dim']} *{_esc(event['value'])}*"
    spent = f"{_money(event['spend_usd'])} of {_money(event['limit_usd'])} spent since {event['period_start'][:10]}"
    unknown = (f"; {event['unpriced_calls']} unpriced call(s): spend partly unknown"
               if event["unpriced_calls"] else "")
    what = {"alert": f"reached {event.get('threshold', 0):.0%} of its limit",
            "soft": "is over its soft limit",
            "hard": "is refused: its limit is reached"}[kind]
    return f"Budget `{_esc(event['budget'])}`: {who} {what} ({spent}{unknown})"


def _digest_text(d: dict) -> str:
    head = (f"Daily spend, budget `{_esc(d['budget'])}`: {_money(d['spend_usd'])} this {d['period']} "
            f"({_money(d['last_24h_usd'])} in the last 24 h), limit {_money(d['limit_usd'])}"
            f"{' each' if d['value'] == '*' else ''}{'' if d['hard'] else ' (soft)'}, "
            f"resets in {_left(d['resets_in_s'])}")
    lines = [head] + [f"• {_esc(w['value'])}: {_money(w['spend_usd'])} ({w['used']:.0%}), "
                      f"{_money(w['last_24h_usd'])} in 24 h, {w['queries']} queries"
                      + (f", {w['unpriced_calls']} unpriced" if w["unpriced_calls"] else "") for w in d["who"]]
    if d["more"]:
        lines.append(f"• and {d['more']} more")
    if not d["who"]:
        lines.append("• no spend this period")
    return "\n".join(lines)


def _esc(text: Any) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def digest(ledger: Ledger, b: Budget, limits: Limits, now: datetime) -> tuple[dict, dict]:
    """(the digest as sent, its budget_events row): the period's spend so far and the last 24 hours',
    per key, user or variant (the DIGEST_TOP biggest spenders of a "*" budget)."""
    start, reset = period_bounds(b.period, now)
    limit, _ = limits.nano(b, start)
    one = None if b.value == "*" else b.value
    period = ledger.budget_spend(b.dim, stamp(start), one)
    day = ledger.budget_spend(b.dim, stamp(now - timedelta(days=1)), one)
    ranked = sorted(period.items(), key=lambda kv: (-kv[1]["priced_nano_usd"], kv[0]))
    total = sum(s["priced_nano_usd"] for s in period.values())
    unpriced = sum(s["unpriced_calls"] for s in period.values())
    who = [{"value": v, "spend_usd": usd_json(s["priced_nano_usd"]), "used": round(s["priced_nano_usd"] / limit, 4),
            "last_24h_usd": usd_json(day.get(v, {}).get("priced_nano_usd", 0)), "queries": s["queries"],
            "unpriced_calls": s["unpriced_calls"]} for v, s in ranked[:DIGEST_TOP]]
    at = stamp(now)
    event = {"event": "budget.digest", "kind": DIGEST, "at": at, "budget": b.label, "dim": b.dim, "value": b.value,
             "period": b.period, "hard": b.hard, "period_start": stamp(start), "reset_at": stamp(reset),
             "resets_in_s": int((reset - now).total_seconds()), "limit_usd": usd_json(limit),
             "spend_usd": usd_json(total), "last_24h_usd": usd_json(sum(s["priced_nano_usd"] for s in day.values())),
             "unpriced_calls": unpriced, "spend_known": unpriced == 0, "who": who,
             "more": max(0, len(ranked) - DIGEST_TOP)}
    row = {"at": at, "budget": b.label, "dim": b.dim, "value": b.value, "kind": DIGEST, "period_start": stamp(start),
           "spend_nano_usd": total, "limit_nano_usd": limit, "unpriced_calls": unpriced, "webhook": "pending"}
    return event, row


def claim(tx: BudgetTx, row: dict, now: datetime) -> int | None:
    """Today's digest of this budget, written as pending (its id), or None: sent today already, or being
    sent by another run (pending for less than STALE_PENDING)."""
    last = tx.last_event(row["budget"], row["value"], DIGEST)
    day_start = stamp(period_bounds("day", now)[0])
    if last is not None and last["at"] >= day_start and (
            last["webhook"] == "sent" or last["webhook"] == "pending" and last["at"] >= stamp(now - STALE_PENDING)):
        return None
    return tx.add_event(row)


def send_digests(ledger: Ledger, budgets: list[Budget], limits: Limits, hook: Webhook,
                 now: datetime) -> list[tuple[Budget, int | None]]:
    """Queues today's digest of each budget on `hook` unless one was sent; (budget, its event id or None).
    The caller waits for the hook (`hook.wait()`), which marks each row sent or failed."""
    out = []
    for b in budgets:
        event, row = digest(ledger, b, limits, now)
        event_id = ledger.budget_tx(lambda tx: claim(tx, row, now))
        if event_id is not None:
            hook.send(event_id, event)
        out.append((b, event_id))
    return out
