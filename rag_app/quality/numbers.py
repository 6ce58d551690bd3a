"""The numbers a claim states, normalised so a passage can be asked whether it states the same: amounts,
durations, ages, counts, percentages and fractions, in Arabic or Chinese numerals (三十日 = 30日,
5万元 = 50000元, 百分之二十 = 20%, 三分之二 = 2/3) or English words (thirty (30) days = 30 day).

Ordinals of a law's parts (第三款, 第一项, 第X条) are references, not quantities: an article number is checked as a
citation (rag_app/quality/claims.py), the others are left alone. A lone Chinese digit that is part of
a word (统一, 一般, 一方) is not a number; with a unit (一人, 一年) it is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rag_app.text import cn_to_int

_CN = "零〇一二两三四五六七八九十百千万亿"
_UNITS = {  # unit as written -> (canonical unit, multiplier)
    "个工作日": ("workday", 1), "工作日": ("workday", 1), "个月": ("month", 1), "周岁": ("age", 1), "岁": ("age", 1),
    "小时": ("hour", 1), "日": ("day", 1), "天": ("day", 1), "月": ("month", 1), "年": ("year", 1),
    "周": ("week", 1), "万元": ("yuan", 10_000), "亿元": ("yuan", 100_000_000), "元": ("yuan", 1),
    "美元": ("usd", 1), "倍": ("times", 1), "人": ("person", 1), "名": ("person", 1), "次": ("times", 1),
    "项": ("item", 1), "%": ("percent", 1), "‰": ("permille", 1), "万": ("", 10_000), "亿": ("", 100_000_000),
    "business days": ("workday", 1), "business day": ("workday", 1), "working days": ("workday", 1),
    "working day": ("workday", 1), "calendar days": ("day", 1), "calendar day": ("day", 1), "days": ("day", 1),
    "day": ("day", 1), "months": ("month", 1), "month": ("month", 1), "years": ("year", 1), "year": ("year", 1),
    "weeks": ("week", 1), "week": ("week", 1), "hours": ("hour", 1), "hour": ("hour", 1), "percent": ("percent", 1),
    "per cent": ("percent", 1), "dollars": ("usd", 1), "dollar": ("usd", 1), "times": ("times", 1),
}
_EN_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_EN_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
                  "hundred": 100})
_EN_NUM = "|".join(sorted(_EN_WORDS, key=len, reverse=True))
_UNIT_RE = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
NUMBER = re.compile(
    rf"(?P<ord>第\s*(?=[\d{_CN}]+\s*[条款项章节编目]))?(?P<cur>\$|US\$|USD\s?|RMB\s?|人民币)?(?P<pct>百分之|千分之)?"
    rf"(?P<num>\d+(?:,\d{{3}})*(?:\.\d+)?|[{_CN}]+|\b(?:{_EN_NUM})(?:-(?:{_EN_NUM}))?\b)"
    rf"(?:分之(?P<den>\d+|[{_CN}]+))?\s*(?:\((?P<paren>\d+)\)\s*)?(?P<unit>{_UNIT_RE})?", re.I)
_LONE_CN_DIGIT = re.compile(rf"^[{_CN}]$")


@dataclass(frozen=True)
class Number:
    value: float
    unit: str  # canonical: day, month, year, yuan, percent, person ...; "" when none was written
    text: str  # as written, for the reason shown to people

    def same(self, other: Number) -> bool:
        return abs(self.value - other.value) < 1e-9 and (self.unit == other.unit or not self.unit or not other.unit)


def _value(num: str) -> float | None:
    num = num.replace(",", "")
    low = num.lower()
    if "-" in low:  # twenty-five
        a, _, b = low.partition("-")
        return float(_EN_WORDS.get(a, 0) + _EN_WORDS.get(b, 0))
    if low in _EN_WORDS:
        return float(_EN_WORDS[low])
    try:
        return float(num)
    except ValueError:
        pass
    if "亿" in num:  # legal_numbers reads up to 万
        head, _, tail = num.partition("亿")
        try:
            return cn_to_int(head or "一") * 1e8 + (cn_to_int(tail) if tail else 0)
        except ValueError:
            return None
    try:
        return float(cn_to_int(num))
    except ValueError:
        return None


def numbers(text: str) -> list[Number]:
    """The quantities `text` states, in order."""
    found = (_number(m, text) for m in NUMBER.finditer(text))
    return [n for n in found if n is not None]


def _number(m: re.Match[str], text: str) -> Number | None:
    """The quantity one match states; None for a reference (第三款; 第五十年, 第三日 are quantities), a
    digit that is part of a word (统一, 一般, 一方), or what reads as no number."""
    if m["ord"] or _part_of_word(m):
        return None
    value = _value(m["num"])
    if value is None:
        return None
    unit, mult = _unit(m["unit"] or "")
    written = _fraction_or_percent(m, value, unit)
    if written is None:
        return None
    value, unit = written
    return Number(value * mult, unit or _unit_implied(m, mult, text), m.group(0).strip())


def _part_of_word(m: re.Match[str]) -> bool:
    """A lone Chinese digit with no unit, percentage or fraction: 统一, 一般, 一方."""
    return bool(_LONE_CN_DIGIT.match(m["num"])) and not m["unit"] and not m["pct"] and not m["den"]


def _unit(written: str) -> tuple[str, int]:
    """(canonical unit, multiplier) of a unit as written ("", 1 for none or one not listed)."""
    return _UNITS.get(written.lower(), _UNITS.get(written, ("", 1)))


def _fraction_or_percent(m: re.Match[str], value: float, unit: str) -> tuple[float, str] | None:
    """(value, unit) once a fraction (三分之二: the denominator is written first) or a percentage is read;
    None for a fraction that reads as no number."""
    if m["den"]:
        top = _value(m["den"])
        if top is None or not value:
            return None
        value, unit = top / value, "fraction"
    if m["pct"]:
        value, unit = value * (1 if m["pct"] == "百分之" else 0.1), "percent"
    return value, unit


def _unit_implied(m: re.Match[str], mult: int, text: str) -> str:
    """The unit of a number written without one: its currency sign's ($5, 人民币3万), or yuan for an amount
    in 万 or 亿 followed by 元 (5万 with no unit after it is the multiplier alone)."""
    if m["cur"]:
        return "usd" if "$" in m["cur"] or "USD" in m["cur"].upper() else "yuan"
    if mult != 1:
        return "yuan" if text[m.end():m.end() + 2].startswith("元") else ""
    return ""
