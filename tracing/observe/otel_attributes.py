"""Ledger rows -> span attributes: pure functions, one row in, one attribute dict out.

The OpenTelemetry GenAI conventions (`gen_ai.*`) for model calls, the OpenInference attributes Arize
Phoenix reads for its token and cost columns (`openinference.span.kind`, `llm.*`), and our own `rag.*`
for what the conventions do not cover yet (cost in nano-dollars and USD, price version and source,
status, attempt, possibly_billed, variant, experiment). Token counts follow the ledger: input counts
every prompt token, cached ones included (as `gen_ai.usage.input_tokens` and `llm.token_count.prompt`
define it). An unpriced row carries `rag.cost.unpriced` and no cost attribute: never a 0.
"""
from __future__ import annotations

from typing import Any

import time
from datetime import datetime, timezone

from opentelemetry.trace import Status, StatusCode

# OpenInference span kinds, so Phoenix draws each stage with the right icon and counts LLM tokens
OI_KIND = {"embed_query": "EMBEDDING", "embed_documents": "EMBEDDING", "retrieve": "RETRIEVER",
           "rerank": "RERANKER", "generate": "LLM"}
# GenAI operation names (gen_ai.operation.name); rerank has none yet
GENAI_OP = {"embed_query": "embeddings", "embed_documents": "embeddings", "retrieve": "retrieval", "generate": "chat"}
FAILED = {"error", "timeout", "retry"}
NANO = 10**9
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _ns(iso: str | None) -> int | None:
    if not iso:
        return None
    d = datetime.fromisoformat(iso) - EPOCH  # integer arithmetic: a float timestamp is off by tens of ns
    return (d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000


def span_times(row: dict) -> tuple[int, int]:
    """Start from `started_at`; end from the measured latency (finer than `ended_at`'s milliseconds)."""
    start = _ns(row.get("started_at")) or time.time_ns()
    if row.get("latency_ms") is not None:
        return start, start + int(float(row["latency_ms"]) * 1e6)
    return start, max(_ns(row.get("ended_at")) or start, start)


def _put(attrs: dict, key: str, value) -> None:
    if value is not None:
        attrs[key] = value


def _cost_attrs(attrs: dict, row: dict) -> None:
    cost = row.get("cost_nano_usd")
    unpriced = cost is None
    attrs["rag.cost.unpriced"] = unpriced
    if cost is not None:
        attrs["rag.cost.nano_usd"] = int(cost)
        attrs["rag.cost.usd"] = int(cost) / NANO
    if row.get("shadow_cost_nano_usd") is not None:
        attrs["rag.shadow_cost.nano_usd"] = int(row["shadow_cost_nano_usd"])
        attrs["rag.shadow_cost.usd"] = int(row["shadow_cost_nano_usd"]) / NANO
    _put(attrs, "rag.price.version", row.get("price_version"))
    _put(attrs, "rag.price.source", row.get("price_source"))


def _common_attrs(row: dict) -> dict:
    attrs: dict[str, object] = {"rag.query_id": str(row.get("query_id")), "rag.status": str(row.get("status"))}
    for key in ("variant", "experiment"):
        _put(attrs, f"rag.{key}", row.get(key))
    if row.get("latency_ms") is not None:
        attrs["rag.latency_ms"] = float(row["latency_ms"])
    return attrs


def _error_type(row: dict) -> str:
    if row.get("status") == "timeout":
        return "timeout"
    err = str(row.get("error") or "")
    return err.split(":", 1)[0].strip() or str(row.get("status"))


def span_status(row: dict) -> Status:
    if row.get("status") in FAILED:
        return Status(StatusCode.ERROR, str(row.get("error") or row.get("status"))[:500])
    return Status(StatusCode.UNSET)


def _usage_attrs(attrs: dict, row: dict, *, genai: bool, llm: bool) -> None:
    """Token counts: always under rag.usage.*; as GenAI/OpenInference usage only for real model calls."""
    inp, out = int(row.get("input_tokens") or 0), int(row.get("output_tokens") or 0)
    cached, written = int(row.get("cached_tokens") or 0), int(row.get("cache_write_tokens") or 0)
    reasoning = int(row.get("reasoning_tokens") or 0)
    attrs.update({"rag.usage.input_tokens": inp, "rag.usage.output_tokens": out})
    _put(attrs, "rag.usage.source", row.get("usage_source"))
    _put(attrs, "rag.estimate_note", row.get("estimate_note"))
    if genai:
        # gen_ai.usage.input_tokens counts every prompt token, cached ones included (as the ledger does)
        attrs.update({"gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out})
        if cached:
            attrs["gen_ai.usage.cache_read.input_tokens"] = cached
        if written:
            attrs["gen_ai.usage.cache_creation.input_tokens"] = written
        if reasoning:
            attrs["gen_ai.usage.reasoning.output_tokens"] = reasoning
    if llm:
        attrs.update({"llm.token_count.prompt": inp, "llm.token_count.completion": out,
                      "llm.token_count.total": inp + out})
        if cached:
            attrs["llm.token_count.prompt_details.cache_read"] = cached
        if written:
            attrs["llm.token_count.prompt_details.cache_write"] = written
        if reasoning:
            attrs["llm.token_count.completion_details.reasoning"] = reasoning


def attempt_attrs(row: dict, default_provider: str) -> dict:
    """One physical LLM attempt (a generate row with an attempt_id)."""
    provider = row.get("provider") or default_provider
    model = row.get("model") or "unknown"
    attrs = _common_attrs(row)
    attrs.update({"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.system": provider,
                  "gen_ai.request.model": model, "openinference.span.kind": "LLM", "llm.model_name": model,
                  "llm.provider": provider, "llm.system": provider, "rag.stage": "generate",
                  "rag.attempt": int(row.get("attempt") or 1), "rag.possibly_billed": bool(row.get("possibly_billed"))})
    _put(attrs, "rag.call_id", row.get("call_id"))
    _put(attrs, "rag.output_at_risk_tokens", row.get("output_at_risk_tokens"))
    for key in ("context_tokens", "context_budget_tokens"):
        _put(attrs, f"rag.{key}", row.get(key))
    _usage_attrs(attrs, row, genai=True, llm=True)
    _cost_attrs(attrs, row)
    if row.get("cost_nano_usd") is not None:
        attrs["llm.cost.total"] = int(row["cost_nano_usd"]) / NANO  # OpenInference's cost attribute, USD
    if row.get("status") in FAILED:
        attrs["error.type"] = _error_type(row)
    return attrs


def stage_attrs(row: dict) -> dict:
    """A stage row that is not an LLM attempt: embed_query, retrieve, rerank, an extractive generate."""
    stage = str(row.get("stage"))
    attrs = _common_attrs(row)
    attrs["rag.stage"] = stage
    extractive = stage == "generate"  # no model was called: its tokens and cost are a shadow estimate
    attrs["openinference.span.kind"] = "CHAIN" if extractive else OI_KIND.get(stage, "CHAIN")
    model = row.get("model")
    called = model is not None and not extractive and stage in GENAI_OP
    if called:
        attrs["gen_ai.operation.name"] = GENAI_OP[stage]
        attrs["gen_ai.request.model"] = model
        if stage.startswith("embed"):
            attrs["embedding.model_name"] = model
    else:
        _put(attrs, "rag.model", model)
    for key in ("cache_hits", "cache_misses", "context_tokens", "context_budget_tokens", "call_id"):
        _put(attrs, f"rag.{key}", row.get(key))
    _usage_attrs(attrs, row, genai=called, llm=False)
    _cost_attrs(attrs, row)
    if row.get("status") in FAILED:
        attrs["error.type"] = _error_type(row)
    return attrs


def query_attrs(row: dict, children: list[dict]) -> dict:
    attrs = _common_attrs(row)
    attrs.update({"openinference.span.kind": "CHAIN", "rag.kind": str(row.get("kind") or "query")})
    for key in ("mode", "origin", "arm", "shadow_of"):
        _put(attrs, f"rag.{key}", row.get(key))
    _put(attrs, "user.id", row.get("user_id"))        # OpenInference; Phoenix groups by them
    _put(attrs, "session.id", row.get("session_id"))
    _put(attrs, "gen_ai.conversation.id", row.get("session_id"))
    # totals of the rows below, as the ledger's query_costs view computes them (unpriced stays unpriced)
    costs = [r.get("cost_nano_usd") for r in children]
    attrs["rag.cost.unpriced_rows"] = sum(c is None and r.get("price_source") == "unpriced" for c, r in zip(costs, children))
    attrs["rag.cost.priced_nano_usd"] = sum(int(c) for c in costs if c is not None)
    if not any(c is None for c in costs):
        priced = sum(int(c) for c in costs if c is not None)
        attrs["rag.cost.nano_usd"] = priced
        attrs["rag.cost.usd"] = priced / NANO
    attrs["rag.usage.input_tokens"] = sum(int(r.get("input_tokens") or 0) for r in children)
    attrs["rag.usage.output_tokens"] = sum(int(r.get("output_tokens") or 0) for r in children)
    return attrs


def generate_call_attrs(query_id: str, call_id: str | None, attempts: list[dict]) -> dict:
    """The logical generate call, parent of its attempts: totals over them."""
    last = attempts[-1]
    costs = [r.get("cost_nano_usd") for r in attempts]
    attrs: dict[str, Any] = {"rag.query_id": str(query_id), "rag.stage": "generate", "rag.status": str(last.get("status")),
             "openinference.span.kind": "CHAIN", "rag.attempts": len(attempts),
             "rag.usage.input_tokens": sum(int(r.get("input_tokens") or 0) for r in attempts),
             "rag.usage.output_tokens": sum(int(r.get("output_tokens") or 0) for r in attempts),
             "rag.cost.priced_nano_usd": sum(int(c) for c in costs if c is not None),
             "rag.cost.unpriced": any(c is None for c in costs)}
    if not attrs["rag.cost.unpriced"]:
        attrs["rag.cost.nano_usd"] = attrs["rag.cost.priced_nano_usd"]
        attrs["rag.cost.usd"] = attrs["rag.cost.nano_usd"] / NANO
    _put(attrs, "rag.call_id", call_id)
    for key in ("variant", "experiment"):
        _put(attrs, f"rag.{key}", last.get(key))
    return attrs
