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
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from tracing.db import connect_pg
from tracing.ledger import LedgerWriter
from tracing.pricing import PriceTable, Quote, rate_quote
from tracing.usage import PROVIDER, TokenUsage, attempt_status, classify_error, usage_from_llm_result

log = logging.getLogger(__name__)
USAGE_EVENT = "rag.usage"
CONTEXT_KEYS = ("context_budget_tokens", "context_tokens")  # the generate stage's packing, on its rows
MEAN_OUTPUT_TTL_S = 60.0


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
    attempt_id: str | None = None  # LLM attempts: key of the `started` row the end write updates


def _tokenizer(model: str | None):
    from rag_app.model_tokens import tokenizer_for

    return tokenizer_for(model)


def _estimate_prompt(model: str | None, messages) -> int:
    """Prompt tokens in the unit the model bills (o200k for gpt-4o-mini, DeepSeek's own, ...)."""
    return _tokenizer(model).count_messages([m for batch in messages for m in batch])


class CostTracer(BaseCallbackHandler):
    raise_error = False

    def __init__(self, writer: LedgerWriter, prices: PriceTable, *, embed_rate_per_1k: float = 0.0,
                 rerank_rate_per_1k: float = 0.0, count_tokens: Callable[[str], int] | None = None,
                 provider: str | None = None, llm_max_tokens: int | None = None):
        self.writer = writer
        self.prices = prices
        self.rates = {"embed": embed_rate_per_1k, "rerank": rerank_rate_per_1k}
        self.count_tokens = count_tokens  # None: count with each model's own tokenizer
        self.provider = provider
        self.llm_max_tokens = llm_max_tokens  # upper bound of an unseen reply (timeouts, shadow cost)
        self._mean_output: dict[str, tuple[float, float | None]] = {}
        self.faults = 0
        # Called with every row handed to the writer (e.g. the OpenTelemetry exporter's on_row), so
        # other sinks see exactly what the ledger gets; each call is guarded like a handler.
        self.row_observers: list[Callable[[str, dict], None]] = []
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
            est = self._prompt_estimate(model, messages)
            run = _Run("llm", "generate", md, utcnow(), time.perf_counter(), est_input_tokens=est, model=model,
                       attempt_id=str(run_id))
            run.usage["max_tokens"] = params.get("max_tokens") or params.get("max_completion_tokens") or self.llm_max_tokens
            with self._lock:
                parent = self._runs.get(parent_run_id) if parent_run_id else None
            if parent is not None:  # the generate stage reported its context packing before the call
                run.usage.update({k: parent.usage[k] for k in CONTEXT_KEYS if k in parent.usage})
            self._start(run_id, run)
            self._write_started(run)

    def on_llm_new_token(self, token: str, *, run_id, **kw):
        with self._guard("on_llm_new_token"):
            with self._lock:
                run = self._runs.get(run_id)
            if run is not None:  # what a stream delivered so far: counted if the stream is cut
                run.usage.setdefault("streamed", []).append(token)

    def on_llm_end(self, response, *, run_id, **kw):
        with self._guard("on_llm_end"):
            run = self._pop(run_id)
            if run is None:
                return
            usage = usage_from_llm_result(response)
            note = None
            if usage is None:  # provider sent no usage: count prompt and reply ourselves, and say so
                tok = self._tokenizer_name(run.model)
                usage = TokenUsage(run.est_input_tokens, self._count(run.model, _reply_text(response, run)),
                                   source=f"estimated:{tok}")
                note = "provider sent no usage"
            self._write_attempt(run, "ok", usage, estimate_note=note)

    def on_llm_error(self, error, *, run_id, **kw):
        with self._guard("on_llm_error"):
            run = self._pop(run_id)
            if run is None:
                return
            kind = classify_error(error)
            status = attempt_status(kind, int(run.metadata.get("attempt", 1)), int(run.metadata.get("max_attempts", 1)))
            at_risk, note = None, None
            if kind == "timeout":
                # A timeout fires after the request was sent: the provider may bill the prompt, what
                # it streamed before the cut, and (worst case) the rest of the reply up to max_tokens.
                streamed = "".join(run.usage.get("streamed", []))
                out = self._count(run.model, streamed) if streamed else 0
                usage = TokenUsage(run.est_input_tokens, out, source=f"estimated:{self._tokenizer_name(run.model)}")
                cap = run.usage.get("max_tokens")
                at_risk = max(int(cap) - out, 0) if cap else None
                note = f"timeout: {out} output tokens arrived before the cut" if streamed else "timeout before any reply"
            else:
                usage = TokenUsage(source=PROVIDER)  # refused before any work: nothing billed
            self._write_attempt(run, status, usage, error=f"{type(error).__name__}: {error}"[:500],
                                possibly_billed=kind == "timeout", output_at_risk=at_risk, estimate_note=note)

    # -- counting -------------------------------------------------------------------------------
    def _prompt_estimate(self, model: str | None, messages) -> int:
        if self.count_tokens is not None:  # an injected counter (tests, custom deployments)
            text = "\n".join(str(getattr(m, "content", m)) for batch in messages for m in batch)
            return self.count_tokens(text) + 4 * sum(len(b) for b in messages)
        return _estimate_prompt(model, messages)

    def _count(self, model: str | None, text: str) -> int:
        return self.count_tokens(text) if self.count_tokens is not None else _tokenizer(model).count(text)

    def _tokenizer_name(self, model: str | None) -> str:
        return "custom" if self.count_tokens is not None else _tokenizer(model).name

    def mean_output_tokens(self, model: str) -> float | None:
        """Mean reported output tokens of this model's successful calls in the ledger (cached 60 s)."""
        now = time.monotonic()
        hit = self._mean_output.get(model)
        if hit and now - hit[0] < MEAN_OUTPUT_TTL_S:
            return hit[1]
        mean = None
        try:
            if self.writer.path is None:  # PostgreSQL (RAG_LEDGER_URL)
                conn = connect_pg(self.writer.target.url, timeout_s=5, statement_timeout_s=5)
            else:
                conn = sqlite3.connect(f"file:{self.writer.path}?mode=ro", uri=True, timeout=5)
            try:
                mean = conn.execute("SELECT AVG(output_tokens) FROM stage_calls WHERE model = ? AND stage = 'generate' "
                                    "AND status = 'ok' AND usage_source = 'provider' AND output_tokens > 0",
                                    (model,)).fetchone()[0]
            finally:
                conn.close()
        except Exception as e:  # an estimate's input, never a reason to fail a query
            if not isinstance(e, sqlite3.Error):
                log.warning("cannot read mean output tokens from the ledger (%s)", e)
            mean = None
        self._mean_output[model] = (now, mean)
        return mean

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
        self._hand("queries", {"query_id": md["query_id"], "kind": md.get("kind", "query"),
                                    "question": md.get("question"), "mode": mode, "status": status,
                                    "error": error, **{k: row[k] for k in ("variant", "experiment", "started_at", "ended_at", "latency_ms")},
                                    **{k: md.get(k) for k in ("user_id", "session_id", "arm", "sticky", "shadow_of", "origin",
                                                                "api_key_id")}})

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
        usage_source, note = "local", None  # our own counts (embedder, reranker), or none at all (retrieve)
        if u.get("shadow_llm") and model:
            tokens_out, note = self._shadow_output(model)
            usage_source = f"estimated:{self._tokenizer_name(model)}"
            shadow = self.prices.quote(model, tokens_in, tokens_out, provider=self.provider, at=run.started_at)
            cost = Quote(0, shadow.version, shadow.source)
        price = cost or shadow
        self._hand("stage_calls", {
            **self._common(run), "stage": run.name, "call_id": u.get("call_id"), "attempt": 1,
            "status": status, "model": model, "input_tokens": tokens_in, "output_tokens": tokens_out,
            "cached_tokens": 0, "cost_nano_usd": cost.cost_nano if cost else 0,
            "shadow_cost_nano_usd": shadow.cost_nano if shadow else None,
            "price_version": price.version if price else None, "price_source": price.source if price else None,
            "possibly_billed": 0, "cache_hits": u.get("cache_hits"), "cache_misses": u.get("cache_misses"),
            "error": error or u.get("error"), "usage_source": usage_source, "estimate_note": note,
            "provider": self.provider, **{k: u.get(k) for k in CONTEXT_KEYS},
        })

    def _shadow_output(self, model: str) -> tuple[int, str]:
        """What the reply an extractive answer replaced would have cost in output tokens, labelled."""
        mean = self.mean_output_tokens(model)
        if mean is not None:
            return round(mean), f"output = mean of {model}'s reported replies in this ledger"
        if self.llm_max_tokens:
            return int(self.llm_max_tokens), "output = RAG_LLM_MAX_TOKENS (upper bound; no replies of this model in the ledger)"
        return 0, "output not estimated (no ledger history, no max_tokens)"

    def _quote(self, model: str, *args, **kw) -> Quote:
        """A price-table fault must not cost the row: it is written unpriced, with the fault counted."""
        try:
            return self.prices.quote(model, *args, provider=self.provider, **kw)
        except Exception:
            self.faults += 1
            log.exception("price lookup failed for %s; row written unpriced", model)
            return Quote(None, getattr(self.prices, "version", "?"), "unpriced")

    def _write_started(self, run: _Run) -> None:
        """On disk before the request leaves (a small committed write, bounded by the writer's
        direct timeout): after a crash the attempt still shows, possibly billed at its input estimate.
        The end or error handler replaces this row (same attempt_id) with the final one."""
        md = run.metadata
        model = run.model or "unknown"
        quote = self._quote(model, run.est_input_tokens, 0, 0, at=run.started_at)
        self._hand("stage_calls", now=True, row={
            "query_id": md.get("query_id") or "unknown", "variant": md.get("variant"),
            "experiment": md.get("experiment"), "started_at": run.started_at, "stage": "generate",
            "call_id": md.get("call_id"), "attempt": int(md.get("attempt", 1)), "status": "started",
            "model": model, "input_tokens": run.est_input_tokens, "output_tokens": 0, "cached_tokens": 0,
            "cost_nano_usd": quote.cost_nano, "price_version": quote.version, "price_source": quote.source,
            "possibly_billed": 1, "attempt_id": run.attempt_id,
            "usage_source": f"estimated:{self._tokenizer_name(run.model)}", "provider": self.provider,
            "output_at_risk_tokens": run.usage.get("max_tokens"), **{k: run.usage.get(k) for k in CONTEXT_KEYS}})

    def _write_attempt(self, run: _Run, status: str, usage: TokenUsage, error: str | None = None,
                       possibly_billed: bool = False, output_at_risk: int | None = None,
                       estimate_note: str | None = None) -> None:
        md = run.metadata
        model = run.model or "unknown"
        quote = self._quote(model, usage.input_tokens, usage.output_tokens, usage.cached_tokens,
                            cache_write_tokens=usage.cache_write_tokens, at=run.started_at,  # the price in force then
                            explicit_cache=usage.explicit_cache)
        self._hand("stage_calls", {
            **self._common(run), "stage": "generate", "call_id": md.get("call_id"),
            "attempt": int(md.get("attempt", 1)), "status": status, "model": model,
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens, "cost_nano_usd": quote.cost_nano,
            "shadow_cost_nano_usd": None, "price_version": quote.version, "price_source": quote.source,
            "possibly_billed": int(possibly_billed), "cache_hits": None, "cache_misses": None,
            "error": error, "cache_write_tokens": usage.cache_write_tokens, "reasoning_tokens": usage.reasoning_tokens,
            "usage_raw": usage.raw_json(), "usage_source": usage.source, "estimate_note": estimate_note,
            "output_at_risk_tokens": output_at_risk, "provider": self.provider, "attempt_id": run.attempt_id,
            **{k: run.usage.get(k) for k in CONTEXT_KEYS},
        })


def _reply_text(response, run: _Run) -> str:
    try:
        return str(response.generations[0][0].message.content)
    except (IndexError, AttributeError):
        return "".join(run.usage.get("streamed", []))
