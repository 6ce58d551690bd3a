"""OpenTelemetry export of the ledger's rows (RAG_OTEL_ENDPOINT, OTLP/HTTP).

Spans are built from the very rows the CostTracer hands to the ledger writer, so a trace and the
ledger cannot disagree: one trace per query row, one span per stage row, and per LLM call a
`generate` span whose children are its attempt rows (retries, timeouts included). Rows of a query
wait here until its query row arrives (the query's end), then the trace is built with the rows'
own timestamps and handed to the SDK's BatchSpanProcessor.

Ids are derived from the query id: the trace id IS the query's UUID (any other id is hashed), so a
query id from `rag report` or the dashboard finds its trace in Jaeger/Phoenix/Tempo, and a row that
arrives late still lands under the right parent.

Attributes (tracing/observe/otel_attributes.py): the OpenTelemetry GenAI conventions (`gen_ai.*`) plus the OpenInference ones Arize
Phoenix reads for its token and cost columns (`openinference.span.kind`, `llm.*`); cost, price
version/source, status, attempt, variant and experiment under `rag.*` (the conventions have no
cost yet). No question, prompt or answer text is sent.

Never blocks or fails a query: `on_row` only appends the row to memory (microseconds); a builder
thread makes the spans (the SDK's span objects cost ~0.1 ms each) and hands them to the processor,
whose queue is bounded: what does not fit is dropped and counted (`health()`, shown by `/healthz`,
and a log line); exports run on the SDK's worker thread with a short timeout; every fault is
swallowed and counted.
"""
from __future__ import annotations

import atexit
import hashlib
import logging
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, TraceFlags

from rag_app.config import normalise_endpoint  # noqa: F401  (re-exported for callers of this module)
from rag_app.config import credentials_apart, scrub_urls, shown_url
from tracing.observe.otel_attributes import attempt_attrs, generate_call_attrs, query_attrs, span_status, span_times, stage_attrs

log = logging.getLogger(__name__)

SCOPE = "legal-rag.tracing"


# -- ids ----------------------------------------------------------------------------------------
def trace_id_for(query_id: str) -> int:
    """The query's UUID as the trace id (what a user pastes into the trace UI); else a hash."""
    try:
        tid = uuid.UUID(str(query_id)).int
    except ValueError:
        tid = 0
    return tid or int.from_bytes(hashlib.sha256(f"trace:{query_id}".encode()).digest()[:16], "big") or 1


def span_id_for(*parts) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big") or 1


class _PlannedIds(IdGenerator):
    """Hands the SDK the ids we derived (set per thread just before each start_span)."""

    def __init__(self):
        self._next = threading.local()
        self._random = RandomIdGenerator()

    def plan(self, trace_id: int, span_id: int) -> None:
        self._next.ids = (trace_id, span_id)

    def generate_trace_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        return ids[0] if ids else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        self._next.ids = None
        return ids[1] if ids else self._random.generate_span_id()


class _CountingExporter(SpanExporter):
    """Counts what reached the collector and what did not; never raises into the worker."""

    def __init__(self, inner: SpanExporter, owner: "OtelExporter"):
        self.inner = inner
        self.owner = owner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.owner._taken(len(spans)):  # after close() gave up waiting: already counted as dropped
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
            error = None if result is SpanExportResult.SUCCESS else "collector refused or unreachable"
        except Exception as e:  # an exporter bug must not kill the SDK's worker thread
            result, error = SpanExportResult.FAILURE, f"{type(e).__name__}: {e}"
        self.owner._exported(len(spans), error)
        return result

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception:
            log.exception("OTLP exporter shutdown failed")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


# -- the exporter -------------------------------------------------------------------------------
class OtelExporter:
    """Receives ledger rows (`on_row`), exports one trace per query. Thread-safe."""

    def __init__(self, endpoint: str, *, timeout_s: float = 2.0, max_queue_spans: int = 2048,
                 max_pending_queries: int = 1000, pending_max_age_s: float = 120.0,
                 schedule_delay_s: float = 1.0, default_provider: str = "openai",
                 span_exporter: SpanExporter | None = None):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # user:password travels as an Authorization header: the SDK logs the endpoint on every retry
        self.endpoint, auth = credentials_apart(normalise_endpoint(endpoint))
        self.shown = shown_url(self.endpoint)  # what logs and /healthz show of it
        self.timeout_s = timeout_s
        self.max_queue_spans = max_queue_spans
        self.max_pending_queries = max_pending_queries
        self.pending_max_age_s = pending_max_age_s
        # The client speaks the OpenAI API through OpenAI's SDK; RAG_LLM_PROVIDER names it when set.
        self.default_provider = default_provider
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._pending: OrderedDict[str, tuple[float, list[dict]]] = OrderedDict()
        # (query row or None, query id, its rows): built into spans on the builder thread, not the query's
        self._ready: deque[tuple[dict | None, str, list[dict]]] = deque()
        self._building = False
        self._stop = False
        self.traces = self.spans_ended = self.spans_taken = 0
        self.exported_spans = self.failed_spans = self.dropped_spans = self.faults = 0
        self.orphan_rows = 0  # rows whose query row never came in time: exported without a root
        self.last_error: str | None = None
        self._last_drop_log = 0.0
        inner = span_exporter or OTLPSpanExporter(endpoint=self.endpoint, timeout=timeout_s,  # and OTEL_EXPORTER_OTLP_*HEADERS
                                                  headers=auth or None)
        self._ids = _PlannedIds()
        resource = Resource.create()  # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES win over our default name
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "legal-rag"}))
        self._provider = TracerProvider(resource=resource, id_generator=self._ids, shutdown_on_exit=False)
        self._processor = BatchSpanProcessor(_CountingExporter(inner, self), max_queue_size=max_queue_spans,
                                             schedule_delay_millis=schedule_delay_s * 1000,
                                             max_export_batch_size=min(512, max_queue_spans),
                                             export_timeout_millis=timeout_s * 1000)
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer(SCOPE)
        self._closed = False
        self._abandoned = False  # close() stopped waiting: what the worker still holds is dropped
        self._builder = threading.Thread(target=self._build_loop, name="otel-build", daemon=True)
        self._builder.start()
        atexit.register(self.close)

    @classmethod
    def from_settings(cls, settings) -> "OtelExporter":
        return cls(settings.otel_endpoint, timeout_s=settings.otel_timeout_s,
                   max_queue_spans=settings.otel_queue_spans, default_provider=settings.llm_provider or "openai")

    # -- the query side: appends to memory only ---------------------------------------------------
    def on_row(self, table: str, row: dict) -> None:
        """A row the ledger writer was given. Never raises; faults are counted and logged."""
        try:
            if table == "stage_calls" and row.get("status") != "started":  # `started` is replaced by the final row
                qid = str(row.get("query_id"))
                with self._lock:
                    entry = self._pending.get(qid)
                    if entry is None:
                        self._pending[qid] = entry = (time.monotonic(), [])
                    entry[1].append(dict(row))
            elif table == "queries":
                qid = str(row.get("query_id"))
                with self._cv:
                    held = self._pending.pop(qid, (0.0, []))[1]
                    self._enqueue(dict(row), qid, held)
        except Exception as e:
            self._fault(e)

    def _enqueue(self, query: dict | None, qid: str, rows: list[dict]) -> None:
        """Under the lock. Past the bound the trace is dropped, and its spans counted."""
        if self._stop or len(self._ready) >= self.max_pending_queries:
            self.dropped_spans += _span_count(query, rows)
            return
        self._ready.append((query, qid, rows))
        self._cv.notify_all()

    def _expire(self) -> None:
        """Rows waiting too long (or too many queries waiting) go out under their derived root."""
        now = time.monotonic()
        with self._cv:
            while self._pending:
                qid, (since, rows) = next(iter(self._pending.items()))
                if len(self._pending) <= self.max_pending_queries and now - since < self.pending_max_age_s:
                    break
                self._pending.popitem(last=False)
                self.orphan_rows += len(rows)
                self._enqueue(None, qid, rows)

    def _build_loop(self) -> None:
        while True:
            with self._cv:
                while not self._ready and not self._stop:
                    self._cv.wait(1.0)
                    if not self._ready:
                        break  # a second passed: look for rows whose query row never came
                batch = list(self._ready)
                self._ready.clear()
                self._building = True
                stop = self._stop
            for query, qid, rows in batch:
                try:
                    if query is None:
                        self._emit_children(qid, rows)
                    else:
                        self._emit_trace(query, rows)
                except Exception as e:
                    self._fault(e)
            try:
                self._expire()
            except Exception as e:
                self._fault(e)
            with self._cv:
                self._building = False
                self._cv.notify_all()
                if stop and not self._ready:
                    return

    def drain(self, timeout_s: float = 5.0) -> bool:
        """Wait until every row handed in so far is built into spans (tests, flush, close)."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._ready or self._building:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.1))
        return True

    # -- building spans -------------------------------------------------------------------------
    def _emit_trace(self, query: dict, rows: list[dict]) -> None:
        qid = str(query.get("query_id"))
        start, end = span_times(query)
        links = []
        if query.get("shadow_of"):  # a shadow run points at the control query it shadowed
            shadow_of = str(query["shadow_of"])
            links.append(Link(SpanContext(trace_id_for(shadow_of), span_id_for(shadow_of, "query"), False,
                                          TraceFlags(TraceFlags.SAMPLED))))
        self._span(trace_id_for(qid), span_id_for(qid, "query"), None, str(query.get("kind") or "query"),
                   start, end, query_attrs(query, rows), span_status(query), SpanKind.SERVER, links)
        self._emit_children(qid, rows)
        with self._lock:
            self.traces += 1

    def _emit_children(self, qid: str, rows: list[dict]) -> None:
        tid, root = trace_id_for(qid), span_id_for(qid, "query")
        calls: OrderedDict[str | None, list[dict]] = OrderedDict()
        for row in rows:
            if row.get("stage") == "generate" and row.get("attempt_id"):
                calls.setdefault(row.get("call_id"), []).append(row)
                continue
            start, end = span_times(row)
            key = (row.get("stage"), row.get("call_id"), row.get("started_at"), row.get("attempt"))
            self._span(tid, span_id_for(qid, "stage", *key), root, str(row.get("stage")), start, end,
                       stage_attrs(row), span_status(row))
        for call_id, attempts in calls.items():
            attempts.sort(key=lambda r: (int(r.get("attempt") or 1), r.get("started_at") or ""))
            parent = span_id_for(qid, "generate", call_id)
            spans = [span_times(r) for r in attempts]
            self._span(tid, parent, root, "generate", min(s for s, _ in spans), max(e for _, e in spans),
                       generate_call_attrs(qid, call_id, attempts), span_status(attempts[-1]))
            for row, (start, end) in zip(attempts, spans):
                name = f"chat {row.get('model') or 'unknown'}"  # GenAI span name: "{operation} {model}"
                self._span(tid, span_id_for(qid, "attempt", row.get("attempt_id")), parent, name, start, end,
                           attempt_attrs(row, self.default_provider), span_status(row), SpanKind.CLIENT)

    def _span(self, trace_id: int, span_id: int, parent_id: int | None, name: str, start: int, end: int,
              attrs: dict, status: Status, kind: SpanKind = SpanKind.INTERNAL, links=()) -> None:
        if not self._admit():
            return
        ctx = None
        if parent_id is not None:
            parent = SpanContext(trace_id, parent_id, False, TraceFlags(TraceFlags.SAMPLED))
            ctx = trace.set_span_in_context(NonRecordingSpan(parent))
        self._ids.plan(trace_id, span_id)
        span = self._tracer.start_span(name, context=ctx, kind=kind, attributes=attrs, links=links, start_time=start)
        span.set_status(status)
        span.end(end_time=max(end, start))

    def _admit(self) -> bool:
        """Our own bound on spans not yet handed to the exporter: the SDK's queue never overflows
        silently, and what we refuse is counted."""
        with self._lock:
            if self._closed or self.spans_ended - self.spans_taken >= self.max_queue_spans:
                self.dropped_spans += 1
                dropped, now = self.dropped_spans, time.monotonic()
                log_it = now - self._last_drop_log > 60 or dropped == 1
                if log_it:
                    self._last_drop_log = now
            else:
                self.spans_ended += 1
                return True
        if log_it:
            log.warning("OpenTelemetry export is behind (%s): %d spans dropped so far, queries unaffected",
                        self.shown, dropped)
        return False

    # -- accounting (the SDK's worker thread) ---------------------------------------------------
    def _taken(self, n: int) -> bool:
        with self._lock:
            if self._abandoned:
                return False
            self.spans_taken += n
            return True

    def _exported(self, n: int, error: str | None) -> None:
        with self._lock:
            if error is None:
                self.exported_spans += n
                return
            first = self.failed_spans == 0
            self.failed_spans += n
            self.last_error = scrub_urls(error)
            failed = self.failed_spans
        if first or failed % 1000 < n:
            log.warning("OpenTelemetry export to %s failed (%s): %d spans not delivered so far", self.shown,
                        scrub_urls(error), failed)

    def _fault(self, e: Exception) -> None:
        with self._lock:
            self.faults += 1
            self.last_error = scrub_urls(f"{type(e).__name__}: {e}")
        log.exception("OpenTelemetry export fault (query unaffected)")

    def health(self) -> dict:
        with self._lock:
            return {"endpoint": self.shown, "traces": self.traces, "exported_spans": self.exported_spans,
                    "failed_spans": self.failed_spans, "dropped_spans": self.dropped_spans,
                    "queued_spans": self.spans_ended - self.spans_taken, "queue_limit": self.max_queue_spans,
                    "sending_spans": self.spans_taken - self.exported_spans - self.failed_spans,
                    "waiting_queries": len(self._pending), "orphan_rows": self.orphan_rows,
                    "faults": self.faults, "last_error": self.last_error}

    def flush(self, timeout_s: float | None = None) -> bool:
        """Build and export what was handed in so far (tests); blocks, so never on a query's path."""
        return self.drain(timeout_s or 5.0) and self._processor.force_flush(int((timeout_s or self.timeout_s) * 1000))

    def close(self, timeout_s: float | None = None) -> None:
        """Rows still waiting go out without a root; building and the last export are bounded."""
        if self._closed:
            return
        try:
            budget = timeout_s or 2 * self.timeout_s
            with self._cv:
                for qid, (_, rows) in list(self._pending.items()):
                    self.orphan_rows += len(rows)
                    self._enqueue(None, qid, rows)
                self._pending.clear()
                self._stop = True
                self._cv.notify_all()
            self._builder.join(budget / 2)
            with self._lock:
                self._closed = True
                for query, _, rows in self._ready:  # not built in time: dropped, counted
                    self.dropped_spans += _span_count(query, rows)
                self._ready.clear()
            # the SDK's shutdown waits up to 30 s on a dead collector; ours waits a bounded time
            closer = threading.Thread(target=self._processor.shutdown, name="otel-close", daemon=True)
            closer.start()
            closer.join(budget / 2)
            with self._lock:  # what the last export could not take is dropped, and counted once
                self._abandoned = True
                self.dropped_spans += max(self.spans_ended - self.spans_taken, 0)
                self.spans_ended = self.spans_taken
        except Exception as e:
            self._fault(e)


def _span_count(query: dict | None, rows: list[dict]) -> int:
    """How many spans a query's rows make: its root, one per row, one per LLM call above its attempts."""
    calls = {r.get("call_id") for r in rows if r.get("stage") == "generate" and r.get("attempt_id")}
    return (query is not None) + len(rows) + len(calls)
