"""What one stage of a query did and what it cost: `StageUsage`, returned beside every stage's result.

A stage function returns `(result, StageUsage)`; the chain prices the usage once (a `Pricer`, wired in
by the composition root), hands it to the tracer as the custom event `USAGE_EVENT`, and keeps it on
the `Answer`. So the ledger row and what `rag ask` / `POST /v1/ask` show are the same value: nothing is
read back from the ledger to say what an answer cost, and no stage keeps "the last call" on `self`.

    StageUsage            facts: stage, model, status, tokens by kind, cache hits/misses, where the
    ├── billing           counts came from (usage_source), what is paid for (billing + price_basis),
    ├── AttemptInfo       an LLM attempt's place in its logical call (absent for other stages),
    └── Price             filled by the Pricer: billed and shadow nano-dollars, price version/source.

billing: "billed"  the provider charges for these tokens (LLM calls, a hosted reranker);
         "shadow"  local work priced at what a hosted equivalent would bill (cost 0, shadow > 0);
         "none"    nothing to price (a store query, a skipped stage).
price_basis: which price applies: "llm" (the model's price table entry), "embed" / "rerank"
         (RAG_EMBED_PRICE_PER_1K / RAG_RERANK_PRICE_PER_1K), "rerank_http" (RAG_RERANK_PRICE_USD per
         RAG_RERANK_PRICE_UNIT), None.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

USAGE_EVENT = "rag.usage"  # the custom LangChain event a stage's StageUsage travels in

# An LLM judge grading an answer (rag_app/quality/judge.py) is evaluation spend: its attempts are rows of
# stage `judge` under a run of its own (`queries.kind = 'judge'`, id `judge_run_id(<the judged query>)`),
# never rows of the query it grades, so that query's cost, its budget and its arm's figures stay its own.
JUDGE_STAGE = JUDGE_KIND = "judge"
GRADES_QUERY = "grades_query_id"  # run metadata of a judge run: the query its grades (query_quality rows) belong to


def judge_run_id(query_id: str) -> str:
    """The ledger id of the judge run that graded `query_id` (one per query: sampling is by query id)."""
    return f"judge:{query_id}"

Billing = Literal["billed", "shadow", "none"]
PriceBasis = Literal["llm", "embed", "rerank", "rerank_http"]


@dataclass(frozen=True)
class Price:
    """What the usage cost under the price table in force. `cost_nano` None = unpriced (never $0)."""

    cost_nano: int | None
    shadow_nano: int | None = None
    version: str | None = None
    source: str | None = None  # override | bundled | genai-prices | rate | unpriced
    provider: str | None = None  # whose prices: RAG_LLM_PROVIDER, a model prefix or the endpoint's host says
    endpoint: str | None = None  # host[:port] the call was sent to (None: no endpoint, a local model)
    rule: str | None = None  # the time rule applied: peak | off-peak | holiday | ...; None: none
    effective_from: str | None = None  # the dated price used
    warning: str | None = None  # what the price could not be sure of
    currency: str | None = None  # the price's own currency (USD, CNY); None: no price table entry used
    native_cost: str | None = None  # the cost in that currency, exact decimal text ("0.01672")
    fx: str | None = None  # the rate a non-USD cost was converted at ("7.0197 CNY/USD (2026-01-08, ...)")
    # what the output tokens a cut reply may still bill (AttemptInfo.output_at_risk_tokens) would cost, at this
    # call's own output rate (its tier, its peak or off-peak price); None: none at risk, or unpriced
    at_risk_nano: int | None = None

    @property
    def unpriced(self) -> bool:
        return self.source == "unpriced"


@dataclass(frozen=True)
class AttemptInfo:
    """One physical LLM request inside a logical call (retries are attempts 2, 3, ...)."""

    call_id: str | None  # None for a request made outside the retry loop
    number: int
    attempt_id: str  # the key the `started` row and the final row share
    possibly_billed: bool = False  # sent, then cut (timeout): the provider may bill it
    output_at_risk_tokens: int | None = None  # a cut reply may still bill up to this many more


@dataclass(frozen=True)
class StageUsage:
    stage: str
    model: str | None = None
    status: str = "ok"  # ok | skipped | error | timeout | retry | started
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cache_hits: int | None = None
    cache_misses: int | None = None
    usage_source: str | None = "local"  # provider | local | estimated:<tokenizer>
    billing: Billing = "none"
    price_basis: PriceBasis | None = None
    search_units: int | None = None  # what a per-search reranker bills
    explicit_cache: bool | None = None  # the provider said the prompt cache was explicit (DashScope: hits at 10%)
    error: str | None = None
    note: str | None = None  # how an estimate was made, or why a lever stepped aside
    context_budget_tokens: int | None = None
    context_tokens: int | None = None
    started_at: str | None = None  # UTC ISO-8601
    ended_at: str | None = None
    latency_ms: float | None = None
    attempt: AttemptInfo | None = None
    raw: dict[str, Any] | None = field(default=None, compare=False)  # the provider's usage object, as sent
    price: Price | None = None  # None until priced

    def priced(self, price: Price) -> StageUsage:
        return replace(self, price=price)

    def timed(self, started_at: str, ended_at: str, latency_ms: float) -> StageUsage:
        return replace(self, started_at=started_at, ended_at=ended_at, latency_ms=latency_ms)


@dataclass(frozen=True)
class EmbedUsage:
    """What one embed call did: texts it was asked for, how many came from the cache, and the tokens of
    those it embedded now (cache hits cost nothing, billed or shadow)."""

    texts: int = 0
    tokens: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    not_embedded: int = 0  # misses left without a vector (rescore answers from the vectors ingest made)

    def __add__(self, other: EmbedUsage) -> EmbedUsage:
        return EmbedUsage(self.texts + other.texts, self.tokens + other.tokens,
                          self.cache_hits + other.cache_hits, self.cache_misses + other.cache_misses,
                          self.not_embedded + other.not_embedded)


@dataclass(frozen=True)
class RerankUsage:
    """What one rerank call used: tokens (reported by the provider or counted by us) and search units."""

    tokens: int
    source: str = "local"  # provider | local | estimated:<tokenizer>
    search_units: int | None = None
    raw: dict[str, Any] | None = None  # the provider's usage object, as sent


@dataclass(frozen=True)
class UsageTotals:
    """What a list of priced usages adds up to, as one presenter shows it on every front door, by the
    ledger's rules for a query's totals (tracing/ledger/rollups.py): a row with no cost makes the total
    cost unknown (None), an unpriced row the total shadow cost, never the sum of the rest; those sums
    are `cost_nano` and `shadow_nano`, lower bounds."""

    cost_nano: int  # the priced rows' costs
    shadow_nano: int  # the priced rows' shadow costs
    unpriced_rows: int  # price_source "unpriced" (an extractive answer's generate row: $0 billed, shadow unknown)
    null_cost_rows: int = 0  # rows whose billed cost is unknown

    @property
    def unpriced(self) -> bool:
        return self.unpriced_rows > 0 or self.null_cost_rows > 0

    @property
    def known_cost_nano(self) -> int | None:
        return None if self.null_cost_rows else self.cost_nano

    @property
    def known_shadow_nano(self) -> int | None:
        return None if self.unpriced else self.shadow_nano


def totals(usages: Iterable[StageUsage]) -> UsageTotals:
    cost = shadow = unpriced = null_cost = 0
    for u in usages:
        p = u.price
        null_cost += p is None or p.cost_nano is None
        unpriced += p is None or p.unpriced
        if p is not None:
            cost += p.cost_nano or 0
            shadow += p.shadow_nano or 0
    return UsageTotals(cost, shadow, unpriced, null_cost)
