"""Re-pricing history and finding unpriced models, over the ledger.

`reprice` recomputes the dollars of stored rows from their stored tokens, each by the price in
force when the call was made (the row's `started_at`: its dated price, its peak rule, its exchange
rate), under today's price table, and *appends* a row to `repricings` for every row whose figure
changed, with the reason ("new price version ..." or "new rule ..."). A row whose figure did not
change gets nothing: re-pricing twice, or at another hour, changes nothing. The original cost,
price version and source on `stage_calls` are never touched, so a report can show either
(`rag report --prices repriced`). Only rows priced from a model price table are re-priced;
embedding / rerank rows carry a per-1k rate from settings (`price_source = 'rate'`) and local rows
have no price.

Each row is priced where it was sent: by the provider recorded on it at write time (RAG_LLM_PROVIDER,
a model prefix, or the host of OPENAI_BASE_URL then, in `provider` / `endpoint`), never by the
endpoint of the shell that runs `rag reprice`. A row that records neither (written before 0.8.0) is
left as it is and counted, unless the operator names its provider (`assume_provider`; `auto`: the
model name's usual provider).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

from tracing.pricing.rules import as_utc
from tracing.pricing.table import PriceTable, Quote, bare_model
from rag_app.models import explicit_cache_of

TABLE_PRICED = ("genai-prices", "bundled", "override", "unpriced")


@dataclass(frozen=True)
class RepriceResult:
    rows: int
    changed: int
    old_nano: int
    new_nano: int
    unpriced_before: int
    unpriced_after: int
    version: str
    reasons: Counter = field(default_factory=Counter, compare=False)  # "new price version" / "new rule" / ...
    left: int = 0  # rows not re-priced (no endpoint recorded, unreadable time): see `reasons`
    savings: SavingsResult | None = None  # answer-cache hits' savings, re-priced as live calls at their time

    @property
    def unchanged(self) -> int:
        return self.rows - self.changed - self.left


@dataclass(frozen=True)
class SavingsResult:
    hits: int
    changed: int
    old_nano: int
    new_nano: int
    left: int = 0  # hits whose answer's calls are not in the ledger (from before m021): left as recorded
    unknown_after: int = 0  # hits whose saving is unknown under the new table (a call of it unpriced)


def change_reason(before: int | None, old_version: str | None, q: Quote) -> str:
    """Why a row's figure changed: the price table changed (new price version), or the same table
    now prices the call differently, e.g. by its own start time rather than the hour it was priced
    (new rule). The dated price and rule that produced the new figure follow."""
    basis = q.basis or q.source
    if q.cost_nano is None:
        return f"unpriced now: {q.warning or basis}"
    if before is None:
        return f"priced now: {basis}"
    if old_version != q.version:
        return f"new price version ({old_version} -> {q.version}): {basis}"
    return f"new rule: {basis}"


def readable_time(started_at) -> str | None:
    try:
        as_utc(started_at)
        return started_at
    except (TypeError, ValueError):
        return None


def _explicit(usage_raw: str | None) -> bool | None:
    try:
        return explicit_cache_of(json.loads(usage_raw)) if usage_raw else None
    except (TypeError, ValueError):
        return None


NO_ENDPOINT = "left as recorded: no endpoint on the row (written before endpoints were recorded; --assume-provider)"


def row_provider(r: dict, prices: PriceTable, assume_provider: str | None) -> tuple[bool, str | None]:
    """(known, provider) for a stored row: where it was sent, as recorded on it; a model prefix says it
    too, and so does an override priced under the bare model name (the same price at any endpoint);
    else the operator's assumption, if any."""
    if r.get("provider") is not None or r.get("endpoint") is not None:
        return True, r.get("provider")
    if "/" in (r["model"] or "") and prices.endpoint_provider(r["model"]):
        return True, None
    if (r["model"] or "") in prices.overrides or bare_model(r["model"] or "") in prices.overrides:
        return True, None  # the operator's own price for this model name holds wherever it was sent
    if assume_provider is None:
        return False, None
    return True, None if assume_provider == "auto" else assume_provider


def reprice(ledger, prices: PriceTable, *, since: str | None = None, model: str | None = None,
            assume_provider: str | None = None) -> RepriceResult:
    """`ledger`: a tracing.ledger.Ledger. `prices`' own endpoint (the shell's OPENAI_BASE_URL) is never
    used: each row is priced by the provider recorded on it."""
    prices = prices.for_recorded_rows()
    rows = ledger.reprice_candidates(since=since, model=model)
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    changed = old = new = unpriced_before = unpriced_after = left = 0
    reasons: Counter = Counter()
    out: list[dict] = []
    for r in rows:
        if readable_time(r["started_at"]) is None:
            reasons["skipped: unreadable started_at"] += 1  # no call time: no price in force to find
            left += 1
            continue
        known, provider = row_provider(r, prices, assume_provider)
        if not known:
            reasons[NO_ENDPOINT] += 1
            left += 1
            continue
        q = prices.quote(r["model"], r["input_tokens"], r["output_tokens"], r["cached_tokens"],
                         provider=provider, cache_write_tokens=r["cache_write_tokens"] or 0,
                         at=r["started_at"], explicit_cache=_explicit(r["usage_raw"]))
        # a shadow row (extractive answer: nothing billed) keeps cost 0 and re-prices its shadow
        is_shadow = r["shadow_cost_nano_usd"] is not None or (r["status"] == "skipped" and r["cost_nano_usd"] == 0)
        cost, shadow = (r["cost_nano_usd"], q.cost_nano) if is_shadow else (q.cost_nano, None)
        before = r["shadow_cost_nano_usd"] if is_shadow else r["cost_nano_usd"]
        unpriced_before += r["price_source"] == "unpriced"
        unpriced_after += q.source == "unpriced"
        old += before or 0
        new += q.cost_nano or 0
        if before == q.cost_nano:
            continue  # its price did not change: nothing to record, whatever the table's version
        changed += 1
        reason = change_reason(before, r["price_version"], q)
        reasons[reason.split(":", 1)[0].split(" (", 1)[0]] += 1
        out.append({"stage_call_id": r["id"], "cost_nano_usd": cost, "shadow_cost_nano_usd": shadow,
                    "price_version": q.version, "price_source": q.source, "repriced_at": now, "reason": reason})
    ledger.add_repricings(out)
    return RepriceResult(len(rows), changed, old, new, unpriced_before, unpriced_after, prices.version, reasons, left,
                         reprice_savings(ledger, prices, since=since, assume_provider=assume_provider, now=now))


def live_call_cost(r: dict, at: str, prices: PriceTable, assume_provider: str | None) -> int | None:
    """What one of an answer's calls (a stored `ok` row) would bill if made again at `at`: a row priced from
    the price table, its price in force then at the provider it was sent to; any other (a rate, a local
    stage's shadow) what it cost then. None: unpriced."""
    if r["price_source"] not in TABLE_PRICED or r["shadow_cost_nano_usd"] is not None:
        return r["cost_nano_usd"] if r["shadow_cost_nano_usd"] is None else 0
    known, provider = row_provider(r, prices, assume_provider)
    if not known:
        return r["cost_nano_usd"]  # where it went is not recorded: its figure as recorded
    return prices.quote(r["model"], r["input_tokens"], r["output_tokens"], r["cached_tokens"], provider=provider,
                        cache_write_tokens=r["cache_write_tokens"] or 0, at=at,
                        explicit_cache=_explicit(r["usage_raw"])).cost_nano


def reprice_savings(ledger, prices: PriceTable, *, since: str | None = None, assume_provider: str | None = None,
                    now: str | None = None) -> SavingsResult:
    """Each answer-cache hit's saving as a live call at the hit's own time under `prices`: the calls of the
    answer it served, priced in force then (a hit in peak hours saves the peak price), appended to
    `saving_repricings` when it differs from the hit's latest figure (the hit's own is never changed)."""
    prices = prices.for_recorded_rows()
    now = now or datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    hits = ledger.hit_reprice_candidates(since=since)
    out: list[dict] = []
    changed = old = new = left = unknown = 0
    for h in hits:
        if h["rows"] is None or readable_time(h["started_at"]) is None:
            left += 1
            continue
        costs = [live_call_cost(r, h["started_at"], prices, assume_provider) for r in h["rows"]]
        saving = None if any(c is None for c in costs) else sum(c or 0 for c in costs)
        unknown += saving is None
        old += h["saved_now"] or 0
        new += saving or 0
        if saving == h["saved_now"]:
            continue
        changed += 1
        reason = (f"unpriced now under {prices.version}" if saving is None
                  else f"the answer's calls priced at the hit's time under {prices.version}")
        out.append({"query_id": h["query_id"], "saved_cost_nano_usd": saving, "price_version": prices.version,
                    "repriced_at": now, "reason": reason})
    ledger.add_saving_repricings(out)
    return SavingsResult(len(hits), changed, old, new, left, unknown)
