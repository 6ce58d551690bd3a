"""Dated exchange rates: a CNY price stays CNY in the price table and becomes USD only when a call is
priced, at the rate in force at the call's time; reports can show the ledger's USD in CNY
(`RAG_REPORT_CURRENCY=CNY`) at the latest rate, and say which rate and date they used."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from tracing.pricing.rules import as_utc, parse_instant

USD = "USD"
SYMBOLS = {"USD": "$", "CNY": "¥"}
STALE_AFTER = timedelta(days=30)  # a call this long after the newest dated rate is converted at it, with a warning


@dataclass(frozen=True)
class FxRate:
    currency: str
    per_usd: Decimal          # units of `currency` for one US dollar
    effective_from: datetime  # UTC
    day: str                  # the rate's date, as published
    source: str

    def label(self) -> str:
        return f"{self.per_usd} {self.currency}/USD ({self.day}, {self.source})"


class FxTable:
    def __init__(self, rates: dict[str, list[FxRate]] | None = None):
        self.rates = {c: sorted(rs, key=lambda r: r.effective_from) for c, rs in (rates or {}).items()}

    @classmethod
    def parse(cls, data: dict | None) -> "FxTable":
        """{"CNY": [{"from": "2026-01-08", "per_usd": "7.0197", "source": "..."}]}"""
        out: dict[str, list[FxRate]] = {}
        for currency, items in (data or {}).items():
            for it in items:
                rate = Decimal(str(it["per_usd"]))
                if rate <= 0:
                    raise ValueError(f"fx {currency} rate of {it['from']} must be positive")
                out.setdefault(currency, []).append(
                    FxRate(currency, rate, parse_instant(it["from"], "UTC"), str(it["from"]), str(it.get("source", ""))))
        return cls(out)

    def merged(self, other: "FxTable") -> "FxTable":
        rates = {c: list(rs) for c, rs in self.rates.items()}
        for c, rs in other.rates.items():
            rates.setdefault(c, []).extend(rs)
        return FxTable(rates)

    def rate_at(self, currency: str, at: datetime | str) -> tuple[FxRate | None, str | None]:
        """The latest rate published at or before `at`; before the first one, the first one (said so); more
        than STALE_AFTER past the newest one, that one, said so (the books of that day want a newer rate)."""
        rates = self.rates.get(currency) or []
        if not rates:
            return None, f"no {currency}/USD rate in the price table"
        when = as_utc(at)
        earlier = [r for r in rates if r.effective_from <= when]
        if not earlier:
            return rates[0], f"converted at the earliest {currency} rate we have ({rates[0].day})"
        rate = earlier[-1]
        late = when - rate.effective_from
        if rate is rates[-1] and late > STALE_AFTER:
            return rate, (f"converted at the newest {currency} rate we have ({rate.day}), {late.days} days before "
                          f"the call: add a newer one under \"fx\" in RAG_PRICE_OVERRIDES")
        return rate, None

    def latest(self, currency: str) -> FxRate | None:
        rates = self.rates.get(currency) or []
        return rates[-1] if rates else None


@dataclass(frozen=True)
class DisplayCurrency:
    """How reports show money: the ledger's USD, or converted at a dated rate: a figure of one moment (a
    query's) at the rate in force then, a total at the latest rate (named in the note)."""
    code: str = USD
    rate: FxRate | None = None
    table: FxTable | None = None

    @property
    def symbol(self) -> str:
        return SYMBOLS.get(self.code, self.code + " ")

    def convert(self, usd: float | None, at: datetime | str | None = None) -> float | None:
        """USD in this currency, at the rate in force at `at` (default: the latest), rounded to what the
        ledger's nano-dollars can tell: 8 places for CNY, so a yuan price round-trips exactly (0.01672 CNY
        booked as 0.002381868 USD reads 0.01672 again, not 0.0167199987996)."""
        if usd is None or self.rate is None:
            return usd
        rate = self.rate
        if at and self.table is not None:
            try:
                rate = self.table.rate_at(self.code, at)[0] or rate
            except ValueError:
                pass  # an unreadable time: the latest rate, as for a total
        # a nano-dollar's rounding moves the result by at most rate / 2e9: keep the places above that
        places = 8 - rate.per_usd.adjusted()
        return float((Decimal(str(usd)) * rate.per_usd).quantize(Decimal(1).scaleb(-places)))

    def note(self) -> str | None:
        if self.rate is None:
            return None
        return (f"amounts in {self.code} = ledger USD x {self.rate.per_usd} ({self.rate.day} rate, "
                f"{self.rate.source}); each query at the rate of its own day")

    def json(self) -> dict:
        return {"code": self.code, "per_usd": None if self.rate is None else str(self.rate.per_usd),
                "rate_date": None if self.rate is None else self.rate.day,
                "source": None if self.rate is None else self.rate.source}


def display_currency(code: str | None, fx: FxTable) -> DisplayCurrency:
    code = (code or USD).upper()
    if code == USD:
        return DisplayCurrency()
    rate = fx.latest(code)
    if rate is None:
        raise ValueError(f"RAG_REPORT_CURRENCY={code}: no {code}/USD rate in the price table; use USD or CNY")
    return DisplayCurrency(code, rate, fx)
