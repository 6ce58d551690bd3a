"""Rerank over HTTP: `POST {url} {model, query, documents, top_n}` -> `{results: [{index,
relevance_score}], usage|meta}` — the shape Jina, Cohere, SiliconFlow, DashScope's compatible
mode, vLLM, Xinference and TEI's /rerank (via its OpenAI-ish routers) serve. For users without a
GPU; the bge cross-encoder (rerank.FlagCrossEncoder) stays the local option.

Cost is what the provider bills, per search or per token (RAG_RERANK_PRICE_UNIT), priced by
RAG_RERANK_PRICE_USD and written on the rerank stage's ledger row; with no price set the row is
"unpriced", never $0. Token counts come from the response's `usage` when the provider sends one;
otherwise from our cl100k estimate, and the row says "estimated".
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import httpx

from rag_app.errors import RagError
from rag_app.tokens import count_tokens
from tracing.money import to_nano

PRICE_UNITS = ("search", "1k_tokens", "1m_tokens")


class RerankHTTPError(RagError):
    pass


@dataclass(frozen=True)
class RerankBilling:
    tokens: int
    searches: int
    tokens_estimated: bool
    cost_nano: int | None  # None = unpriced
    price_version: str

    def usage(self) -> dict:
        """Fields the rerank stage reports; cost_tracer writes billed_cost_nano as the row's cost."""
        return {"input_tokens": self.tokens, "billed_cost_nano": self.cost_nano, "price_version": self.price_version,
                "price_source": "rate" if self.cost_nano is not None else "unpriced",
                "search_units": self.searches, "usage_note": "estimated" if self.tokens_estimated else None}


def bill(tokens: int, searches: int, price_usd: str | None, unit: str, model: str) -> tuple[int | None, str]:
    if price_usd is None:
        return None, "unpriced"
    price = Decimal(price_usd)
    amount = {"search": Decimal(searches), "1k_tokens": Decimal(tokens) / 1000,
              "1m_tokens": Decimal(tokens) / 1_000_000}[unit]
    return to_nano(amount * price), f"rerank:{model}=${price_usd}/{unit} (RAG_RERANK_PRICE_USD)"


class HttpReranker:
    def __init__(self, url: str, model: str, *, api_key: str | None = None, timeout_s: float = 30.0,
                 price_usd: str | None = None, price_unit: str = "search", client: httpx.Client | None = None):
        if price_unit not in PRICE_UNITS:
            raise RerankHTTPError(f"RAG_RERANK_PRICE_UNIT must be one of {', '.join(PRICE_UNITS)}, not {price_unit!r}")
        if price_usd is not None:
            try:
                if Decimal(price_usd) < 0:
                    raise ValueError
            except (ArithmeticError, ValueError):
                raise RerankHTTPError(f"RAG_RERANK_PRICE_USD must be a non-negative dollar amount such as 0.002, "
                                      f"not {price_usd!r}") from None
        self.url, self.model_name = url, model
        self.price_usd, self.price_unit = price_usd, price_unit
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(timeout=timeout_s, headers=headers)
        self.last: RerankBilling | None = None

    def score(self, query: str, passages: list[str]) -> list[float]:
        body = {"model": self.model_name, "query": query, "documents": passages, "top_n": len(passages),
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
        self.last = self._billing(data, query, passages)
        return scores

    def _billing(self, data: dict, query: str, passages: list[str]) -> RerankBilling:
        usage = data.get("usage") or {}
        billed = (data.get("meta") or {}).get("billed_units") or {}  # Cohere
        tokens = usage.get("total_tokens") or usage.get("prompt_tokens") or billed.get("input_tokens")
        estimated = tokens is None
        if estimated:
            tokens = count_tokens(query) * len(passages) + sum(count_tokens(p) for p in passages)
        searches = int(billed.get("search_units") or usage.get("search_units") or 1)
        cost, version = bill(int(tokens), searches, self.price_usd, self.price_unit, self.model_name)
        return RerankBilling(int(tokens), searches, estimated, cost, version)

    def count_tokens(self, query: str, passages: list[str]) -> int:
        return self.last.tokens if self.last else 0

    def billing_usage(self) -> dict:
        return self.last.usage() if self.last else {}
