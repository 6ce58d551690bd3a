"""Chinese numerals <-> integers, and article labels normalised for matching.

`第一千零六十四条`, `第1064条` and `第 1064 条` must all mean article 1064; `之一` is a sub-article.
"""
from __future__ import annotations

import re

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
           "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
CN_NUM = "零〇一二两三四五六七八九十百千万"


def cn_to_int(s: str) -> int:
    """'一千零六十四' -> 1064, '十七' -> 17, '264' -> 264."""
    s = s.strip()
    if s.isdigit():
        return int(s)
    if not s or any(ch not in _DIGITS and ch not in _UNITS for ch in s):
        raise ValueError(f"not a Chinese numeral: {s!r}")
    total, section, digit = 0, 0, 0
    for ch in s:
        if ch in _DIGITS:
            digit = _DIGITS[ch]
        elif ch == "万":
            total += (section + digit) * 10000
            section, digit = 0, 0
        else:
            section += (digit or 1) * _UNITS[ch]
            digit = 0
    return total + section + digit


def int_to_cn(n: int) -> str:
    """1064 -> '一千零六十四', 17 -> '十七' (the form laws use)."""
    if n == 0:
        return "零"
    digits = "零一二三四五六七八九"
    if n >= 10000:
        rest = n % 10000
        return f"{int_to_cn(n // 10000)}万" + ("零" if 0 < rest < 1000 else "") + (int_to_cn(rest) if rest else "")
    out: list[str] = []
    zero = False
    for unit_value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        d = n // unit_value % 10
        if d == 0:
            zero = bool(out)
            continue
        if zero:
            out.append("零")
            zero = False
        out.append(("" if (d == 1 and unit == "十" and not out) else digits[d]) + unit)
    return "".join(out)


# 第X条 / 第X条之Y, Chinese or Arabic numerals, stray whitespace before 条 allowed (刑事诉讼法 quirk).
ARTICLE_REF = re.compile(
    rf"第\s*([{CN_NUM}]+|\d+)\s*条(?:\s*之\s*([{CN_NUM}]+|\d+))?")


def article_key(num: int, sub: int = 0) -> str:
    """Normalised key used in payloads and queries: '264', '133-1'."""
    return f"{num}-{sub}" if sub else str(num)


def parse_article_label(label: str) -> str | None:
    """'第一百三十三条之一' -> '133-1'; None when the label is not an article reference."""
    refs = find_article_refs(label)
    return refs[0] if refs else None


def find_article_refs(text: str) -> list[str]:
    """Every article key mentioned in `text`, in order, duplicates kept."""
    out = []
    for m in ARTICLE_REF.finditer(text):
        try:
            sub = cn_to_int(m.group(2)) if m.group(2) else 0
            out.append(article_key(cn_to_int(m.group(1)), sub))
        except ValueError:
            continue
    return out
