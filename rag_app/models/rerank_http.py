"""Rerank over HTTP: `POST {url} {model, query, documents, top_n}` -> `{results: [{index,
relevance_score}], usage|meta}` — the shape Jina, Cohere, SiliconFlow, DashScope's compatible
mode, vLLM, Xinference and TEI's /rerank (via its OpenAI-ish routers) serve. For users without a
GPU; the bge cross-encoder (rerank.FlagCrossEncoder) stays the local option.

Each call returns its scores with its usage (`RerankUsage`: tokens, search units, the provider's usage
object): tokens from the response's `usage` when the provider sends one (usage_source `provider`),
otherwise our cl100k estimate (`estimated:cl100k_base`). The price — RAG_RERANK_PRICE_USD per
RAG_RERANK_PRICE_UNIT, "unpriced" when unset, never $0 — is applied by the Pricer like every other
stage's (tracing/pricing/costing.py); this client keeps nothing of one call for the next.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from rag_app.core import RagError
from rag_app.text import count_tokens
from rag_app.core import RerankUsage


class RerankHTTPError(RagError):
    pass


class HttpReranker:
    billing = "billed"  # the provider charges for each call

    def __init__(self, url: str, model: str, *, api_key: str | None = None, timeout_s: float = 30.0,
                 client: httpx.Client | None = None):
        self.url, self.model_name = url, model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(timeout=timeout_s, headers=headers)

    def score(self, query: str, passages: Sequence[str]) -> tuple[list[float], RerankUsage]:
        body = {"model": self.model_name, "query": query, "documents": list(passages), "top_n": len(passages),
                "return_documents": False}
        try:
            resp = self.client.post(self.url, json=body)
        except httpx.HTTPError as e:
            raise RerankHTTPError(f"rerank endpoint {self.url} unreachable: {type(e).__name__}: {e}") from e
        if resp.status_code != 200:
            raise RerankHTTPError(f"rerank endpoint {self.url} answered {resp.status_code}: {resp.text[:200]}")
        try:
            data = resp.json()
            scores = [float("-inf")] * len(passages)
            for r in data["results"]:
                scores[int(r["index"])] = float(r.get("relevance_score", r.get("score")))
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise RerankHTTPError(f"rerank endpoint {self.url} sent no results[].index/relevance_score ({e!r})") from e
        return scores, usage_of(data, query, passages)


def usage_of(data: dict[str, Any], query: str, passages: Sequence[str]) -> RerankUsage:
    """Tokens and search units as the provider reports them (Jina/SiliconFlow `usage`, Cohere
    `meta.billed_units`); tokens we count ourselves are marked estimated."""
    usage, meta = _obj(data.get("usage")), _obj(data.get("meta"))
    billed = _obj(meta.get("billed_units"))
    tokens = _count(usage.get("total_tokens") or usage.get("prompt_tokens") or billed.get("input_tokens"))
    source = "provider"
    if tokens is None:
        tokens = count_tokens(query) * len(passages) + sum(count_tokens(p) for p in passages)
        source = "estimated:cl100k_base"
    searches = _count(billed.get("search_units") or usage.get("search_units")) or 1
    raw = {k: v for k, v in (("usage", usage), ("meta", meta)) if v} or None
    return RerankUsage(tokens, source, searches, raw)


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: object) -> int | None:
    """A non-negative count the provider sent, or None for anything else (junk is never billed as a count)."""
    try:
        n = int(value)  # type: ignore[call-overload]  # junk of any type is refused below
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n >= 0 else None
