"""The price in force at the moment a call was made, for every vendor rule the price table carries.

Each case: a model, the call's start (UTC), its tokens, and the nano-dollars computed here by hand
from the providers' per-million prices (nano-dollars per token = $/M x 1000). DeepSeek's peak is
Beijing time (UTC+8) Monday-Friday 09:00-12:00 and 14:00-18:00, twice the off-peak price, with
Chinese public holidays off-peak; CNY prices are converted at the dated rate (6.7628 CNY/USD from
2026-09-16, 7.0796 from 2025-11-26)."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from rag_app.core.errors import ConfigError
from tracing.pricing import FxTable, display_currency
from tracing.pricing import bundled_calendars
from tracing.pricing import PriceTable, load_bundled_table, provider_for_url
from rag_app.models.llm_usage import chunk_usage, usage_from_raw

T = (1500, 200, 1000, 0)          # input (1,000 of them cache hits), output, cache hits, cache writes
Q_EXPLICIT = (3000, 100, 2048, 512)  # DashScope's explicit cache: 512 written, 2,048 read
Q_IMPLICIT = (3000, 100, 2048, 0)
G = (10000, 500, 6400, 0)          # a 64%-cached GLM call

# id: (model, provider, at, tokens, nano by hand, source, rule)
CASES = {
    # deepseek-flash $0.15 miss / $0.003 hit / $0.60 out off-peak; peak x2
    "flash Fri 11:00 Beijing: peak": ("deepseek-flash", None, "2026-11-27T03:00:00Z", T,
                                      500 * 300 + 1000 * 6 + 200 * 1200, "bundled", "peak"),
    "flash Fri 12:30 lunch: off-peak": ("deepseek-flash", None, "2026-11-27T04:30:00Z", T,
                                        500 * 150 + 1000 * 3 + 200 * 600, "bundled", "off-peak"),
    "flash Fri 17:59:59: peak": ("deepseek-flash", None, "2026-11-27T09:59:59Z", T, 396_000, "bundled", "peak"),
    "flash Fri 18:00 sharp: off-peak": ("deepseek-flash", None, "2026-11-27T10:00:00Z", T, 198_000, "bundled", "off-peak"),
    "flash Sat 11:00 weekend: off-peak": ("deepseek-flash", None, "2026-11-28T03:00:00Z", T, 198_000, "bundled", "off-peak"),
    "flash Mid-Autumn Fri 10:00 (CN holiday)": ("deepseek-flash", None, "2026-09-25T02:00:00Z", T, 198_000, "bundled",
                                                "off-peak"),
    "flash National Day Thu 11:00 (CN holiday)": ("deepseek-flash", None, "2026-10-01T03:00:00Z", T, 198_000, "bundled",
                                                  "off-peak"),
    "flash Thu after the holiday: peak": ("deepseek-flash", None, "2026-10-08T03:00:00Z", T, 396_000, "bundled", "peak"),
    "flash make-up Saturday 10-10: off-peak": ("deepseek-flash", None, "2026-10-10T03:00:00Z", T, 198_000, "bundled",
                                               "off-peak"),
    # deepseek-v4-flash: $0.14 / $0.028 / $0.28 at launch, hits $0.0028 from 2026-04-26 12:15 UTC,
    # $0.22 / $0.007 / $0.66 off-peak from 2026-08-16 16:00 UTC (peak every day), weekdays only from
    # 2026-08-23, billed as deepseek-flash from 2026-09-10
    "v4-flash launch day": ("deepseek-v4-flash", None, "2026-04-25T00:00:00Z", T, 500 * 140 + 1000 * 28 + 200 * 280,
                            "bundled", None),
    "v4-flash after the cache cut": ("deepseek-v4-flash", None, "2026-06-01T03:00:00Z", T,
                                     500 * 140 + 1000 * 2.8 + 200 * 280, "bundled", None),
    "v4-flash Sat 2026-08-22: daily peak then": ("deepseek-v4-flash", None, "2026-08-22T03:00:00Z", T,
                                                 500 * 440 + 1000 * 14 + 200 * 1320, "bundled", "peak"),
    "v4-flash Sat 2026-08-29: weekend rule": ("deepseek-v4-flash", None, "2026-08-29T03:00:00Z", T,
                                              500 * 220 + 1000 * 7 + 200 * 660, "bundled", "off-peak"),
    "v4-flash billed as flash": ("deepseek-v4-flash", None, "2026-11-27T03:00:00Z", T, 396_000, "bundled", "peak"),
    # deepseek-chat: V3.1 $0.56 / $0.07 / $1.68 from 2025-09-05 16:00 UTC, V3.2 $0.28 / $0.028 / $0.42 from
    # 2025-09-29 (Beijing), alias of V4-Flash from 2026-04-24, retired 2026-07-24 15:59 UTC
    "chat 23:59:59 Beijing, 2025-09-28: V3.1": ("deepseek-chat", None, "2025-09-28T15:59:59Z", T,
                                                500 * 560 + 1000 * 70 + 200 * 1680, "bundled", None),
    "chat 00:00 Beijing, 2025-09-29: V3.2": ("deepseek-chat", None, "2025-09-28T16:00:00Z", T,
                                             500 * 280 + 1000 * 28 + 200 * 420, "bundled", None),
    "chat as V4-Flash alias": ("deepseek-chat", None, "2026-05-01T00:00:00Z", T, 128_800, "bundled", None),
    "chat after retirement": ("deepseek-chat", None, "2026-07-24T16:00:00Z", T, None, "unpriced", None),
    # before the first dated price: genai-prices' older list at the call's own time
    # ($0.27 / $0.07 / $1.10 by day, $0.135 / $0.035 / $0.55 from 16:30 to 00:30 UTC)
    "chat 2025-06-01 day (genai-prices)": ("deepseek-chat", None, "2025-06-01T02:00:00Z", T,
                                           500 * 270 + 1000 * 70 + 200 * 1100, "genai-prices",
                                           "time-of-day price 00:30-16:30 UTC"),
    "chat 2025-06-01 night (genai-prices)": ("deepseek-chat", None, "2025-06-01T17:00:00Z", T,
                                             500 * 135 + 1000 * 35 + 200 * 550, "genai-prices", None),
    # deepseek-v4-pro: $0.435 / $0.003625 / $0.87 (discounted), then $0.66 / $0.022 / $1.98 off-peak
    "v4-pro discounted": ("deepseek-v4-pro", None, "2026-06-01T00:00:00Z", T, 500 * 435 + 1000 * 3.625 + 200 * 870,
                          "bundled", None),
    "v4-pro Fri peak": ("deepseek-v4-pro", None, "2026-11-27T03:00:00Z", T, 500 * 1320 + 1000 * 44 + 200 * 3960,
                        "bundled", "peak"),
    # qwen-plus (Singapore) $0.40 in / $1.20 out; implicit hit 20% ($0.08), explicit hit 10% ($0.04),
    # explicit cache creation 125% ($0.50); before 2026-01-29 hits at 40% ($0.16)
    "qwen-plus explicit cache": ("qwen-plus", None, "2026-11-01T00:00:00Z", Q_EXPLICIT,
                                 440 * 400 + 2048 * 40 + 512 * 500 + 100 * 1200, "bundled", None),
    "qwen-plus implicit cache": ("qwen-plus", None, "2026-11-01T00:00:00Z", Q_IMPLICIT,
                                 952 * 400 + 2048 * 80 + 100 * 1200, "bundled", None),
    "qwen-plus 2025-12 hits at 40%": ("qwen-plus", None, "2025-12-01T00:00:00Z", Q_IMPLICIT,
                                      952 * 400 + 2048 * 160 + 100 * 1200, "bundled", None),
    "qwen-plus-latest": ("qwen-plus-latest", None, "2026-11-01T00:00:00Z", Q_IMPLICIT, 664_640, "bundled", None),
    "qwen-plus dated snapshot": ("qwen-plus-2025-07-28", None, "2026-11-01T00:00:00Z", Q_IMPLICIT, 664_640, "bundled",
                                 None),
    "dashscope/qwen-plus (LiteLLM name)": ("dashscope/qwen-plus", None, "2026-11-01T00:00:00Z", Q_IMPLICIT, 664_640,
                                           "bundled", None),
    # above 128K: $0.4 up to 256K (LiteLLM's figures from Model Studio's page; unpriced in 0.7.0)
    "qwen-plus above 128K": ("qwen-plus", None, "2026-11-01T00:00:00Z", (140_000, 100, 0, 0), 56_120_000, "bundled",
                             None),
    "qwen-plus above its last tier": ("qwen-plus", None, "2026-11-01T00:00:00Z", (1_100_000, 100, 0, 0), None,
                                      "unpriced", None),
    # $1.2 in, 20% for an implicit hit, $6 out up to 32K: 952 x 1,200 + 2,048 x 240 + 100 x 6,000 nano-$
    "qwen3-max (up to 32K)": ("qwen3-max", None, "2026-11-01T00:00:00Z", Q_IMPLICIT, 2_233_920, "bundled", None),
    "qwen3-max before its first dated price": ("qwen3-max", None, "2025-12-01T00:00:00Z", Q_IMPLICIT, None,
                                               "unpriced", None),
    # qwen-flash, mainland: CNY 0.15 in / 0.03 implicit hit / 0.015 explicit hit / 0.1875 creation / 1.5 out
    # per million up to 128K; 0.6 / 6 up to 256K; at 6.7628 CNY per USD (the 2026-09-16 rate)
    "qwen-flash CN explicit (CNY 342.72e-6)": ("qwen-flash", "alibaba-cn", "2026-09-20T00:00:00Z", Q_EXPLICIT, 50_677,
                                               "bundled", None),
    "qwen-flash CN implicit (CNY 354.24e-6)": ("qwen-flash", "alibaba-cn", "2026-09-20T00:00:00Z", Q_IMPLICIT, 52_381,
                                               "bundled", None),
    "qwen-flash CN 200K tier (CNY 0.126)": ("qwen-flash", "alibaba-cn", "2026-09-20T00:00:00Z", (200_000, 1000, 0, 0),
                                            18_631_336, "bundled", None),
    "qwen-flash CN at the 2025-11-26 rate": ("qwen-flash", "alibaba-cn", "2025-12-15T00:00:00Z", Q_IMPLICIT, 50_037,
                                             "bundled", None),
    # GLM on z.ai (USD): $0.60 in / $0.11 cached / $2.20 out; bigmodel.cn glm-5.3 CNY 8 / 2 / 28
    "glm-4.6 z.ai, 64% cached": ("glm-4.6", None, "2026-11-01T00:00:00Z", G, 3600 * 600 + 6400 * 110 + 500 * 2200,
                                 "bundled", None),
    "glm-4.5 z.ai, 64% cached": ("glm-4.5", None, "2026-11-01T00:00:00Z", G, 3_964_000, "bundled", None),
    "glm-4.7 defaults to z.ai (genai-prices)": ("glm-4.7", None, "2026-11-01T00:00:00Z", G, 3_964_000, "genai-prices",
                                                None),
    "glm-4.6 on bigmodel.cn (no confirmed price)": ("glm-4.6", "zhipuai", "2026-11-01T00:00:00Z", G, None, "unpriced",
                                                    None),
    "glm-5.3 bigmodel.cn (CNY 0.0556)": ("glm-5.3", "zhipuai", "2026-09-20T00:00:00Z", G, 8_221_447, "bundled", None),
    # Kimi: k2.5 $0.60 / $0.10 / $3.00; k2-0905 $0.60 / $0.15 / $2.50, retired 2026-05-25 (Beijing)
    "kimi-k2.5": ("kimi-k2.5", None, "2026-11-01T00:00:00Z", Q_IMPLICIT, 952 * 600 + 2048 * 100 + 100 * 3000, "bundled",
                  None),
    "kimi-k2-0905 before retirement": ("kimi-k2-0905-preview", None, "2026-05-24T00:00:00Z", Q_IMPLICIT,
                                       952 * 600 + 2048 * 150 + 100 * 2500, "bundled", None),
    "kimi-k2-0905 after retirement": ("kimi-k2-0905-preview", None, "2026-06-01T00:00:00Z", Q_IMPLICIT, None, "unpriced",
                                      None),
    # OpenAI and Anthropic through genai-prices: gpt-4o-mini $0.15 / $0.075 / $0.60; claude-3-5-haiku
    # $0.80 in / $0.08 read / $1.00 write / $4.00 out
    "gpt-4o-mini": ("gpt-4o-mini", None, "2026-11-01T00:00:00Z", (2000, 300, 1024, 0), 976 * 150 + 1024 * 75 + 300 * 600,
                    "genai-prices", None),
    "claude-3-5-haiku cache write": ("claude-3-5-haiku", None, "2026-11-01T00:00:00Z", (2500, 50, 2000, 400),
                                     100 * 800 + 2000 * 80 + 400 * 1000 + 50 * 4000, "genai-prices", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_price_in_force_at_the_calls_start(case):
    model, provider, at, (tin, tout, cached, write), nano, source, rule = CASES[case]
    q = PriceTable().quote(model, tin, tout, cached, provider=provider, cache_write_tokens=write, at=at)
    assert (q.cost_nano, q.source, q.rule) == (None if nano is None else round(nano), source, rule), q.basis


def test_a_quote_says_which_dated_price_and_rule_and_rate():
    t = PriceTable()
    q = t.quote("deepseek-flash", *T[:3], at="2026-10-01T03:00:00Z")
    assert q.basis == ("bundled deepseek/deepseek-flash from 2026-09-19, "
                       "off-peak: Thu 2026-10-01 11:00 Asia/Shanghai (CN public holiday)")
    assert q.effective_from == "2026-09-19" and q.warning is None
    q = t.quote("qwen-flash", *Q_IMPLICIT[:3], provider="alibaba-cn", at="2026-09-20T00:00:00Z")
    assert (q.currency, q.native_cost) == ("CNY", Decimal("0.00035424"))  # 354.24 yuan per million calls
    assert q.fx.startswith("6.7628 CNY/USD (2026-09-16") and q.warning is None
    # 46 days past the newest rate: converted at it, and the row says so (#45)
    late = t.quote("qwen-flash", *Q_IMPLICIT[:3], provider="alibaba-cn", at="2026-11-01T00:00:00Z")
    assert late.cost_nano == q.cost_nano and "newest CNY rate we have (2026-09-16), 46 days before" in late.warning
    q = t.quote("deepseek-chat", *T[:3], at="2026-08-01T00:00:00Z")
    assert q.cost_nano is None and "retired 2026-07-24T15:59:00Z" in q.warning
    q = t.quote("qwen-plus-latest", *Q_IMPLICIT[:3], at="2026-11-01T00:00:00Z")
    assert "alias of qwen-plus" in q.basis


def test_a_year_without_a_holiday_calendar_is_peak_and_says_so(tmp_path):
    monday_spring_festival_2027 = "2027-02-08T02:00:00Z"  # 10:00 Beijing; the 2027 notice is not in the calendar
    q = PriceTable().quote("deepseek-flash", *T[:3], at=monday_spring_festival_2027)
    assert (q.cost_nano, q.rule) == (396_000, "peak") and "no CN holiday calendar for 2027" in q.warning
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"version": "h", "models": {},
                             "holidays": {"CN": {"2027": {"source": "test", "days_off": ["2027-02-06..2027-02-13"]}}}}))
    q = PriceTable.load(f).quote("deepseek-flash", *T[:3], at=monday_spring_festival_2027)
    assert (q.cost_nano, q.rule, q.warning) == (198_000, "off-peak", None)


def test_the_endpoint_picks_the_providers_price():
    assert provider_for_url("https://open.bigmodel.cn/api/paas/v4") == "zhipuai"
    assert provider_for_url("https://dashscope.aliyuncs.com/compatible-mode/v1") == "alibaba-cn"
    assert provider_for_url("https://dashscope-intl.aliyuncs.com/compatible-mode/v1") == "alibaba-intl"
    assert provider_for_url("http://127.0.0.1:8000/v1") is None
    at = "2026-11-01T00:00:00Z"
    assert PriceTable.load(None, base_url="https://api.z.ai/api/paas/v4").quote("glm-4.6", *G[:3], at=at).cost_nano == 3_964_000
    assert PriceTable.load(None, base_url="https://open.bigmodel.cn/api/paas/v4").quote("glm-4.6", *G[:3], at=at).source \
        == "unpriced"  # never the z.ai USD list for a bigmodel.cn call
    cn = PriceTable.load(None, base_url="https://dashscope.aliyuncs.com/compatible-mode/v1")
    assert cn.quote("qwen-flash", *Q_EXPLICIT[:3], cache_write_tokens=512, at=at).cost_nano == 50_677


def test_override_file_with_dated_cny_prices_and_its_own_rate(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"version": "cn-1", "models": {"zhipuai/glm-4.6": {"currency": "CNY", "prices": [
        {"from": "2026-01-01", "input_per_mtok": "2", "cache_read_per_mtok": "0.4", "output_per_mtok": "8"}]}},
        "fx": {"CNY": [{"from": "2026-11-01", "per_usd": "8", "source": "round test rate"}]}}))
    t = PriceTable.load(f)
    # 3,600 x 2 + 6,400 x 0.4 + 500 x 8 = 13,760 yuan per million calls = 0.01376 CNY = $0.00172 at 8 per USD
    q = t.quote("glm-4.6", *G[:3], provider="zhipuai", at="2026-11-15T00:00:00Z")
    assert (q.cost_nano, q.source, q.currency) == (1_720_000, "override", "CNY")
    assert t.quote("glm-4.6", *G[:3], provider="zhipuai", at="2025-12-31T00:00:00Z").source == "unpriced"  # before it
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"x": {"prices": [{"from": "someday", "input_per_mtok": "1",
                                                            "output_per_mtok": "1"}]}}}))
    with pytest.raises(ConfigError, match="bad.json: model 'x'"):
        PriceTable.load(bad)


def test_every_bundled_price_is_dated_sourced_and_checked():
    table = load_bundled_table()
    for key, entry in table.entries.items():
        assert entry.source.startswith("https://") and entry.checked in ("2026-12-01", "2026-12-04", "2026-12-05"), key
        for period in entry.periods:
            assert period.effective_from is not None or period.unpriced, f"{key}: an undated price"
            assert period.tiers or period.unpriced or period.billed_as, key
    assert {"deepseek/deepseek-chat", "deepseek/deepseek-flash", "deepseek/deepseek-v4-pro", "alibaba-intl/qwen-plus",
            "alibaba-cn/qwen-flash", "zai/glm-4.6", "zhipuai/glm-5.3", "moonshotai/kimi-k2.5"} <= set(table.entries)
    cal = bundled_calendars()["CN"]
    assert cal.years == {2025, 2026} and all(cal.sources[y].startswith("https://www.gov.cn/") for y in cal.years)
    assert len([d for d in cal.days_off if d.year == 2026]) == 33  # 3 + 9 + 3 + 5 + 3 + 3 + 7 days off


def test_kimi_usage_shapes_and_dashscope_explicit_mark():
    kimi = {"prompt_tokens": 3000, "completion_tokens": 100, "total_tokens": 3100, "cached_tokens": 2048}
    u = usage_from_raw(kimi)
    assert (u.input_tokens, u.cached_tokens, u.output_tokens) == (3000, 2048, 100)
    final_chunk = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "usage": kimi}]}
    assert chunk_usage(final_chunk) == kimi
    assert chunk_usage({"choices": [{"index": 0, "delta": {"content": "x"}}]}) is None
    assert chunk_usage({"usage": {"prompt_tokens": 1}, "choices": []}) == {"prompt_tokens": 1}
    dashscope = {"prompt_tokens": 3000, "completion_tokens": 100,
                 "prompt_tokens_details": {"cached_tokens": 2048, "cache_type": "ephemeral"}}
    u = usage_from_raw(dashscope)
    assert u.explicit_cache is True and usage_from_raw(kimi).explicit_cache is None
    # an explicit-cache hit with no write in the same request is still billed at 10%
    q = PriceTable().quote("qwen-plus", 3000, 100, 2048, at="2026-11-01T00:00:00Z", explicit_cache=u.explicit_cache)
    assert q.cost_nano == 952 * 400 + 2048 * 40 + 100 * 1200


def test_report_currency_uses_the_latest_dated_rate():
    fx = load_bundled_table().fx
    cny = display_currency("cny", fx)
    assert (cny.code, str(cny.rate.per_usd), cny.rate.day) == ("CNY", "6.7628", "2026-09-16")
    assert cny.convert(0.001) == pytest.approx(0.0067628)
    assert display_currency(None, fx).rate is None
    with pytest.raises(ValueError, match="RAG_REPORT_CURRENCY=EUR"):
        display_currency("EUR", fx)
    rate, note = FxTable.parse({"CNY": [{"from": "2026-01-08", "per_usd": "7"}]}).rate_at("CNY", "2025-01-01")
    assert str(rate.per_usd) == "7" and "earliest" in note


def test_the_clock_is_only_a_default():
    fixed = PriceTable(clock=lambda: datetime(2026, 11, 27, 3, 0, tzinfo=timezone.utc))  # Friday 11:00 Beijing
    assert fixed.quote("deepseek-flash", *T[:3]).cost_nano == 396_000
    assert fixed.quote("deepseek-flash", *T[:3], at="2026-11-28T03:00:00+00:00").cost_nano == 198_000
