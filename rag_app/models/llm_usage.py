"""Pure translation of provider responses and errors into what the ledger needs.

Providers report the same facts under different keys. `usage_from_raw` reads them through one
table; `input_tokens` always means *all* prompt tokens (cache reads and cache writes included),
as OpenAI, DeepSeek, DashScope and genai-prices count them:

    fact                  OpenAI / LiteLLM                        DeepSeek                  DashScope (OpenAI-compatible)                  Anthropic-compatible
    prompt tokens         prompt_tokens                           prompt_tokens (hit+miss)  prompt_tokens                                  input_tokens + cache_read + cache_creation
    cache reads           prompt_tokens_details.cached_tokens     prompt_cache_hit_tokens   prompt_tokens_details.cached_tokens            cache_read_input_tokens
                          (Kimi / Moonshot: usage.cached_tokens, top level)
    cache writes          cache_creation_input_tokens (LiteLLM)   -                         prompt_tokens_details.cache_creation_input_tokens  cache_creation_input_tokens
    reasoning (in output) completion_tokens_details.reasoning_tokens (OpenAI, DeepSeek, DashScope)     -
    output                completion_tokens                                                                                          output_tokens

Where the usage object sits: `usage` of the response or of the final stream chunk; Kimi's stream
puts it inside the last chunk's `choices[0]` (`chunk_usage` finds either).
"""
from __future__ import annotations

from typing import Any
from dataclasses import dataclass, field, replace

PROVIDER = "provider"


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0          # every prompt token, cached or not
    output_tokens: int = 0         # every completion token, reasoning included
    cached_tokens: int = 0         # prompt tokens read from the provider's cache (discounted)
    cache_write_tokens: int = 0    # prompt tokens written to the cache (premium on some providers)
    reasoning_tokens: int = 0      # part of output_tokens, billed as output
    source: str = PROVIDER         # provider | estimated:<tokenizer>
    raw: dict | None = field(default=None, compare=False)  # the provider's usage object, as sent
    explicit_cache: bool | None = None  # DashScope said the request used an explicit cache (hits at 10%)

    def estimated(self, tokenizer: str) -> "TokenUsage":
        return replace(self, source=f"estimated:{tokenizer}")


# fact -> where each provider puts it (a key path); the largest value present wins, so a response
# that carries both DeepSeek's and OpenAI's spelling (some gateways send both) is not double counted.
USAGE_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "cached_tokens": (("prompt_tokens_details", "cached_tokens"), ("prompt_cache_hit_tokens",),
                      ("cache_read_input_tokens",), ("cached_tokens",)),
    "cache_write_tokens": (("prompt_tokens_details", "cache_creation_input_tokens"), ("cache_creation_input_tokens",),
                           ("prompt_tokens_details", "cache_write_tokens")),
    "reasoning_tokens": (("completion_tokens_details", "reasoning_tokens"), ("output_tokens_details", "reasoning_tokens")),
}


def _at(raw: dict, path: tuple[str, ...]) -> int | None:
    cur: Any = raw
    for key in path:
        if not isinstance(cur, dict) or cur.get(key) is None:
            return None
        cur = cur[key]
    try:
        return int(cur)
    except (TypeError, ValueError):
        return None


def _fact(raw: dict, name: str) -> int:
    return max((v for p in USAGE_PATHS[name] if (v := _at(raw, p)) is not None), default=0)


def usage_from_raw(raw: dict) -> TokenUsage | None:
    """One provider usage object -> TokenUsage; None when it carries no token counts."""
    if not isinstance(raw, dict):
        return None
    cached, write, reasoning = (_fact(raw, n) for n in ("cached_tokens", "cache_write_tokens", "reasoning_tokens"))
    if _at(raw, ("prompt_tokens",)) is not None or _at(raw, ("completion_tokens",)) is not None:
        prompt = _at(raw, ("prompt_tokens",))
        if prompt is None:  # DeepSeek always sends prompt_tokens, but hit + miss is the same number
            prompt = (_at(raw, ("prompt_cache_hit_tokens",)) or 0) + (_at(raw, ("prompt_cache_miss_tokens",)) or 0)
        output = _at(raw, ("completion_tokens",)) or 0
    elif _at(raw, ("input_tokens",)) is not None:
        # Anthropic's input_tokens excludes both cache reads and cache writes
        prompt = (_at(raw, ("input_tokens",)) or 0) + cached + write
        output = _at(raw, ("output_tokens",)) or 0
    else:
        return None
    return TokenUsage(prompt, output, min(cached, prompt), min(write, prompt), min(reasoning, output),
                      PROVIDER, raw, explicit_cache_of(raw))


def explicit_cache_of(raw: dict | None) -> bool | None:
    """True when DashScope marks the request's cache as explicit (`cache_type: ephemeral`); None when
    the usage does not say (pricing then reads a cache write as the mark of an explicit request)."""
    details = raw.get("prompt_tokens_details") if isinstance(raw, dict) else None
    if isinstance(details, dict) and details.get("cache_type") == "ephemeral":
        return True
    return None


def chunk_usage(chunk) -> dict | None:
    """The usage object of one streamed chunk: top-level `usage` (OpenAI, DeepSeek, DashScope), or
    inside `choices[0]` (Kimi's final chunk); None when the chunk carries none."""
    if not isinstance(chunk, dict):
        return None
    usage = chunk.get("usage")
    if isinstance(usage, dict) and usage:
        return usage
    choices = chunk.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        inner = choices[0].get("usage")
        if isinstance(inner, dict) and inner:
            return inner
    return None


def raw_usage_of(result) -> dict | None:
    """The provider's own usage dict from a LangChain LLMResult, before LangChain normalised it.

    Non-streamed replies: `llm_output["token_usage"]` (ChatOpenAI keeps unknown keys there, e.g.
    DeepSeek's prompt_cache_hit_tokens). Streamed replies: `response_metadata["token_usage"]`,
    which rag_app.models.llm's chat model copies from the final usage chunk.
    """
    tu = (getattr(result, "llm_output", None) or {}).get("token_usage")
    if not tu:
        try:
            tu = (result.generations[0][0].message.response_metadata or {}).get("token_usage")
        except (IndexError, AttributeError):
            tu = None
    return _without_nones(tu) if isinstance(tu, dict) and tu else None


def _without_nones(d: dict) -> dict:
    """The OpenAI SDK fills every field it knows with None; keep what the provider actually sent."""
    return {k: _without_nones(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}


def usage_from_llm_result(result) -> TokenUsage | None:
    """Raw provider usage first; LangChain's normalised usage_metadata second; None if neither."""
    raw = raw_usage_of(result)
    if raw:
        usage = usage_from_raw(raw)
        if usage is not None:
            return usage
    try:
        um = result.generations[0][0].message.usage_metadata
    except (IndexError, AttributeError):
        um = None
    if um:
        inp = um.get("input_token_details") or {}
        out = um.get("output_token_details") or {}
        return TokenUsage(int(um.get("input_tokens", 0)), int(um.get("output_tokens", 0)),
                          int(inp.get("cache_read") or 0), int(inp.get("cache_creation") or 0),
                          int(out.get("reasoning") or 0), PROVIDER, {"usage_metadata": dict(um)})
    return None


def _is_timeout(exc: BaseException) -> bool:
    # A stream cut mid-way raises the HTTP client's ReadTimeout (httpx or httpx2), not the SDK's
    # APITimeoutError: the SDK only wraps errors raised while sending.
    return isinstance(exc, TimeoutError) or any("Timeout" in k.__name__ for k in type(exc).__mro__)


def classify_error(exc: BaseException) -> str:
    """timeout | rate_limit | server | connection | fatal — shared by the retry loop and the tracer."""
    try:
        import openai
    except ImportError:  # pragma: no cover
        openai = None  # type: ignore[assignment]
    if openai is not None:
        if isinstance(exc, openai.APITimeoutError):
            return "timeout"
        if isinstance(exc, openai.RateLimitError):
            return "rate_limit"
        if isinstance(exc, openai.APIConnectionError):
            return "connection"
        if isinstance(exc, openai.APIStatusError):
            return "server" if exc.status_code >= 500 else "fatal"
    if _is_timeout(exc):
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
