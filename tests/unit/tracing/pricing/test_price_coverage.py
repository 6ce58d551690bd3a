"""Coverage a command can find: qwen-flash, qwen3-max and qwen3.5-plus on Model Studio international, and
qwen-plus prompts above 128K, are priced with their source URL and date (0.7.0: unpriced); DeepSeek's
yuan list for mainland accounts is a provider (`RAG_LLM_PROVIDER=deepseek-cn`). Nano-dollars by hand."""
from __future__ import annotations

from decimal import Decimal

import pytest

from tracing.pricing import PriceTable

SAT = "2026-11-28T03:00:00.000+00:00"  # Saturday 11:00 Beijing: off-peak
MON = "2026-11-30T03:00:00.000+00:00"  # Monday 11:00 Beijing: peak


@pytest.mark.parametrize("model, prompt, out, nano", [
    ("qwen-flash", 1000, 100, 1000 * 50 + 100 * 400),            # $0.05 / $0.4 up to 256K
    ("qwen-flash", 300_000, 100, 300_000 * 250 + 100 * 2000),    # $0.25 / $2 above
    ("qwen3-max", 40_000, 100, 40_000 * 2400 + 100 * 12_000),    # the 32K-128K tier
    ("qwen3.5-plus", 1000, 100, 1000 * 400 + 100 * 2400),
    ("qwen-plus", 200_000, 100, 200_000 * 400 + 100 * 1200),     # above 128K: was unpriced
    ("qwen-plus", 300_000, 100, 300_000 * 1200 + 100 * 3600),
])
def test_model_studio_international_prices_by_prompt_length(model, prompt, out, nano):
    q = PriceTable().quote(model, prompt, out, at=SAT)
    assert q.cost_nano == nano and q.source == "bundled" and q.warning is None
    d = PriceTable().describe(model, at=SAT)
    assert d["url"].startswith("https://www.alibabacloud.com/help/en/model-studio/") and d["checked"] >= "2026-12-01"


def test_deepseek_mainland_accounts_pay_the_yuan_list():
    t = PriceTable()
    usd = t.quote("deepseek-flash", 1500, 200, 1000, at=SAT)  # 500 x 0.15 + 1000 x 0.003 + 200 x 0.6
    cny = t.quote("deepseek-flash", 1500, 200, 1000, provider="deepseek-cn", at=SAT)
    assert usd.cost_nano == 198_000 and cny.currency == "CNY" and cny.native_cost == Decimal("0.00132")
    assert cny.cost_nano == round(Decimal("0.00132") / Decimal("6.7628") * 10**9)  # 195,185 at the dated rate
    assert f"{usd.cost_nano / cny.cost_nano - 1:.1%}" == "1.4%"  # what the USD list overcharged a yuan account
    peak = t.quote("deepseek-flash", 1500, 200, 1000, provider="deepseek-cn", at=MON)
    assert peak.native_cost == 2 * Decimal("0.00132") and peak.applied == "peak"
    pro = t.quote("deepseek-v4-pro", 1500, 200, provider="deepseek-cn", at=SAT)
    assert pro.cost_nano is None and "yuan list for deepseek-v4-pro" in pro.warning  # unknown, never the USD list


@pytest.mark.parametrize("model, provider, nano", [
    # genai-prices' $0.2288 in / $0.3432 out, DeepSeek's V3.2 cache hit $0.028 (0.9.x: hits at $0.2288)
    ("deepseek/deepseek-v3.2", None, 500 * 228.8 + 1000 * 28 + 200 * 343.2),
    # fine-tuned gpt-4o-mini: $0.30 in, $0.15 cached, $1.20 out (0.9.x: hits at $0.30)
    ("ft:gpt-4o-mini-2024-07-18:acme::B1x2y3", None, 500 * 300 + 1000 * 150 + 200 * 1200),
    ("ft:gpt-4o-mini-2024-07-18:acme::B1x2y3", "openai", 500 * 300 + 1000 * 150 + 200 * 1200),
])
def test_cache_reads_are_priced_apart_from_the_input(model, provider, nano):
    q = PriceTable().quote(model, 1500, 200, 1000, provider=provider, at=SAT)
    assert q.cost_nano == round(nano) and q.source == "bundled" and q.effective_from


def test_every_priced_row_says_which_dated_price_it_used():
    q = PriceTable().quote("gpt-4o-mini", 1000, 100, at=SAT)  # genai-prices dates no base price of its own
    assert q.source == "genai-prices" and q.effective_from.startswith("genai-prices@")
