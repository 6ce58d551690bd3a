"""One RagApp per variant, all sharing one store, ledger writer and tracer, built at start-up by one factory
(rag_app/service/variant_apps.py); a request's route (which variant answers it: rag_app/experiments/routing.py)
and shadow runs. A request finds its app built; it only looks it up."""
from __future__ import annotations

import difflib
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rag_app.app import RagApp
from rag_app.config import Settings
from rag_app.core import ConfigError, RagError
from rag_app.experiments import route, served
from rag_app.experiments import Assignment, ExperimentConfig
from rag_app.query import Scope
from rag_app.core import Answer
from rag_app.core import utcnow
from rag_app.service.variant_apps import check_variants, variant_app, variant_apps

log = logging.getLogger(__name__)
SHADOW_QUEUE_MAX = 64  # shadow runs waiting or running at once, per process


@dataclass(frozen=True)
class Route:
    query_id: str
    variant: str  # as the ledger records it
    app_variant: str  # whose settings answer (a variant of RAG_EXPERIMENTS_FILE, or "default")
    experiment: str | None
    assignment: Assignment | None
    extra: dict  # the query row's who and where
    collection: str | None = None  # the collection it reads (None: RAG_COLLECTION)


class VariantPool:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.config = ExperimentConfig.load(settings.experiments_file)
        if settings.experiment and settings.experiment not in self.config.experiments:
            raise ConfigError(f"RAG_EXPERIMENT={settings.experiment!r} is not in "
                              f"{settings.experiments_file or 'RAG_EXPERIMENTS_FILE (unset)'}")
        check_variants(settings, self.config)
        self.base = RagApp(settings)
        try:  # a variant that cannot be built fails the start, and lets the store go for the next try
            built = variant_apps(self.base, self.config)
        except Exception:
            self.base.close()
            raise
        self._open_index()
        # (variant or "<ingest>", collection) -> (its app, when it was last handed out), least recently used
        # first. Every variant's app over RAG_COLLECTION is built here, at start-up; apps of other collections
        # are built when a request names one and close when idle or too many (`_evict`).
        now = time.monotonic()
        self._apps: OrderedDict[tuple[str, str], tuple[RagApp, float]] = OrderedDict(
            ((name, settings.collection), (app, now)) for name, app in built.items())
        self._lock = threading.Lock()
        self.evicted = 0  # collections closed for being idle or too many (/healthz)
        self._shadow = ThreadPoolExecutor(max_workers=2, thread_name_prefix="shadow")
        # Shadow runs double a request's work off the request path; past this many waiting, a new one is
        # skipped (and counted) rather than queued: a burst must not grow memory and LLM spend unbounded.
        self._shadow_slots = threading.BoundedSemaphore(SHADOW_QUEUE_MAX)
        self.shadow_skipped = 0
        self.ramp: Any = None  # a RampController once start_ramp() ran (`rag serve` with a ramped experiment)

    def start_ramp(self, webhook=None) -> None:
        """Follow (and move) the experiment's ramp from the ledger; nothing when it declares none.
        `webhook`: the service's alert Webhook (a roll back is sent to it)."""
        exp = served(self.config, self.settings.experiment)
        if exp is None or not exp.ramp or self.ramp is not None:
            return
        from rag_app.experiments import RampController
        from tracing.ledger import SERVICE_BOUNDS, Ledger

        self.ramp = RampController(exp, Ledger.attach(self.settings.ledger, bounds=SERVICE_BOUNDS),
                                   webhook=webhook, interval_s=self.settings.ramp_check_s)
        self.ramp.start()

    def _open_index(self) -> None:
        """Open the collection at startup, not on the first request: the embedded engine writes its
        shard structure when it loads, and a disk that fills up later must not cost the service its
        index. A store with no collection yet (ingest comes later) is fine."""
        try:
            if self.base.store.info(self.settings.collection) is not None:
                self.base.store.count(self.settings.collection)
                self.base.fill_rescore_vectors_in_background()  # an unfinished ingest pass (issue 20)
        except RagError as e:
            log.warning("collection %s not opened at startup: %s", self.settings.collection, e)

    @property
    def experiment(self):
        """The experiment as served now: a ramped one at its current step (from the ledger)."""
        return served(self.config, self.settings.experiment, self.ramp.rollout_pct if self.ramp is not None else None)

    def app_for(self, variant: str, collection: str | None = None) -> RagApp:
        """The variant's RagApp over `collection` (default RAG_COLLECTION): every one shares the base's
        store, models and ledger writer, so serving another collection costs no second load."""
        collection = collection or self.settings.collection
        if (variant, collection) not in self._apps and variant not in self.config.variants:
            raise ConfigError(f"unknown variant {variant!r}")
        return self._app((variant, collection),
                         lambda: variant_app(self.base, variant, self.config.variants[variant], collection))

    def ingester(self, collection: str) -> RagApp:
        """The RagApp that writes into `collection` (RAG_COLLECTION: the base itself)."""
        if collection == self.settings.collection:
            return self.base
        return self._app(("<ingest>", collection), lambda: variant_app(self.base, None, {}, collection))

    def _app(self, key: tuple[str, str], build: Callable[[], RagApp]) -> RagApp:
        now = time.monotonic()
        with self._lock:
            found = self._apps.pop(key, None)
            app = found[0] if found else build()
            self._apps[key] = (app, now)  # the most recently used, last
            closing = self._evict(now)
        self._close(closing)
        return app

    def _evict(self, now: float) -> list[tuple[str, list[RagApp]]]:
        """Under the lock: the collections (other than RAG_COLLECTION) whose apps all sat idle past
        RAG_COLLECTION_IDLE_S, then the least recently used past RAG_MAX_OPEN_COLLECTIONS; their apps
        leave the pool. A request still running on one finishes: the store reopens what it needs."""
        last: dict[str, float] = {}
        for (_, c), (_, used) in self._apps.items():
            if c != self.settings.collection:
                last[c] = max(used, last.get(c, 0.0))
        by_age = sorted(last, key=last.__getitem__)
        idle = [c for c in by_age if now - last[c] > self.settings.collection_idle_s]
        rest = [c for c in by_age if c not in idle]
        names = idle + rest[:max(0, len(rest) - self.settings.max_open_collections)]
        closing = [(c, [self._apps.pop(k)[0] for k in [k for k in self._apps if k[1] == c]]) for c in names]
        self.evicted += len(closing)
        return closing

    def _close(self, closing: list[tuple[str, list[RagApp]]]) -> None:
        for c, apps in closing:
            try:
                for app in apps:
                    app.close()  # a shared app holds no connection of its own: this stops its background work
                self.base.store.release(c)
            except Exception as e:  # closing is housekeeping: it never fails the request that triggered it
                log.warning("collection %s not released: %s", c, e)

    def open_collections(self) -> list[str]:
        """The collections other than RAG_COLLECTION whose apps are in memory now."""
        with self._lock:
            return sorted({c for _, c in self._apps if c != self.settings.collection})

    def has_collection(self, name: str) -> bool:
        return self.base.store.info(name) is not None

    def route(self, user_id: str | None = None, session_id: str | None = None, api_key_id: str | None = None,
              variant: str | None = None, collection: str | None = None) -> Route:
        """Which variant answers this request and what its ledger row says (the experiment's assignment).
        `variant`: this variant, outside any experiment (the OpenAI-compatible endpoint's `model`)."""
        query_id = str(uuid.uuid4())
        r = route(self.config, self.experiment, self.settings.variant, request_id=query_id, user_id=user_id,
                  session_id=session_id, variant=variant)
        extra = {"user_id": user_id, "session_id": session_id, "origin": "live", "api_key_id": api_key_id, **r.row()}
        return Route(query_id, r.variant, r.app_variant, r.experiment, r.assignment, extra, collection)

    def run(self, route: Route, question: str, scope: Scope | None = None, callbacks: Sequence[Any] = ()) -> Answer:
        """Answer a routed question (and start its shadow run, if its experiment has one)."""
        answer = self.app_for(route.app_variant, route.collection).ask(question, query_id=route.query_id, variant=route.variant,
                                                     experiment=route.experiment, extra=route.extra, scope=scope,
                                                     callbacks=callbacks)
        a = route.assignment
        if a is not None and a.shadow:
            if self._shadow_slots.acquire(blocking=False):
                self._shadow.submit(self._run_shadow, question, answer, a, route.extra, scope, route.collection)
            else:
                self.shadow_skipped += 1
                log.warning("shadow run of %s skipped: %d already waiting", a.shadow, SHADOW_QUEUE_MAX)
        return answer

    def ask(self, question: str, user_id: str | None = None, session_id: str | None = None,
            api_key_id: str | None = None, scope: Scope | None = None,
            admit: Callable[[str, str], None] | None = None, variant: str | None = None,
            callbacks: Sequence[Any] = ()) -> tuple[Answer, Assignment | None]:
        """route + run. `admit(query_id, variant)`: the budget gate, once the variant is known and before
        any spend (raises to refuse the query). `callbacks`: more LangChain handlers (streaming)."""
        route = self.route(user_id, session_id, api_key_id, variant)
        if admit is not None:
            admit(route.query_id, route.variant)
        return self.run(route, question, scope, callbacks), route.assignment

    def _run_shadow(self, question: str, control: Answer, a: Assignment, extra: dict,
                    scope: Scope | None = None, collection: str | None = None) -> None:
        try:
            assert a.shadow is not None  # a shadow run is only started for an assignment that has one
            shadow = self.app_for(a.shadow, collection).ask(question, variant=a.shadow, experiment=a.experiment,
                                                extra={**extra, "arm": "treatment", "shadow_of": control.query_id,
                                                       "origin": "shadow"}, scope=scope)
        except Exception:  # a failing shadow never affects the user's answer; its rows say what failed
            log.exception("shadow run of %s failed", a.shadow)
            return
        finally:
            self._shadow_slots.release()
        self.base.writer.put("shadow_pairs", {
            "control_query_id": control.query_id, "treatment_query_id": shadow.query_id,
            "experiment": a.experiment, **overlap(control, shadow), "created_at": utcnow()})

    def drain(self) -> None:
        """Wait for shadow runs and ledger writes (tests, shutdown)."""
        self._shadow.shutdown(wait=True)
        self._shadow = ThreadPoolExecutor(max_workers=2, thread_name_prefix="shadow")
        if self.base.judge is not None:
            self.base.judge.drain()
        self.base.writer.flush()

    def close(self) -> None:
        if self.ramp is not None:
            self.ramp.stop()
            self.ramp.ledger.close()
        self._shadow.shutdown(wait=True)
        self.base.close()


def overlap(a: Answer, b: Answer) -> dict:
    ids_a = [c.chunk.chunk_id for c in a.contexts]
    ids_b = [c.chunk.chunk_id for c in b.contexts]
    union = set(ids_a) | set(ids_b)
    return {"topk_jaccard": round(len(set(ids_a) & set(ids_b)) / len(union), 4) if union else 1.0,
            "top3_overlap": round(len(set(ids_a[:3]) & set(ids_b[:3])) / 3, 4),
            "answer_similarity": round(difflib.SequenceMatcher(None, a.text, b.text).ratio(), 4)}
