"""CostTracer: a LangChain callback that turns each stage run and each physical LLM attempt into
a ledger row. It observes only: every handler is guarded, so a tracer fault is logged and
counted, never raised into the query (LangChain would otherwise log it too, but we do not rely on
that: `raise_error` stays False and each handler catches its own faults).

How stages are recognised: a stage is a runnable whose run name equals its `metadata["stage"]`
(children inherit metadata, so the name check picks the stage itself). Stages report model and
token counts through the custom event `rag.usage`. Each chat-model call is one physical attempt;
the retry loop tags it with `call_id`, `attempt` and `max_attempts`.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable, Quote, rate_quote
from tracing.usage import TokenUsage, attempt_status, classify_error, usage_from_llm_result

log = logging.getLogger(__name__)
USAGE_EVENT = "rag.usage"


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class _Run:
    kind: str  # query | stage | llm
    name: str
    metadata: dict
    started_at: str
    t0: float
    usage: dict = field(default_factory=dict)
    est_input_tokens: int = 0
    model: str | None = None


def _default_counter(text: str) -> int:
    from rag_app.tokens import count_tokens

    return count_tokens(text)


class CostTracer(BaseCallbackHandler):
    raise_error = False

    def __init__(self, writer: LedgerWriter, prices: PriceTable, *, embed_rate_per_1k: float = 0.0,
                 rerank_rate_per_1k: float = 0.0, count_tokens: Callable[[str], int] = _default_counter,
                 provider: str | None = None):
        self.writer = writer
        self.prices = prices
        self.rates = {"embed": embed_rate_per_1k, "rerank": rerank_rate_per_1k}
        self.count_tokens = count_tokens
        self.provider = provider
        self.faults = 0
        self._runs: dict[UUID, _Run] = {}
        self._lock = threading.Lock()

    @contextmanager
    def _guard(self, where: str):
        try:
            yield
        except Exception:  # the one place a tracer fault is swallowed, by design: log and count
            self.faults += 1
            log.exception("CostTracer fault in %s (query unaffected)", where)

    def _start(self, run_id: UUID, run: _Run) -> None:
        with self._lock:
            self._runs[run_id] = run

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
                self._start(run_id, _Run("query", name, {**md, "question": question}, utcnow(), time.perf_counter()))
            elif md.get("stage") and name == md["stage"]:
                self._start(run_id, _Run("stage", name, md, utcnow(), time.perf_counter()))

    def on_custom_event(self, name: str, data: Any, *, run_id, tags=None, metadata=None, **kw):
        with self._guard("on_custom_event"):
            if name != USAGE_EVENT:
                return
            with self._lock:
                run = self._runs.get(run_id)
            if run is not None:
                run.usage.update(data)

    def on_chain_end(self, outputs, *, run_id, **kw):
        with self._guard("on_chain_end"):
            run = self._pop(run_id)
            if run is None:
                return
            if run.kind == "query":
                mode = getattr(outputs, "mode", None) or (outputs.get("mode") if isinstance(outputs, dict) else None)
                self._write_query(run, "ok", mode=mode)
            elif run.kind == "stage" and not run.usage.get("llm_attempts"):
                self._write_stage(run, run.usage.get("status", "ok"))

    def on_chain_error(self, error, *, run_id, **kw):
        with self._guard("on_chain_error"):
            run = self._pop(run_id)
            if run is None:
                return
            status = "timeout" if classify_error(error) == "timeout" else "error"
            if run.kind == "query":
                self._write_query(run, status, error=f"{type(error).__name__}: {error}")
            elif run.kind == "stage" and not run.usage.get("llm_attempts"):
                self._write_stage(run, status, error=f"{type(error).__name__}: {error}")

    # -- physical LLM attempts ------------------------------------------------------------------
    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, tags=None, metadata=None, **kw):
        with self._guard("on_chat_model_start"):
            md = dict(metadata or {})
            params = kw.get("invocation_params") or {}
            model = params.get("model") or params.get("model_name") or md.get("ls_model_name")
            text = "\n".join(str(getattr(m, "content", m)) for batch in messages for m in batch)
            est = self.count_tokens(text) + 4 * sum(len(b) for b in messages)
            run = _Run("llm", "generate", md, utcnow(), time.perf_counter(), est_input_tokens=est, model=model)
            self._start(run_id, run)

    def on_llm_end(self, response, *, run_id, **kw):
        with self._guard("on_llm_end"):
            run = self._pop(run_id)
            if run is None:
                return
            usage = usage_from_llm_result(response)
            if usage is None:  # provider sent no usage: fall back to our own count, say so
                usage = TokenUsage(run.est_input_tokens, 0, 0)
                run.metadata = {**run.metadata, "usage_note": "estimated"}
            self._write_attempt(run, "ok", usage)

    def on_llm_error(self, error, *, run_id, **kw):
        with self._guard("on_llm_error"):
            run = self._pop(run_id)
            if run is None:
                return
            kind = classify_error(error)
            status = attempt_status(kind, int(run.metadata.get("attempt", 1)), int(run.metadata.get("max_attempts", 1)))
            # A timeout fires after the request was sent: the provider may bill the prompt.
            usage = TokenUsage(run.est_input_tokens, 0, 0) if kind == "timeout" else TokenUsage()
            self._write_attempt(run, status, usage, error=f"{type(error).__name__}: {error}"[:500],
                                possibly_billed=kind == "timeout")

    # -- rows -----------------------------------------------------------------------------------
    def _common(self, run: _Run) -> dict:
        md = run.metadata
        return {"query_id": md.get("query_id") or "unknown", "variant": md.get("variant"),
                "experiment": md.get("experiment"), "started_at": run.started_at, "ended_at": utcnow(),
                "latency_ms": round((time.perf_counter() - run.t0) * 1000, 3)}

    def _write_query(self, run: _Run, status: str, mode: str | None = None, error: str | None = None) -> None:
        md = run.metadata
        row = self._common(run)
        row.pop("query_id")
        self.writer.put("queries", {"query_id": md["query_id"], "kind": md.get("kind", "query"),
                                    "question": md.get("question"), "mode": mode, "status": status,
                                    "error": error, **{k: row[k] for k in ("variant", "experiment", "started_at", "ended_at", "latency_ms")},
                                    **{k: md.get(k) for k in ("user_id", "session_id", "arm", "sticky", "shadow_of")}})

    def _write_stage(self, run: _Run, status: str, error: str | None = None) -> None:
        u = run.usage
        tokens_in, tokens_out = int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0))
        model = u.get("model")
        cost: Quote | None = None
        shadow: Quote | None = None
        rate = u.get("rate")
        if "billed_cost_nano" in u:  # priced by the stage as the provider bills it (HTTP rerank)
            cost = shadow = Quote(u["billed_cost_nano"], u.get("price_version") or "unpriced",
                                  u.get("price_source") or "unpriced")
        elif rate in self.rates:
            shadow = rate_quote(tokens_in, self.rates[rate], rate)
            cost = Quote(0, shadow.version, "rate") if not u.get("billed") else shadow
        elif u.get("shadow_llm") and model:
            shadow = self.prices.quote(model, tokens_in, tokens_out, provider=self.provider)
            cost = Quote(0, shadow.version, shadow.source)
        price = cost or shadow
        self.writer.put("stage_calls", {
            **self._common(run), "stage": run.name, "call_id": u.get("call_id"), "attempt": 1,
            "status": status, "model": model, "input_tokens": tokens_in, "output_tokens": tokens_out,
            "cached_tokens": 0, "cost_nano_usd": cost.cost_nano if cost else 0,
            "shadow_cost_nano_usd": shadow.cost_nano if shadow else None,
            "price_version": price.version if price else None, "price_source": price.source if price else None,
            "possibly_billed": 0, "cache_hits": u.get("cache_hits"), "cache_misses": u.get("cache_misses"),
            "error": error or u.get("error"),
        })

    def _write_attempt(self, run: _Run, status: str, usage: TokenUsage, error: str | None = None,
                       possibly_billed: bool = False) -> None:
        md = run.metadata
        model = run.model or "unknown"
        quote = self.prices.quote(model, usage.input_tokens, usage.output_tokens, usage.cached_tokens,
                                  provider=self.provider)
        self.writer.put("stage_calls", {
            **self._common(run), "stage": "generate", "call_id": md.get("call_id"),
            "attempt": int(md.get("attempt", 1)), "status": status, "model": model,
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens, "cost_nano_usd": quote.cost_nano,
            "shadow_cost_nano_usd": None, "price_version": quote.version, "price_source": quote.source,
            "possibly_billed": int(possibly_billed), "cache_hits": None, "cache_misses": None,
            "error": error,
        })
