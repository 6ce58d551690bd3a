"""What an answer-cache hit saved: the original's successful billed usage priced at the hit's time, by the
price in force then (DeepSeek: Beijing Mon-Fri 09:00-12:00 and 14:00-18:00 at twice the off-peak
price), failed attempts excluded; unknown when any of it is unpriced now. Nano-dollars by hand."""
from __future__ import annotations

from rag_app.core.usage import StageUsage
from rag_app.spend.answer_cache import Cached, live_usage
from tracing.pricing import LedgerPricer
from tracing.pricing import PriceTable

SAT = "2026-11-28T03:00:00.000+00:00"   # Saturday 11:00 Beijing: off-peak
FRI = "2026-11-27T03:00:00.000+00:00"   # Friday 11:00 Beijing: peak
OFF = 500 * 150 + 1000 * 3 + 200 * 600  # deepseek-flash, 1,500 in (1,000 hits), 200 out: 198,000


def usage(status: str, model: str = "deepseek-flash", **kw) -> StageUsage:
    base = dict(input_tokens=1500, output_tokens=200, cached_tokens=1000, usage_source="provider",
                billing="billed", price_basis="llm", started_at=SAT)
    return StageUsage("generate", model, status=status, **{**base, **kw})


def original(pricer, *usages):
    priced = [pricer.price(u) for u in usages]
    return Cached({"query_id": "q0"}, sum(u.price.cost_nano or 0 for u in priced), live_usage(priced))


def test_a_hit_saves_the_price_in_force_at_its_own_time():
    pricer = LedgerPricer(PriceTable())
    hit = original(pricer, usage("ok"))
    assert hit.cost_nano == OFF  # the original ran off-peak
    assert hit.saving_at(pricer, FRI) == 2 * OFF  # a live answer at Friday 11:00 would pay the peak price
    assert hit.saving_at(pricer, SAT) == OFF


def test_failed_attempts_are_not_saved_and_unpriced_is_unknown():
    pricer = LedgerPricer(PriceTable())
    reset = usage("error", output_tokens=0, cached_tokens=0, input_tokens=1500)  # billed its prompt estimate
    hit = original(pricer, reset, usage("ok"), StageUsage("embed_query", "bge", billing="shadow", price_basis="embed"))
    assert hit.cost_nano > OFF and len(hit.usage) == 1
    assert hit.saving_at(pricer, SAT) == OFF
    unknown = original(pricer, usage("ok", model="acme-secret-7b"))
    assert unknown.saving_at(pricer, SAT) is None
