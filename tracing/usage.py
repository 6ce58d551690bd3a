"""Pure translation of provider responses and errors into what the ledger needs."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


# OpenAI-style `token_usage` keys -> ours. LangChain's `usage_metadata` is read second.
_OPENAI_KEYS = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens"}


def usage_from_llm_result(result) -> TokenUsage | None:
    """From a LangChain LLMResult: usage_metadata on the message first, llm_output second."""
    try:
        msg = result.generations[0][0].message
        um = getattr(msg, "usage_metadata", None)
    except (IndexError, AttributeError):
        um = None
    if um:
        details = um.get("input_token_details") or {}
        return TokenUsage(int(um.get("input_tokens", 0)), int(um.get("output_tokens", 0)),
                          int(details.get("cache_read", 0) or 0))
    tu = (result.llm_output or {}).get("token_usage") or {}
    if tu:
        vals = {ours: int(tu.get(theirs, 0) or 0) for theirs, ours in _OPENAI_KEYS.items()}
        cached = (tu.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0
        return TokenUsage(vals["input_tokens"], vals["output_tokens"], int(cached))
    return None


def classify_error(exc: BaseException) -> str:
    """timeout | rate_limit | server | connection | fatal — shared by the retry loop and the tracer."""
    try:
        import openai
    except ImportError:  # pragma: no cover
        openai = None
    if openai is not None:
        if isinstance(exc, openai.APITimeoutError):
            return "timeout"
        if isinstance(exc, openai.RateLimitError):
            return "rate_limit"
        if isinstance(exc, openai.APIConnectionError):
            return "connection"
        if isinstance(exc, openai.APIStatusError):
            return "server" if exc.status_code >= 500 else "fatal"
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "fatal"


RETRYABLE = {"timeout", "rate_limit", "server", "connection"}


def attempt_status(kind: str, attempt: int, max_attempts: int) -> str:
    """Ledger status of a failed physical attempt."""
    if kind == "timeout":
        return "timeout"
    if kind in RETRYABLE and attempt < max_attempts:
        return "retry"
    return "error"
