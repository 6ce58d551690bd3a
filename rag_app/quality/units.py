"""The units a claim and a passage are compared in: each CJK character, each English word (its Snowball
stem, function words left out) and each run of digits. One unit list per text and bigrams of units for
both sides of every comparison, so a claim and a passage are always cut the same way: a quote that is
mostly digits (a fee table's 5000元) meets its Chinese passage at the same size (0.8 chose bigrams or
4-grams per text, and such a quote scored 0 against its own passage).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol

_UNIT = re.compile(r"[\u3400-\u9fff]|[a-z]+|\d+(?:\.\d+)?")
# English function words and modal verbs: they carry no topic (modality is checked apart, meaning.py)
EN_STOP = frozenset("""a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each either else for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just may me might more most
must my myself neither no nor not of off on once only or other ought our ours ourselves out over own same shall she
should so some such than that the their theirs them themselves then there these they this those through to too under
until up upon us very was we were what when where whether which while who whom whose why will with within without
would you your yours yourself yourselves""".split())


class _Stemmer(Protocol):
    """What snowballstemmer's stemmers do (the package ships no type information)."""

    def stemWord(self, word: str) -> str: ...


@lru_cache(maxsize=1)
def _stemmer() -> _Stemmer:
    import snowballstemmer

    english: _Stemmer = snowballstemmer.stemmer("english")
    return english


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def units(text: str) -> list[str]:
    out = []
    for u in _UNIT.findall(text.lower()):
        if "a" <= u[0] <= "z":
            if u in EN_STOP:
                continue
            u = _stem(u)
        out.append(u)
    return out


def bigrams(us: list[str]) -> set[str]:
    """Bigrams of units (one unit alone when that is all there is)."""
    if len(us) < 2:
        return set(us)
    return {f"{a}\x1f{b}" for a, b in zip(us, us[1:])}


def coverage(grams: set[str], passage_grams: frozenset[str] | set[str]) -> float:
    """The share of `grams` the passage holds."""
    return len(grams & passage_grams) / len(grams) if grams else 1.0

