"""An exact-match answer cache for `rag serve` and `rag ask` (on by default; RAG_ANSWER_CACHE_SIZE=0 turns it
off). It is kept in memory, per process: `rag ask`, one question a process, is answered live each run.

Key: the normalised question (Unicode NFKC, whitespace collapsed, case folded), the scope, the variant
and what it runs with (its overrides, prompt version, LLM model), the experiment and arm, and the
collection. The entries of a collection live in the store as one of its derived indexes
(rag_app/store/base.py DerivedIndexes): any write of a document of the collection drops them, so a
cached answer never outlives the documents it quoted (that generation is the collection version).
An experiment's arms never share entries: the variant and arm are in the key.

A hit writes one query row (cache_hit = 1, no stage rows: zero billed tokens, $0 billed) whose
saved_cost_nano_usd is what a live answer would cost at the hit's own time: the original's successful
billed usage (its failed and retried attempts excluded) priced again at the hit's start, so a hit in
DeepSeek's peak hours saves the peak price even when the original ran off-peak (NULL when any of it is
unpriced now: the saving is unknown, never $0), with origin `cache`: reports count it, an experiment's comparison (live runs of
its arms) does not. The row names the query it answered from (`cached_from`: `rag reprice` prices that
query's calls again at the hit's time) and carries the warning its saving's price carries (`price_warning`:
a 2027 peak-hour hit without the 2027 holiday calendar warns as the call would). Budgets count billed spend, so a hit spends nothing and is served even past a limit.
Only complete answers are kept (a reply cut short is asked again).
"""
from __future__ import annotations

import hashlib
import json
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from rag_app.core import usd_json
from rag_app.core import Pricer
from rag_app.core import StageUsage
from rag_app.query import Scope

CACHE_INDEX = "answer_cache"


def normalise(question: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", question).split()).casefold()


@dataclass(frozen=True)
class Cached:
    payload: dict  # the answer payload as first served
    cost_nano: int | None  # what it cost then, failed attempts included (None: unpriced)
    usage: tuple[StageUsage, ...] = ()  # what a live answer would bill again: live_usage(the original's)
    user: str | None = None  # who the original was answered for: only they (or an admin) see its query id

    def saving_at(self, pricer: Pricer, at: str) -> int | None:
        """What answering live at `at` would bill: the kept usage priced by the price in force then."""
        return self.saving(pricer, at).nano

    def saving(self, pricer: Pricer, at: str) -> Saving:
        """What answering live at `at` would bill, and what its price could not be sure of (a holiday calendar
        missing `at`'s year, a stale exchange rate): the hit warns as the call would have."""
        total: int | None = 0
        warnings: list[str] = []
        for u in self.usage:
            price = pricer.price(replace(u, started_at=at, ended_at=None, price=None)).price
            if price is not None and price.warning and price.warning not in warnings:
                warnings.append(price.warning)
            if price is None or price.cost_nano is None:
                total = None
            elif total is not None:
                total += price.cost_nano
        return Saving(total, "; ".join(warnings) or None)


@dataclass(frozen=True)
class Saving:
    nano: int | None  # what a live answer would bill now (None: unpriced, so unknown)
    warning: str | None = None  # what its price could not be sure of


def live_usage(usages: Iterable[StageUsage]) -> tuple[StageUsage, ...]:
    """The billed usage a repeat of the answer would incur: successful calls only (a failed, timed-out or
    retried attempt is what the original happened to pay, not what the answer costs)."""
    return tuple(u for u in usages if u.billing == "billed" and u.status == "ok")


class AnswerCache:
    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(question: str, scope: Scope | None, *, collection: str, variant: str, experiment: str | None,
            arm: str | None, settings: dict[str, Any]) -> str:
        parts = {"q": normalise(question), "scope": [sorted(scope.docs), sorted(scope.laws)] if scope else None,
                 "collection": collection, "variant": variant, "experiment": experiment, "arm": arm,
                 "settings": settings}
        return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
                              .encode("utf-8")).hexdigest()

    @staticmethod
    def _entries(store: Any, collection: str) -> OrderedDict[str, Cached]:
        # the collection's generation of entries: a new, empty one after any write of its documents
        entries: OrderedDict[str, Cached] = store.derived(collection, CACHE_INDEX, OrderedDict)
        return entries

    def get(self, store: Any, collection: str, key: str) -> Cached | None:
        entries = self._entries(store, collection)
        with self._lock:
            hit = entries.get(key)
            if hit is None:
                self.misses += 1
                return None
            entries.move_to_end(key)
            self.hits += 1
            return hit

    def put(self, store: Any, collection: str, key: str, value: Cached) -> None:
        entries = self._entries(store, collection)
        with self._lock:
            entries[key] = value
            entries.move_to_end(key)
            while len(entries) > self.max_entries:
                entries.popitem(last=False)


def hit_payload(hit: Cached, query_id: str, saved_nano: int | None, warning: str | None = None,
                show_origin: bool = True) -> dict:
    """The cached answer under the new query's id: nothing billed, what it saved, and any warning the saving's
    price carries (as a live call's stage row would). `cached_from` (the original query's id) only with
    `show_origin`: another user's query id is not this caller's to see."""
    return {**hit.payload, "query_id": query_id, "stages": [], "total_cost_usd": 0.0, "total_shadow_cost_usd": 0.0,
            "priced_cost_usd": 0.0, "priced_shadow_cost_usd": 0.0, "unpriced": False, "unpriced_rows": 0,
            "cache_hit": True, "saved_cost_usd": usd_json(saved_nano), "price_warning": warning,
            "cached_from": hit.payload["query_id"] if show_origin else None}
