"""Prices: what a model's tokens cost at the moment a call was made, and every tool that reads them.

    table.py     PriceTable: three dated layers (overrides, bundled_prices.json, genai-prices), quotes
    rules.py     time-of-day rules (DeepSeek's peak hours) and the holiday calendars (holidays_cn.json)
    fx.py        exchange rates by date (CNY prices shown and summed in USD) and the report currency
    costing.py   LedgerPricer: the one guarded quote, a StageUsage in, the same usage priced out
    reprice.py   re-pricing ledger rows under another table (`rag reprice`, `--prices repriced`)
    check.py     the bundled table against LiteLLM's cost map (`rag prices --check`)

A new price rule goes in rules.py; a new model's price in bundled_prices.json (with source and date).
"""
from tracing.pricing.check import INSTALL_HINT, compare, litellm_cost_map
from tracing.pricing.costing import LedgerPricer
from tracing.pricing.fx import USD, FxTable, display_currency
from tracing.pricing.reprice import readable_time, reprice
from tracing.pricing.rules import HolidayCalendar, PeakRule, as_utc, bundled_calendars, parse_instant
from tracing.pricing.table import PriceTable, Quote, bare_model, endpoint_of, load_bundled_table, provider_for_url, rate_quote

__all__ = [
    "INSTALL_HINT",
    "USD",
    "FxTable",
    "HolidayCalendar",
    "LedgerPricer",
    "PeakRule",
    "PriceTable",
    "Quote",
    "as_utc",
    "bare_model",
    "bundled_calendars",
    "compare",
    "display_currency",
    "endpoint_of",
    "litellm_cost_map",
    "load_bundled_table",
    "parse_instant",
    "provider_for_url",
    "rate_quote",
    "readable_time",
    "reprice",
]
