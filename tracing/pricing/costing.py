"""The one guarded quote: a `StageUsage` in, the same usage with its `Price` out.

Which price applies is the usage's `price_basis`; what is charged is its `billing`:

    basis        price                                              billed          shadow
    llm          the model's entry in the price table (PriceTable)  cost            cost 0, shadow = the quote
    embed        RAG_EMBED_PRICE_PER_1K  (a hosted equivalent)      cost            cost 0, shadow = the rate
    rerank       RAG_RERANK_PRICE_PER_1K (a hosted equivalent)      cost            cost 0, shadow = the rate
    rerank_http  RAG_RERANK_PRICE_USD per RAG_RERANK_PRICE_UNIT     cost = shadow   -
    (none)       nothing to price                                   cost 0

An unknown model or an unset rerank price is unpriced (cost None), never $0. A fault in the price table
never costs the row: the usage comes back unpriced (billed) or with an unknown shadow, and the fault is
counted and logged. The composition root hands the same `LedgerPricer` to the query chain (the answer's
figures) and to the CostTracer (rows of LLM calls made outside the chain), so both price alike.
"""
from __future__ import annotations

import logging
import threading
from decimal import Decimal

from rag_app.core import decimal_text, to_nano
from rag_app.core import Price, StageUsage
from tracing.pricing.table import PriceTable, Quote, endpoint_of, rate_quote

log = logging.getLogger(__name__)
PRICE_UNITS = ("search", "1k_tokens", "1m_tokens")


def bill(tokens: int, searches: int, price_usd: str | None, unit: str, model: str) -> tuple[int | None, str]:
    """What a hosted reranker bills for one call, and the price version that says how it was priced."""
    if price_usd is None:
        return None, "unpriced"
    price = Decimal(price_usd)
    amount = {"search": Decimal(searches), "1k_tokens": Decimal(tokens) / 1000,
              "1m_tokens": Decimal(tokens) / 1_000_000}[unit]
    return to_nano(amount * price), f"rerank:{model}=${price_usd}/{unit} (RAG_RERANK_PRICE_USD)"


class LedgerPricer:
    def __init__(self, prices: PriceTable, *, embed_rate_per_1k: float = 0.0, rerank_rate_per_1k: float = 0.0,
                 rerank_price_usd: str | None = None, rerank_price_unit: str = "search", provider: str | None = None,
                 endpoint: str | None = None, rerank_endpoint: str | None = None):
        if rerank_price_unit not in PRICE_UNITS:
            raise ValueError(f"RAG_RERANK_PRICE_UNIT must be one of {', '.join(PRICE_UNITS)}, not {rerank_price_unit!r}")
        self.prices = prices
        self.rates = {"embed": embed_rate_per_1k, "rerank": rerank_rate_per_1k}
        self.rerank_price_usd, self.rerank_price_unit = rerank_price_usd, rerank_price_unit
        self.provider = provider
        # where LLM calls are sent (host of OPENAI_BASE_URL) and the HTTP reranker's host, recorded on their rows
        self.endpoint, self.rerank_endpoint = endpoint, rerank_endpoint
        self.faults = 0
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, s, prices: PriceTable) -> LedgerPricer:
        return cls(prices, embed_rate_per_1k=s.embed_price_per_1k, rerank_rate_per_1k=s.rerank_price_per_1k,
                   rerank_price_usd=s.rerank_price_usd, rerank_price_unit=s.rerank_price_unit,
                   provider=s.llm_provider, endpoint=endpoint_of(s.openai_base_url),
                   rerank_endpoint=endpoint_of(s.rerank_url) if s.rerank_url else None)

    def price(self, usage: StageUsage) -> StageUsage:
        try:
            return usage.priced(self._price(usage))
        except Exception:  # the one place a pricing fault is swallowed: the row is kept, unpriced
            with self._lock:
                self.faults += 1
            log.exception("price lookup failed for %s/%s; row written unpriced", usage.stage, usage.model)
            billed_cost = None if usage.billing == "billed" else 0
            return usage.priced(Price(billed_cost, None, getattr(self.prices, "version", "?"), "unpriced", self.provider))

    def _price(self, u: StageUsage) -> Price:
        if u.billing == "none" or u.price_basis is None:
            return Price(0, None, None, None, self.provider)
        if u.price_basis == "rerank_http":
            cost, version = bill(u.input_tokens, u.search_units or 1, self.rerank_price_usd, self.rerank_price_unit,
                                 u.model or "rerank")
            return Price(cost, cost, version, "rate" if cost is not None else "unpriced", self.provider,
                         self.rerank_endpoint)
        if u.price_basis in self.rates:
            quote = rate_quote(u.input_tokens, self.rates[u.price_basis], u.price_basis)
            provider, endpoint = self.provider, None
        else:
            quote = self._llm_quote(u)
            provider, endpoint = self.prices.endpoint_provider(u.model or "unknown", self.provider), self.endpoint
        billed, shadow = (0, quote.cost_nano) if u.billing == "shadow" else (quote.cost_nano, None)
        native = None if quote.native_cost is None or quote.cost_nano is None else decimal_text(quote.native_cost)
        return Price(billed, shadow, quote.version, quote.source, provider, endpoint, quote.applied,
                     quote.effective_from, quote.warning, quote.currency if native is not None else None, native,
                     quote.fx, self._at_risk(u, quote) if u.price_basis == "llm" and u.billing == "billed" else None)

    def _at_risk(self, u: StageUsage, quote: Quote) -> int | None:
        """What the output tokens at risk would add to this call's bill: the call priced with them minus the
        call as recorded, so they cost this row's own output rate (its prompt's tier, peak or off-peak)."""
        risk = u.attempt.output_at_risk_tokens if u.attempt is not None else None
        if not risk or quote.cost_nano is None:
            return None
        more = self.prices.quote(u.model or "unknown", u.input_tokens, u.output_tokens + risk, u.cached_tokens,
                                 provider=self.provider, cache_write_tokens=u.cache_write_tokens, at=u.started_at,
                                 explicit_cache=u.explicit_cache)
        return None if more.cost_nano is None else max(more.cost_nano - quote.cost_nano, 0)

    def _llm_quote(self, u: StageUsage) -> Quote:
        # the price in force when the call was made (its start), not when it is priced
        return self.prices.quote(u.model or "unknown", u.input_tokens, u.output_tokens, u.cached_tokens,
                                 provider=self.provider, cache_write_tokens=u.cache_write_tokens, at=u.started_at,
                                 explicit_cache=u.explicit_cache)
