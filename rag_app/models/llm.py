"""Chat model over any OpenAI-compatible endpoint, with retries at *our* layer.

The OpenAI SDK retries inside one LangChain call, so a callback would see one start and one end
for three physical requests. We set the SDK's max_retries to 0 and loop here: every attempt is a
separate chat-model run, tagged with its logical call id and number, that both the CostTracer (the
ledger's rows) and this loop's own `AttemptLog` (the answer's usage) record with the same code.
429 answers are retried after the server's `retry-after-ms` / `retry-after`.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs

from rag_app.models.attempts import ATTEMPT_STAGE, AttemptLog
from rag_app.core import LLMError
from rag_app.models.llm_usage import RETRYABLE, chunk_usage, classify_error
from rag_app.core import StageUsage

MAX_RETRY_AFTER_S = 60.0


def _chat_openai_class() -> type[Any]:
    from langchain_openai import ChatOpenAI

    class UsageKeepingChatOpenAI(ChatOpenAI):
        """ChatOpenAI that keeps a stream's raw usage object. LangChain turns the final usage chunk
        into `usage_metadata` and drops the keys it does not know (DeepSeek's cache hits, DashScope's
        cache writes); the tracer prices from the raw object, so we copy it to response_metadata."""

        def _convert_chunk_to_generation_chunk(self, chunk: Any, default_chunk_class: Any,
                                               base_generation_info: Any) -> Any:
            gen = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
            usage = chunk_usage(chunk)  # top-level, or inside choices[0] (Kimi's last chunk)
            if gen is not None and usage:
                gen.message.response_metadata["token_usage"] = dict(usage)
            return gen

    return UsageKeepingChatOpenAI


def _chat(model: str, api_key: str | None, base_url: str | None, timeout: float, max_tokens: int,
          **extra: Any) -> Any:
    """A chat model with our retry loop's settings: no SDK retries, temperature 0, the stream's usage kept."""
    return _chat_openai_class()(
        model=model,
        api_key=api_key or "not-needed",  # local servers accept any key
        base_url=base_url,
        timeout=timeout,
        max_retries=0,
        max_tokens=max_tokens,
        temperature=0,
        stream_usage=True,  # stream_options.include_usage; ChatOpenAI turns it off for custom base URLs unless asked
        **extra,
    )


def build_chat_model(settings: Any) -> Any:
    # streaming set only when on: an explicit streaming=False would also refuse the streaming a caller asks for
    # by attaching a streaming callback handler (SSE answers, rag_app/service/streaming.py)
    return _chat(settings.llm_model, settings.openai_api_key, settings.openai_base_url, settings.llm_timeout_s,
                 settings.llm_max_tokens, **({"streaming": True} if settings.llm_stream else {}))


def build_judge_model(settings: Any) -> Any:
    """The judge's chat model (RAG_JUDGE_MODEL): its own endpoint and key when set, else the answer's;
    its own timeout (RAG_JUDGE_TIMEOUT_S: nobody waits on it); never streamed; a short reply (two grades)."""
    return _chat(settings.judge_model, settings.judge_api_key or settings.openai_api_key,
                 settings.judge_base_url or settings.openai_base_url, settings.judge_timeout_s, settings.judge_max_tokens)


def build_rewrite_model(settings: Any) -> Any:
    """The rewrite lever's chat model: the answer's endpoint, key and model; its own timeout
    (RAG_QUERY_REWRITE_TIMEOUT_S: the question waits on it) and a short reply; never streamed."""
    return _chat(settings.llm_model, settings.openai_api_key, settings.openai_base_url,
                 settings.query_rewrite_timeout_s, settings.query_rewrite_max_tokens)


def retry_after_s(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        if "retry-after-ms" in headers:
            return min(float(headers["retry-after-ms"]) / 1000, MAX_RETRY_AFTER_S)
        if "retry-after" in headers:
            return min(float(headers["retry-after"]), MAX_RETRY_AFTER_S)
    except ValueError:
        return None
    return None


def invoke_with_retries(chat: Any, messages: Sequence[Any], config: RunnableConfig | None, *, max_retries: int,
                        base_delay_s: float, sleep: Callable[[float], None] = time.sleep,
                        metadata: dict[str, Any] | None = None,
                        max_tokens: int | None = None, stage: str = "generate") -> tuple[Any, str, Sequence[StageUsage]]:
    """Returns (AIMessage, call_id, the usage of every attempt). Raises LLMError after the last failed
    attempt; its `usages` are the attempts made. `metadata` rides on every attempt's run (the prompt
    count, the context packing). `stage`: what the attempts' rows are booked to (`judge` for the judge)."""
    call_id = str(uuid.uuid4())
    max_attempts = max_retries + 1
    log = AttemptLog(default_max_tokens=max_tokens)
    for attempt in range(1, max_attempts + 1):
        cfg = merge_configs(config or {}, {"metadata": {**(metadata or {}), "call_id": call_id, "attempt": attempt,
                                                        "max_attempts": max_attempts, ATTEMPT_STAGE: stage},
                                           "run_name": f"{stage}_attempt", "callbacks": [log.recorder]})
        try:
            return chat.invoke(messages, cfg), call_id, log.taken()
        except Exception as e:
            kind = classify_error(e)
            if kind not in RETRYABLE or attempt == max_attempts:
                raise LLMError(f"{kind}: {type(e).__name__}: {e}", attempts=attempt, usages=log.taken(),
                               stage=stage) from e
            sleep(retry_after_s(e) or base_delay_s * 2 ** (attempt - 1))
    raise AssertionError("unreachable")
