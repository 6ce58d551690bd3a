"""Each physical LLM request as a `StageUsage`, built from LangChain's chat-model callbacks.

`AttemptRecorder` is the one place that turns a chat-model run (start, streamed tokens, end or error)
into a usage: the provider's own counts when it sent them, else our estimate in the model's billing
unit, said so; a timeout is possibly billed for the prompt and what streamed before the cut. Two
recorders watch the same runs with the same code: the retry loop's own (`rag_app.models.llm`, so the answer
carries its attempts) and the CostTracer's (so the ledger gets a `started` row before the request
leaves and the final row after). Same callbacks, same function: the same figures.

Run metadata the retry loop sets: call_id, attempt, max_attempts, and optionally prompt_tokens /
prompt_model (the prompt already counted by the generate stage), the context packing
(context_budget_tokens, context_tokens), REPORTED_BY_STAGE and ATTEMPT_STAGE (the stage an attempt's row
is booked to: `generate` unless the call says otherwise, e.g. `judge`).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from rag_app.models.llm_usage import PROVIDER, TokenUsage, attempt_status, classify_error, usage_from_llm_result
from rag_app.models.model_tokens import ModelTokenizer, tokenizer_for
from rag_app.core import utcnow
from rag_app.core import AttemptInfo, StageUsage

Hook = Callable[[StageUsage, dict[str, Any]], None]  # (usage, the run's metadata)
# Run metadata set by the generate stage: it reports each attempt's usage itself (priced, on the answer),
# so an observer must not write the attempt a second time from its own recorder.
REPORTED_BY_STAGE = "usage_reported_by_stage"
ATTEMPT_STAGE = "attempt_stage"  # run metadata: the stage of the attempt's row (default `generate`)
INCOMPLETE = "incomplete"  # an attempt's status: its stream ended without a finish reason (billed; maybe cut)


@dataclass
class _Open:
    metadata: dict[str, Any]
    model: str
    started_at: str
    t0: float
    prompt_tokens: int
    tokenizer: str
    max_tokens: int | None
    streamed: list[str] = field(default_factory=list)


class AttemptRecorder(BaseCallbackHandler):
    """Watches chat-model runs; calls `on_start` when one begins (usage status `started`) and
    `on_end` with its final usage. Thread-safe; keeps nothing once a run has ended."""

    raise_error = False

    def __init__(self, *, on_start: Hook | None = None, on_end: Hook | None = None,
                 tokenizer: Callable[[str | None], ModelTokenizer] = tokenizer_for,
                 default_max_tokens: int | None = None):
        self.on_start, self.on_end = on_start, on_end
        self.tokenizer = tokenizer
        self.default_max_tokens = default_max_tokens  # upper bound of an unseen reply when the call names none
        self._open: dict[UUID, _Open] = {}
        self._lock = threading.Lock()

    # -- callbacks ---------------------------------------------------------------------------------
    def on_chat_model_start(self, serialized: Any, messages: list[list[Any]], *, run_id: UUID,
                            metadata: dict[str, Any] | None = None, **kw: Any) -> None:
        md = dict(metadata or {})
        params = kw.get("invocation_params") or {}
        model = str(params.get("model") or params.get("model_name") or md.get("ls_model_name") or "unknown")
        tok = self.tokenizer(model)
        if md.get("prompt_model") == model and md.get("prompt_tokens") is not None:
            prompt = int(md["prompt_tokens"])  # the generate stage counted it already
        else:
            prompt = tok.count_messages([m for batch in messages for m in batch])
        cap = params.get("max_tokens") or params.get("max_completion_tokens") or self.default_max_tokens
        run = _Open(md, model, utcnow(), time.perf_counter(), prompt, tok.name, int(cap) if cap else None)
        with self._lock:
            self._open[run_id] = run
        if self.on_start is not None:
            self.on_start(self._usage(run, run_id, "started", TokenUsage(prompt, source=f"estimated:{tok.name}"),
                                      possibly_billed=True, at_risk=run.max_tokens, ended=False), md)

    def on_llm_new_token(self, token: str | list[str | dict[str, Any]], *, run_id: UUID, **kw: Any) -> None:
        with self._lock:
            run = self._open.get(run_id)
        if run is not None:  # what a stream delivered so far: counted if the stream is cut
            run.streamed.append(token if isinstance(token, str) else "".join(str(t) for t in token))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kw: Any) -> None:
        run = self._pop(run_id)
        if run is None:
            return
        usage, note, status = usage_from_llm_result(response), None, "ok"
        if usage is None:  # the provider sent no usage: count prompt and reply ourselves, and say so
            usage = TokenUsage(run.prompt_tokens, self._count(run, _reply_text(response, run.streamed)),
                               source=f"estimated:{run.tokenizer}")
            note = "provider sent no usage"
        if run.streamed and _finish_reason(response) is None:
            # the stream ended (no error) without a finish reason or [DONE]: the reply may be cut short
            status = INCOMPLETE
            note = "stream ended without a finish reason: the reply may be cut" + (f"; {note}" if note else "")
        self._finish(run, run_id, status, usage, note=note)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        run = self._pop(run_id)
        if run is None:
            return
        kind = classify_error(error)
        status = attempt_status(kind, int(run.metadata.get("attempt", 1)), int(run.metadata.get("max_attempts", 1)))
        message = f"{type(error).__name__}: {error}"[:500]
        if kind != "timeout" and not run.streamed:  # refused before any work: nothing billed
            self._finish(run, run_id, status, TokenUsage(source=PROVIDER), error=message)
            return
        if kind != "timeout":  # the stream broke mid-reply: the provider did the work it delivered
            out = self._count(run, "".join(run.streamed))
            self._finish(run, run_id, status, TokenUsage(run.prompt_tokens, out, source=f"estimated:{run.tokenizer}"),
                         error=message, note=f"stream broke after {out} output tokens", possibly_billed=True)
            return
        # A timeout fires after the request was sent: the provider may bill the prompt, what it streamed
        # before the cut, and (worst case) the rest of the reply up to max_tokens.
        streamed = "".join(run.streamed)
        out = self._count(run, streamed) if streamed else 0
        note = f"timeout: {out} output tokens arrived before the cut" if streamed else "timeout before any reply"
        at_risk = max(run.max_tokens - out, 0) if run.max_tokens else None
        self._finish(run, run_id, status, TokenUsage(run.prompt_tokens, out, source=f"estimated:{run.tokenizer}"),
                     error=message, note=note, possibly_billed=True, at_risk=at_risk)

    # -- building the usage ------------------------------------------------------------------------
    def _pop(self, run_id: UUID) -> _Open | None:
        with self._lock:
            return self._open.pop(run_id, None)

    def _count(self, run: _Open, text: str) -> int:
        return self.tokenizer(run.model).count(text)

    def _finish(self, run: _Open, run_id: UUID, status: str, usage: TokenUsage, *, error: str | None = None,
                note: str | None = None, possibly_billed: bool = False, at_risk: int | None = None) -> None:
        if self.on_end is not None:
            self.on_end(self._usage(run, run_id, status, usage, error=error, note=note,
                                    possibly_billed=possibly_billed, at_risk=at_risk), run.metadata)

    @staticmethod
    def _usage(run: _Open, run_id: UUID, status: str, usage: TokenUsage, *, error: str | None = None,
               note: str | None = None, possibly_billed: bool = False, at_risk: int | None = None,
               ended: bool = True) -> StageUsage:
        md = run.metadata
        return StageUsage(
            stage=str(md.get(ATTEMPT_STAGE) or "generate"), model=run.model, status=status, input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens, cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens, reasoning_tokens=usage.reasoning_tokens,
            usage_source=usage.source, billing="billed", price_basis="llm", explicit_cache=usage.explicit_cache,
            error=error, note=note,
            context_budget_tokens=md.get("context_budget_tokens"), context_tokens=md.get("context_tokens"),
            started_at=run.started_at, ended_at=utcnow() if ended else None,
            latency_ms=round((time.perf_counter() - run.t0) * 1000, 3) if ended else None,
            attempt=AttemptInfo(md.get("call_id"), int(md.get("attempt", 1)), str(run_id),
                                possibly_billed, at_risk),
            raw=usage.raw)


class AttemptLog:
    """The attempts of one logical call, collected by a recorder the retry loop attaches to each request."""

    def __init__(self, **recorder_kw: Any):
        self.attempts: list[StageUsage] = []
        self._lock = threading.Lock()
        self.recorder = AttemptRecorder(on_end=self._keep, **recorder_kw)

    def _keep(self, usage: StageUsage, metadata: dict[str, Any]) -> None:
        with self._lock:
            self.attempts.append(usage)

    def taken(self) -> Sequence[StageUsage]:
        with self._lock:
            return tuple(sorted(self.attempts, key=lambda u: u.attempt.number if u.attempt else 0))


def _finish_reason(response: Any) -> str | None:
    try:
        gen = response.generations[0][0]
    except (IndexError, AttributeError):
        return None
    info = getattr(gen, "generation_info", None) or {}
    meta = getattr(getattr(gen, "message", None), "response_metadata", None) or {}
    return info.get("finish_reason") or meta.get("finish_reason")


def _reply_text(response: Any, streamed: list[str]) -> str:
    try:
        return str(response.generations[0][0].message.content)
    except (IndexError, AttributeError):
        return "".join(streamed)
