"""CostTracer: a LangChain callback that turns each stage run and each physical LLM attempt into a
ledger row. It observes only: every handler is guarded, so a tracer fault is logged and counted,
never raised into the query (`raise_error` stays False and each handler catches its own faults).

What it writes, and from what:
- a `queries` row per query root (a run with `metadata["query_id"]` and no parent);
- a `stage_calls` row per `StageUsage` a stage hands it (custom event `USAGE_EVENT`), mapped by
  tracing.ledger.rows.stage_row: the chain has already priced it, so the row holds exactly what the answer
  shows. A stage run that fails before reporting gets an error row;
- LLM attempts: an `AttemptRecorder` (the same code the retry loop uses) writes a `started` row before
  each request leaves (committed at once: a crash still shows the attempt, possibly billed), replaced
  by the final row when the attempt's usage arrives: from the generate stage's report when the chain
  made the call, else (a chat model run by a user's own LangChain code) from the recorder itself.

How stages are recognised: a stage is a runnable whose run name equals its `metadata["stage"]`
(children inherit metadata, so the name check picks the stage itself).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from rag_app.core import utcnow
from rag_app.models import REPORTED_BY_STAGE, AttemptRecorder
from rag_app.models import classify_error
from rag_app.core import Pricer
from rag_app.core import GRADES_QUERY, USAGE_EVENT, StageUsage
from tracing.ledger import LedgerWriter
from tracing.ledger import queries_row, stage_row

log = logging.getLogger(__name__)

__all__ = ["CostTracer", "REPORTED_BY_STAGE", "USAGE_EVENT"]


@dataclass
class _Run:
    kind: str  # query | stage
    name: str
    metadata: dict
    started_at: str
    t0: float
    reported: bool = False  # the stage handed over its usage
    attempts: bool = False  # an LLM call ran inside it (its rows are the attempts)


class CostTracer(BaseCallbackHandler):
    raise_error = False

    def __init__(self, writer: LedgerWriter, pricer: Pricer, *, llm_max_tokens: int | None = None, **recorder_kw: Any):
        self.writer = writer
        self.pricer = pricer
        self.faults = 0
        # Called with every row handed to the writer (e.g. the OpenTelemetry exporter's on_row), so
        # other sinks see exactly what the ledger gets; each call is guarded like a handler.
        self.row_observers: list[Callable[[str, dict], None]] = []
        self.recorder = AttemptRecorder(on_start=self._attempt_started, on_end=self._attempt_ended,
                                        default_max_tokens=llm_max_tokens, **recorder_kw)
        self._runs: dict[UUID, _Run] = {}
        self._lock = threading.Lock()

    @contextmanager
    def _guard(self, where: str):
        try:
            yield
        except Exception:  # the one place a tracer fault is swallowed, by design: log and count
            self.faults += 1
            log.exception("CostTracer fault in %s (query unaffected)", where)

    def _hand(self, table: str, row: dict, *, now: bool = False) -> None:
        (self.writer.write_now if now else self.writer.put)(table, row)
        for observe in self.row_observers:
            with self._guard("row observer"):
                observe(table, row)

    def _get(self, run_id: UUID | None) -> _Run | None:
        with self._lock:
            return self._runs.get(run_id) if run_id is not None else None

    def _pop(self, run_id: UUID) -> _Run | None:
        with self._lock:
            return self._runs.pop(run_id, None)

    # -- chains: the query root and its stages --------------------------------------------------
    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, tags=None, metadata=None, **kw):
        with self._guard("on_chain_start"):
            md = dict(metadata or {})
            name = kw.get("name") or (serialized or {}).get("name", "")
            if parent_run_id is None and md.get("query_id"):
                question = inputs.get("question") if isinstance(inputs, dict) else None
                run = _Run("query", name, {**md, "question": question}, utcnow(), time.perf_counter())
            elif md.get("stage") and name == md["stage"]:
                run = _Run("stage", name, md, utcnow(), time.perf_counter())
            else:
                return
            with self._lock:
                self._runs[run_id] = run

    def on_custom_event(self, name: str, data: Any, *, run_id, tags=None, metadata=None, **kw):
        with self._guard("on_custom_event"):
            if name != USAGE_EVENT or not isinstance(data, StageUsage):
                return
            run = self._get(run_id)
            if run is None:
                return
            run.reported = True
            self._write_usage(data, run.metadata, run)

    def on_chain_end(self, outputs, *, run_id, **kw):
        with self._guard("on_chain_end"):
            run = self._pop(run_id)
            if run is None:
                return
            if run.kind == "query":
                mode = getattr(outputs, "mode", None) or (outputs.get("mode") if isinstance(outputs, dict) else None)
                self._write_query(run, "ok", mode=mode)
                self._write_quality(run, getattr(outputs, "quality", None))
                self._write_citations(run, getattr(outputs, "citations", None))
            elif not run.reported and not run.attempts:  # a stage of someone else's chain that reports nothing
                self._write_usage(self.pricer.price(StageUsage(run.name)), run.metadata, run)

    def on_chain_error(self, error, *, run_id, **kw):
        with self._guard("on_chain_error"):
            run = self._pop(run_id)
            if run is None:
                return
            status = _failure_status(error)
            message = f"{type(error).__name__}: {error}"
            if run.kind == "query":
                self._write_query(run, status, error=message)
            elif not run.reported and not run.attempts:
                self._write_usage(self.pricer.price(StageUsage(run.name, status=status, error=message)),
                                  run.metadata, run)

    # -- physical LLM attempts: the recorder turns the callbacks into usages ----------------------
    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, tags=None, metadata=None, **kw):
        with self._guard("on_chat_model_start"):
            parent = self._get(parent_run_id)
            if parent is not None:
                parent.attempts = True
            self.recorder.on_chat_model_start(serialized, messages, run_id=run_id, metadata=metadata, **kw)

    def on_llm_new_token(self, token, *, chunk=None, run_id, parent_run_id=None, tags=None, **kw):
        with self._guard("on_llm_new_token"):
            self.recorder.on_llm_new_token(token, chunk=chunk, run_id=run_id, parent_run_id=parent_run_id, tags=tags, **kw)

    def on_llm_end(self, response, *, run_id, **kw):
        with self._guard("on_llm_end"):
            self.recorder.on_llm_end(response, run_id=run_id, **kw)

    def on_llm_error(self, error, *, run_id, **kw):
        with self._guard("on_llm_error"):
            self.recorder.on_llm_error(error, run_id=run_id, **kw)

    def _attempt_started(self, usage: StageUsage, metadata: dict) -> None:
        """On disk before the request leaves (a small committed write, bounded by the writer's direct
        timeout); the final row replaces it (same attempt_id)."""
        with self._guard("attempt start"):
            self._write_usage(self.pricer.price(usage), metadata, None, now=True)

    def _attempt_ended(self, usage: StageUsage, metadata: dict) -> None:
        with self._guard("attempt end"):
            if not metadata.get(REPORTED_BY_STAGE):  # else the stage hands over this very usage, priced
                self._write_usage(self.pricer.price(usage), metadata, None)

    # -- rows -----------------------------------------------------------------------------------
    def _write_usage(self, usage: StageUsage, md: dict, run: _Run | None, *, now: bool = False) -> None:
        if run is not None and usage.started_at is None:  # not timed by the chain: the run's own clock
            usage = usage.timed(run.started_at, utcnow(), round((time.perf_counter() - run.t0) * 1000, 3))
        row = stage_row(usage, query_id=md.get("query_id") or "unknown", variant=md.get("variant"),
                        experiment=md.get("experiment"))
        self._hand("stage_calls", row, now=now)

    def _write_quality(self, run: _Run, quality: Any) -> None:
        """The answer's quality signals (rag_app/quality/signals.py, computed by the chain) beside its cost,
        under the source the quality names (`local` unless it says, e.g. `judge`); a judge run's grades
        belong to the query it graded (metadata GRADES_QUERY), not to the judge run."""
        if quality is None or not hasattr(quality, "as_json"):
            return
        details = quality.details() if hasattr(quality, "details") else {}
        query_id = run.metadata.get(GRADES_QUERY) or run.metadata["query_id"]
        for row in _quality_rows(query_id, quality.as_json(), source=getattr(quality, "source", "local"),
                                 details=details):
            self._hand("query_quality", row)

    def _write_citations(self, run: _Run, citations: Any) -> None:
        """The passages the answer cited (query_citations), so a user's later mark on the answer names them
        (`rag train-adapter --from-feedback`)."""
        if not citations or run.metadata.get(GRADES_QUERY):
            return
        at = utcnow()
        for n, c in enumerate(citations, 1):
            self._hand("query_citations", {
                "query_id": run.metadata["query_id"], "position": n, "collection": run.metadata.get("collection"),
                "chunk_id": getattr(c, "chunk_id", None), "doc": getattr(c, "doc", None),
                "char_start": getattr(c, "char_start", None), "char_end": getattr(c, "char_end", None),
                "recorded_at": at})

    def _write_query(self, run: _Run, status: str, mode: str | None = None, error: str | None = None) -> None:
        md = run.metadata
        self._hand("queries", queries_row(
            md["query_id"], md.get("kind", "query"), status, run.started_at, run.t0, question=md.get("question"),
            mode=mode, error=error, variant=md.get("variant"), experiment=md.get("experiment"),
            **{k: md.get(k) for k in ("user_id", "session_id", "arm", "sticky", "shadow_of", "origin", "api_key_id")}))


def _quality_rows(query_id: str, quality: dict, *, source: str = "local", details: dict | None = None) -> list[dict]:
    """One query_quality row per signal; invalid citations count, their list in detail; the claims count
    those not supported (refusals are neither), their list in detail; a refusal is 1, else 0; `details`: a
    metric's detail (JSON) when the quality gives one (the judge's reason, model and prompt version)."""
    at = utcnow()
    rows = []
    for metric, value in quality.items():
        detail = (details or {}).get(metric)
        detail = None if detail is None else json.dumps(detail, ensure_ascii=False)
        if metric == "claims" and isinstance(value, list):
            value, detail = sum(c.get("supported") is False for c in value), json.dumps(value, ensure_ascii=False)
        elif isinstance(value, list):
            value, detail = len(value), json.dumps(value, ensure_ascii=False)
        elif isinstance(value, bool):
            value = float(value)
        rows.append({"query_id": query_id, "metric": metric, "source": source, "value": value,
                     "detail": detail, "recorded_at": at})
    return rows


def _failure_status(error: BaseException) -> str:
    """`timeout` when the query failed because its calls timed out (every LLM attempt, or the error that
    ended it: the retry loop's LLMError wraps the last attempt's), else `error`."""
    attempts = getattr(error, "usages", None)
    if attempts and all(u.status == "timeout" for u in attempts):
        return "timeout"
    return "timeout" if classify_error(error.__cause__ or error) == "timeout" else "error"
