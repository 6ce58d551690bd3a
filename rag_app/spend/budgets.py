"""Budgets per API key, user and variant (RAG_BUDGETS_FILE), enforced at every front door: `rag serve`
and `rag ask` (the key `cli`).

    {"budgets": [{"key": "*", "period": "day", "limit_usd": 5.0, "hard": true, "alert_at": [0.5, 0.8, 1.0]}]}

Each entry names what it limits with exactly one of `key` (the 12-hex id the ledger records for a bearer
token), `user` (the request's user_id), `variant`, or `evaluation` (what grading answers costs: the judge's
calls, RAG_JUDGE_MODEL); "*" means each key, user or variant separately, and for `evaluation` all of it
together (a variant's name: the gradings of that variant's answers). `limit_usd` or
`limit_cny` (converted at the price table's dated rate in force when the period began), `period` day, week
or month (UTC: a day resets at 00:00 UTC, a week on Monday, a month on the 1st), `hard` (default true: over
it, 429; for `evaluation`, no more answers are sampled for grading until the period resets: an answer is
never refused for its grading), `alert_at` (fractions of the limit, one or a list: the period's spend
reaching one raises an alert, once per period for each key, user or variant; a jump past several at once
raises the highest).

Spend is what the ledger holds (every replica reads the same rows): billed stage costs of the queries
started in the period (of the judge runs, for `evaluation`); unpriced calls are unknown, never $0
(RAG_BUDGET_UNPRICED decides whether a hard budget lets queries past while its spend is unknown). A cache
hit bills nothing, so it spends nothing.

What a query reserves while it runs (its estimate) is never below the price of a question on the model it
will call (rag_app/spend/estimate.py: its prompt at the passages' token budget, RAG_LLM_MAX_TOKENS of
output, a rewrite call when that lever is on, at the price in force now), and is the mean cost of the
latest 20 live queries on that model of the key, user or variant the budget is on when that is more (a
cache hit, $0, never lowers it; a model switched to since is not judged by the old model's history). So a
burst of concurrent questions, after a history of hits or a switch to a dearer model, spends at most the
limit plus what one admitted query cost beyond its estimate. Under RAG_BUDGET_UNPRICED=allow each unpriced
call counts at RAG_BUDGET_UNPRICED_ASSUME_USD (unpriced spend is bounded, never free); under `block` a
query to an unpriced model is refused from the first call. When the ledger cannot be read,
RAG_BUDGET_LEDGER_DOWN decides: `closed` (the default) refuses with 503 (and grades nothing), `open` admits
and logs it.
Events (alert, soft, hard) are rows in `budget_events`, each POSTed to RAG_ALERT_WEBHOOK by a background
thread with retries: a slow or dead webhook never holds a query.
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from rag_app.core import stamp
from rag_app.core import ConfigError
from rag_app.core import usd_json
from rag_app.spend.webhook import Webhook
from tracing.pricing import FxTable
from tracing.ledger import Ledger, LedgerUnavailable, is_transient
from rag_app.spend.estimate import QuestionEstimate, question_estimate
from tracing.ledger import DIMS, EVALUATION, BudgetTx

log = logging.getLogger(__name__)
NANO = Decimal(10**9)
PERIODS = ("day", "week", "month")
RESERVATION_TTL = timedelta(minutes=10)  # an admitted query whose row never lands stops counting after this
PRUNE_EVERY = timedelta(hours=1)
FIELDS = {"key", "user", "variant", "evaluation", "period", "limit_usd", "limit_cny", "hard", "alert_at"}


@dataclass(frozen=True)
class Budget:
    dim: str  # key | user | variant | evaluation
    value: str  # "*" (each one separately; for evaluation: all of it together) or one name
    period: str  # day | week | month
    limit: Decimal  # in `currency`
    currency: str  # USD | CNY
    hard: bool
    alert_at: tuple[float, ...]  # ascending fractions of the limit; () = no alert

    @property
    def label(self) -> str:
        return f"{self.dim}={self.value} {self.period}"

    def applies(self, who: dict[str, str | None]) -> str | None:
        """The key, user or variant of this request this budget counts (None: not this request's); for an
        evaluation budget, "*" (all grading together) or the graded variant it is on."""
        if self.dim not in who:
            return None
        v = who.get(self.dim)
        if self.dim == EVALUATION and self.value == "*":
            return "*"
        return v if v is not None and self.value in ("*", v) else None


class OverBudget(Exception):
    def __init__(self, body: dict[str, Any], retry_after_s: int):
        super().__init__(body["detail"])
        self.body, self.retry_after_s = body, retry_after_s


def load_budgets(path: Path | None) -> list[Budget]:
    """Parse and validate RAG_BUDGETS_FILE; a mistake is one ConfigError line naming the file and field."""
    if path is None:
        return []
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"RAG_BUDGETS_FILE {path}: cannot read it ({e.strerror or e}); fix the path") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"RAG_BUDGETS_FILE {path}: not valid JSON ({e}); see docs/spend-control.md") from None
    except RecursionError:  # [[[[... 100,000 deep: the parser's stack, not a traceback
        raise ConfigError(f"RAG_BUDGETS_FILE {path}: nested too deep to be a budgets file; "
                          'expected {"budgets": [...]}, see docs/spend-control.md') from None
    if not isinstance(data, dict) or not isinstance(data.get("budgets"), list):
        raise ConfigError(f'RAG_BUDGETS_FILE {path}: expected {{"budgets": [...]}}; see docs/spend-control.md')
    return [_budget(path, i, item) for i, item in enumerate(data["budgets"])]


def _budget(path: Path, i: int, item: Any) -> Budget:
    where = f"RAG_BUDGETS_FILE {path}: budgets[{i}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: each budget is an object such as "
                          '{"key": "*", "period": "day", "limit_usd": 5.0}')
    unknown = sorted(set(item) - FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}; fields are {', '.join(sorted(FIELDS))}")
    dims = [d for d in DIMS if d in item]
    if len(dims) != 1:
        raise ConfigError(f"{where}: name exactly one of key, user, variant (\"*\": each one separately) or "
                          "evaluation (\"*\": all grading together)")
    value = item[dims[0]]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{dims[0]}: a name or \"*\", not {value!r}")
    period = item.get("period")
    if period not in PERIODS:
        raise ConfigError(f"{where}.period: day, week or month, not {period!r}")
    limits = [f for f in ("limit_usd", "limit_cny") if f in item]
    if len(limits) != 1:
        raise ConfigError(f"{where}: give exactly one of limit_usd or limit_cny")
    raw = item[limits[0]]
    try:
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise InvalidOperation
        limit = Decimal(str(raw))
        if not limit.is_finite() or limit <= 0:
            raise InvalidOperation
    except InvalidOperation:
        raise ConfigError(f"{where}.{limits[0]}: a positive amount such as 5.0, not {raw!r}") from None
    hard = item.get("hard", True)
    if not isinstance(hard, bool):
        raise ConfigError(f"{where}.hard: true or false, not {hard!r}")
    return Budget(dims[0], value, period, limit, "USD" if limits[0] == "limit_usd" else "CNY", hard,
                  _thresholds(where, item.get("alert_at")))


def _thresholds(where: str, raw: Any) -> tuple[float, ...]:
    """`alert_at`: one fraction of the limit or a list of them (0.8, [0.5, 0.8, 1.0])."""
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    if not items or any(isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1 for t in items):
        raise ConfigError(f"{where}.alert_at: fractions of the limit in (0, 1] such as 0.8 or [0.5, 0.8, 1.0], "
                          f"not {raw!r}")
    return tuple(sorted({float(t) for t in items}))


def alert_kind(threshold: float) -> str:
    """The event kind of one threshold's alert ("alert@0.8"): the ledger knows which were sent this period."""
    return f"alert@{threshold:g}"


def crossed(thresholds: tuple[float, ...], spent: int, limit: int) -> float | None:
    """The highest threshold the spend has reached (None: none yet)."""
    return max((t for t in thresholds if spent >= t * limit), default=None)


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """(start, reset) of the UTC day, week (Monday to Monday) or month `now` is in."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day, day + timedelta(days=1)
    if period == "week":
        monday = day - timedelta(days=day.weekday())
        return monday, monday + timedelta(days=7)
    start = day.replace(day=1)
    return start, (start.replace(year=start.year + 1, month=1) if start.month == 12
                   else start.replace(month=start.month + 1))


class Limits:
    """A budget's limit in nano-dollars for a period: CNY at the dated rate in force when it began."""

    def __init__(self, fx: FxTable):
        self.fx = fx

    def check(self, budgets: list[Budget], path: Path | None) -> None:
        for b in budgets:
            if b.currency != "USD" and not self.fx.rates.get(b.currency):
                raise ConfigError(f"RAG_BUDGETS_FILE {path}: {b.label} is in {b.currency} but the price table "
                                  f"has no {b.currency}/USD rate; add one under \"fx\" in RAG_PRICE_OVERRIDES "
                                  "or use limit_usd")

    def nano(self, b: Budget, period_start: datetime) -> tuple[int, str | None]:
        if b.currency == "USD":
            return int(b.limit * NANO), None
        rate, _ = self.fx.rate_at(b.currency, period_start)
        assert rate is not None  # check() refused the file at start-up otherwise
        return int(b.limit / rate.per_usd * NANO), rate.label()


def price_of_a_question(prices: Any, settings: Any) -> Callable[[str], int | None]:
    """The price of one question on `settings`' model now (rag_app/spend/estimate.py): None when the model
    is unpriced; 0 without an LLM."""
    return lambda question: question_estimate(question, settings, prices).cost_nano


def evaluation_admission(gate: "BudgetGate", settings: Any, prices: Any) -> Callable[[Any], bool] | None:
    """What the judge's worker asks before grading an answer (a rag_app.quality.judge.JudgeJob): whether
    the evaluation budgets let one more grading through, at its estimate (rag_app/spend/estimate.py). None
    when no budget is on evaluation: every sampled answer is graded."""
    if not any(b.dim == EVALUATION for b in gate.budgets):
        return None
    from rag_app.core import judge_run_id
    from rag_app.query import format_context
    from rag_app.spend.estimate import grading_estimate

    def admit(job: Any) -> bool:
        est = grading_estimate(job.question, job.answer, format_context(list(job.contexts)), settings, prices)
        return gate.admit_evaluation(judge_run_id(job.query_id), job.variant, est.cost_nano, est.model)
    return admit


def unpriced_assumption(settings: Any) -> int | None:
    """RAG_BUDGET_UNPRICED_ASSUME_USD in nano-dollars (checked positive by the settings), or None."""
    from rag_app.core import positive_usd, to_nano

    return to_nano(positive_usd(settings.budget_unpriced_assume_usd))


def ledger_unreadable(e: BaseException) -> bool:
    """The ledger is down, frozen or unreachable (the service's reader answers 503), not a bug or a refusal."""
    return getattr(e, "status_code", None) == 503 or isinstance(e, LedgerUnavailable) or is_transient(e)


class LedgerDown(Exception):
    """The ledger could not be read to admit a query, and RAG_BUDGET_LEDGER_DOWN=closed: a 503."""


class BudgetGate:
    """Admits a query against every budget that applies to it, or raises OverBudget (the 429)."""

    def __init__(self, budgets: list[Budget], limits: Limits, ledger: Callable[[Callable[[Ledger], Any]], Any],
                 unpriced: str = "block", webhook: Webhook | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 first_estimate: Callable[[str], int | None] | None = None,
                 ledger_down: str = "closed", unpriced_assume_nano: int | None = None):
        self.budgets, self.limits, self.ledger, self.unpriced = budgets, limits, ledger, unpriced
        self.webhook, self.clock, self.first_estimate, self.ledger_down = webhook, clock, first_estimate, ledger_down
        # under RAG_BUDGET_UNPRICED=allow, what each unpriced call counts at against a hard limit
        # (RAG_BUDGET_UNPRICED_ASSUME_USD): unpriced spend is bounded, never free
        self.assume = unpriced_assume_nano if unpriced == "allow" else None
        self._pruned_at: datetime | None = None
        self.admitted_unchecked = 0  # queries let through while the ledger was down (ledger_down=open)

    @classmethod
    def from_settings(cls, budgets: list[Budget], limits: Limits, ledger: Callable[[Callable[[Ledger], Any]], Any],
                      settings: Any, prices: Any, webhook: Webhook | None = None) -> BudgetGate:
        """The gate as every front door admits with it (`rag serve`, `rag ask`): RAG_BUDGET_UNPRICED,
        RAG_BUDGET_LEDGER_DOWN, RAG_BUDGET_UNPRICED_ASSUME_USD, and the price of a question on the
        settings' model as the estimate of a question that brings none."""
        return cls(budgets, limits, ledger, settings.budget_unpriced, webhook,
                   first_estimate=price_of_a_question(prices, settings), ledger_down=settings.budget_ledger_down,
                   unpriced_assume_nano=unpriced_assumption(settings))

    def admit(self, query_id: str, who: dict[str, str | None], question: str = "",
              extra: tuple[Budget, ...] = (), estimate: QuestionEstimate | None = None) -> None:
        """Admit a query against every budget that applies to it; `extra`: budgets of its own (an issued
        key's budget, rag_app/access/keys.py), counted exactly like the file's. `estimate`: the price of this
        question on the model its variant calls (rag_app/spend/estimate.py; None: the gate's own
        `first_estimate`, on the service's default model)."""
        applicable = [(b, v) for b in (*self.budgets, *extra) if (v := b.applies(who)) is not None]
        if not applicable:
            return
        if estimate is not None:
            price, model = estimate.cost_nano, estimate.model
        else:
            price, model = (self.first_estimate(question) if self.first_estimate is not None else 0), None
        self._guarded(query_id, who, applicable, price, model)

    def admit_evaluation(self, run_id: str, variant: str | None, estimate_nano: int | None,
                         model: str | None = None) -> bool:
        """Whether one more answer may be graded (its judge run `run_id`, grading an answer of `variant`,
        estimated at `estimate_nano`) under the evaluation budgets: False when a hard one is spent (the answer
        is simply not graded; the event is recorded once a period, as a query's refusal is). Never raises:
        grading is off the answer path. A ledger that cannot be read grades nothing under
        RAG_BUDGET_LEDGER_DOWN=closed."""
        who: dict[str, str | None] = {EVALUATION: variant or ""}
        applicable = [(b, v) for b in self.budgets if (v := b.applies(who)) is not None]
        if not applicable:
            return True
        try:
            self._guarded(run_id, who, applicable, estimate_nano, model)
        except OverBudget as e:
            log.info("grading of %s not sampled: %s", run_id, e.body["detail"])
            return False
        except LedgerDown as e:
            log.warning("grading of %s skipped: %s", run_id, e)
            return False
        except Exception:  # a grading is never worth a fault on the answer path's thread
            log.exception("evaluation budget check failed for %s; not graded", run_id)
            return False
        return True

    def _guarded(self, query_id: str, who: dict[str, str | None], applicable: list[tuple[Budget, str]],
                 price: int | None, model: str | None) -> None:
        try:
            self._admit(query_id, who, applicable, price, model)
        except Exception as e:
            if not ledger_unreadable(e):
                raise
            if self.ledger_down == "open":
                self.admitted_unchecked += 1
                log.error("budget admission could not read the ledger (%s): query %s admitted unchecked "
                          "(RAG_BUDGET_LEDGER_DOWN=open)", getattr(e, "detail", e), query_id)
                return
            raise LedgerDown(f"budgets cannot be checked: {getattr(e, 'detail', e)}; queries under a budget "
                             "are refused while the ledger is down (RAG_BUDGET_LEDGER_DOWN=closed; "
                             "`open` admits them unchecked)") from e

    def _admit(self, query_id: str, who: dict[str, str | None], applicable: list[tuple[Budget, str]],
               price: int | None, model: str | None) -> None:
        now = self.clock()
        # `price`: this question at the price of the model it will call (None: that model is unpriced, so is
        # this query), computed before the lock
        mine_unknown = price is None and self.assume is None  # RAG_BUDGET_UNPRICED decides

        def estimate(tx: BudgetTx, b: Budget, value: str) -> int:
            if price is None:  # however cheap the past queries were, this one has no price
                return self.assume or 0
            # never below the price of a question on this model; more when this key's, user's or variant's
            # latest live queries on it cost more on average (retries, longer prompts than the budget says)
            return max(price, tx.estimate(b.dim, value, model))

        def decide(tx: BudgetTx) -> tuple[dict | None, list[tuple[int, dict]]]:
            refusal: dict | None = None
            events: list[dict] = []
            mines = {(b.label, value): estimate(tx, b, value) for b, value in applicable}
            reserved = max(mines.values())  # one reservation counts against every budget it is under
            for b, value in applicable:
                mine = mines[(b.label, value)]  # this query's own cost counts: a limit of 5.5 queries admits 5
                start, reset = period_bounds(b.period, now)
                limit, fx = self.limits.nano(b, start)
                spent, n_flight, flight = tx.headroom(b.dim, value, stamp(start),
                                                      stamp(max(start, now - RESERVATION_TTL)))
                priced, unpriced = spent["priced_nano_usd"], spent["unpriced_calls"]
                assumed = unpriced * (self.assume or 0)  # allow: each unpriced call at the assumed price
                base = {"budget": b.label, "dim": b.dim, "value": value, "period_start": stamp(start),
                        "limit_nano_usd": limit, "unpriced_calls": unpriced}
                threshold = crossed(b.alert_at, priced, limit)
                if threshold is not None:  # each threshold once a period: the rows are the record every replica reads
                    last = tx.last_event_at(b.label, value, alert_kind(threshold))
                    if last is None or last < stamp(start):
                        events.append({**base, "kind": alert_kind(threshold), "spend_nano_usd": priced})
                known = priced + assumed + flight
                over = known >= limit or known + mine > limit
                unknown = (unpriced > 0 or mine_unknown) and self.unpriced == "block"
                if b.hard and (over or unknown):
                    if refusal is None:
                        refusal = _refusal(b, value, limit, fx, priced, flight, n_flight, unpriced, reset, now, over,
                                           mine, mine_unknown, assumed)
                    last = tx.last_event_at(b.label, value, "hard")
                    if last is None or last < stamp(start):
                        events.append({**base, "kind": "hard", "spend_nano_usd": priced})
                elif not b.hard and priced >= limit:
                    last = tx.last_event_at(b.label, value, "soft")
                    if last is None or last < stamp(start):
                        events.append({**base, "kind": "soft", "spend_nano_usd": priced})
            written = []
            for e in events:
                row = {**e, "at": stamp(now), "webhook": "pending" if self.webhook else "none"}
                written.append((tx.add_event(row), row))
            if refusal is None:
                tx.reserve(query_id, who.get("key"), who.get("user"), who.get("variant", who.get(EVALUATION)),
                           reserved, stamp(now))
            return refusal, written

        refusal, written = self.ledger(lambda L: L.budget_tx(decide))
        if self._pruned_at is None or now - self._pruned_at > PRUNE_EVERY:
            self._pruned_at = now  # reservations older than the TTL count for nothing: history, dropped hourly
            try:
                self.ledger(lambda L: L.prune_budget_reservations(stamp(now - 2 * RESERVATION_TTL)))
            except Exception as e:  # a later admission tries again; nothing depends on it
                log.warning("pruning budget reservations failed: %s", e)
        if self.webhook is not None:
            for event_id, row in written:
                self.webhook.send(event_id, event_json(row))
        if refusal is not None:
            raise OverBudget(refusal, refusal["retry_after_s"])


def _refusal(b: Budget, value: str, limit: int, fx: str | None, priced: int, flight: int, n_flight: int,
             unpriced: int, reset: datetime, now: datetime, over: bool, mine: int, mine_unknown: bool = False,
             assumed: int = 0) -> dict:
    why = (f"spent {_usd(priced)} of {_usd(limit)}"
           + (f" (+{_usd(assumed)} for {unpriced} unpriced call(s) at RAG_BUDGET_UNPRICED_ASSUME_USD)" if assumed else "")
           + (f" (+{_usd(flight)} in flight)" if flight else "")
           + (f"; this query may cost {_usd(mine)}" if mine else "")
           if over else f"{unpriced} unpriced call(s) this {b.period}: spend unknown (RAG_BUDGET_UNPRICED=block)"
           if unpriced else "this query's model has no price, so its cost is unknown (RAG_BUDGET_UNPRICED=block; "
                            "price it in RAG_PRICE_OVERRIDES)")
    return {"detail": f"budget {b.label} for {b.dim} {value!r} exhausted: {why}; resets at {stamp(reset)}",
            "type": "budget_exceeded", "budget": b.label, "dim": b.dim, "value": value, "period": b.period,
            "limit_usd": usd_json(limit), "spend_usd": usd_json(priced), "in_flight_usd": usd_json(flight),
            "in_flight_queries": n_flight, "estimate_usd": None if mine_unknown else usd_json(mine),
            "unpriced_calls": unpriced, "spend_known": unpriced == 0,
            **({"unpriced_assumed_usd": usd_json(assumed)} if assumed else {}),
            **({"limit_cny": float(b.limit), "fx": fx} if b.currency == "CNY" else {}),
            "reset_at": stamp(reset), "retry_after_s": max(1, int((reset - now).total_seconds()) + 1)}


def _usd(nano: int) -> str:
    """Dollars for a person: four significant digits under $1 ($0.00096, never "$0.001"; $0.00001,
    never "$0"), cents above."""
    d = Decimal(nano) / NANO
    if d >= 1 or not d:
        return _money(float(d))
    places = max(2, 3 - d.adjusted())  # adjusted(): the exponent of the first significant digit
    return "$" + f"{d.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP):f}".rstrip("0").rstrip(".")


def event_json(row: dict) -> dict:
    """A budget event as the webhook receives it and GET /v1/budgets lists it."""
    kind, _, threshold = row["kind"].partition("@")  # "alert@0.8": the alert at 80% of the limit
    return {"at": row["at"], "kind": kind, **({"threshold": float(threshold)} if threshold else {}),
            "budget": row["budget"], "dim": row["dim"], "value": row["value"],
            "period_start": row["period_start"], "spend_usd": usd_json(row["spend_nano_usd"]),
            "limit_usd": usd_json(row["limit_nano_usd"]), "unpriced_calls": row["unpriced_calls"],
            "webhook": row.get("webhook")}


def budget_status(ledger: Ledger, budgets: list[Budget], limits: Limits,
                  now: datetime | None = None, who: dict[str, str | None] | None = None) -> list[dict]:
    """Each budget's limit, spend, unpriced calls and time to reset; a "*" budget once per key, user or
    variant that spent in the period. What `rag budgets` prints and GET /v1/budgets returns. `who`
    ({"key": name, "user": id}, a member's): only the budgets that bind it, each read for it alone, so
    its cost does not grow with the number of keys and users."""
    now = now or datetime.now(UTC)
    out = []
    for b in budgets:
        value = None if b.value == "*" else b.value
        if who is not None:
            value = b.applies(who)
            if value is None:
                continue
        start, reset = period_bounds(b.period, now)
        limit, fx = limits.nano(b, start)
        pooled = b.dim == EVALUATION and b.value == "*"  # all grading together, one row even before any spend
        asked = "*" if pooled else value
        rows = ledger.budget_spend(b.dim, stamp(start), asked)
        if asked is not None and not rows:
            rows = {asked: {"priced_nano_usd": 0, "unpriced_calls": 0, "queries": 0}}
        for value, s in sorted(rows.items(), key=lambda kv: (-kv[1]["priced_nano_usd"], kv[0])):
            out.append({"budget": b.label, "dim": b.dim, "value": value, "period": b.period, "hard": b.hard,
                        "alert_at": list(b.alert_at), "limit_usd": usd_json(limit),
                        **({"limit_cny": float(b.limit), "fx": fx} if b.currency == "CNY" else {}),
                        "spend_usd": usd_json(s["priced_nano_usd"]), "spend_known": s["unpriced_calls"] == 0,
                        "unpriced_calls": s["unpriced_calls"], "queries": s["queries"],
                        "used": round(s["priced_nano_usd"] / limit, 4),
                        "period_start": stamp(start), "reset_at": stamp(reset),
                        "resets_in_s": int((reset - now).total_seconds())})
    return out


def render_status(rows: list[dict]) -> str:
    """`rag budgets` as a table that fits 80 columns."""
    if not rows:
        return "no budget has spend to show (RAG_BUDGETS_FILE lists the budgets)"
    lines = [f"{'BUDGET':<16} {'WHO':<14} {'LIMIT':>11} {'SPENT':>11} {'USED':>5} {'UNPRICED':>8} {'RESETS IN':>9}"]
    # a name longer than its column is a key (B1, W1), spelled out below: a variant, user or key never cut
    budgets, whos = _keys([r["budget"] for r in rows], 16, "B"), _keys([r["value"] for r in rows], 14, "W")
    for r in rows:
        who = whos.get(r["value"], r["value"])
        spent = _money(r["spend_usd"]) + ("+?" if not r["spend_known"] else "")
        limit = ("" if r["hard"] else "~") + _money(r["limit_usd"])  # ~: a soft limit
        name = budgets.get(r["budget"], r["budget"])
        used = (f"{r['used']:.0%}" if r["used"] < 10 else f"{int(r['used'])}x" if r["used"] < 1000 else ">999x"
                ) + ("+" if not r["spend_known"] else "")  # 5 columns: 1234% would push the row past 80  # unpriced calls: at least this much
        lines.append(f"{name:<16} {who:<14} {limit:>11} {spent:>11} {used:>5} "
                     f"{r['unpriced_calls']:>8} {_left(r['resets_in_s']):>9}")
    lines += [f"{key} = {name}" for keys in (budgets, whos) for name, key in keys.items()]
    if any(not r["spend_known"] for r in rows):
        lines.append("+?, %+: spend partly unknown (unpriced calls); `rag prices check` names models")
    if any(not r["hard"] for r in rows):
        lines.append("~: a soft limit (events and webhook, no 429)")
    return "\n".join(lines)


def _keys(names: list[str], width: int, prefix: str) -> dict[str, str]:
    """{name: key} for the names longer than `width`, keyed in the order they come."""
    long = list(dict.fromkeys(n for n in names if len(n) > width))
    return {n: f"{prefix}{i}" for i, n in enumerate(long, 1)}


def _money(usd: float) -> str:
    """Cents from $1 up, else four significant digits: $0.0001234 is not $0.00."""
    if usd >= 1:
        return f"${usd:,.2f}" if usd < 1e6 else f"${usd:,.0f}"
    if not usd:
        return "$0"
    text = f"{usd:.{max(2, 3 - math.floor(math.log10(usd)))}f}".rstrip("0")
    return "$" + (text + "0" if text.endswith(".") else text)


def _left(seconds: int) -> str:
    h, m = divmod(max(seconds, 0) // 60, 60)
    return f"{h // 24}d {h % 24}h" if h >= 24 else f"{h}h {m:02d}m"
