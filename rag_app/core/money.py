"""Money is integer nano-dollars in the ledger and Decimal in code.

Why nano, not micro: one query embedding of 20 tokens at $0.02/M costs $0.0000004, which
micro-dollars round to zero; nano-dollars keep it exact for every price table in use.
"""
from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

NANO = Decimal("1000000000")


def to_nano(usd: Decimal | None) -> int | None:
    if usd is None:
        return None
    return int((Decimal(usd) * NANO).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def from_nano(nano: int | None) -> Decimal | None:
    return None if nano is None else Decimal(nano) / NANO


def usd_json(nano: int | None) -> float | None:
    """For JSON output: a plain number with nanodollar precision (or null when unpriced)."""
    return None if nano is None else float(Decimal(nano) / NANO)


def positive_usd(text: str | None) -> Decimal | None:
    """A positive, finite dollar amount from a setting's text ("0.01"), or None when it is not one."""
    try:
        d = Decimal(str(text).strip()) if text is not None else None
    except (InvalidOperation, ValueError):
        return None
    return d if d is not None and d.is_finite() and d > 0 else None


def decimal_text(d: Decimal) -> str:
    """An exact amount as plain decimal text, no exponent and no trailing zeros: 0.01672, 12, 0.000000003."""
    text = format(d.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
