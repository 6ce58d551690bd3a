"""Whether a claim means what the passage sentences it matches say: the same legal modality, the same
negation, the same numbers. A claim made of a passage's words can still flip it (不得 -> 可以, a 不
dropped, 三十日 -> 十五日); word overlap cannot see that, these checks can.

Both texts are cut into words (rag_app/quality/lexicon.py's modal, negation and comparison words as one
word each, else English words, numbers and CJK characters) and aligned (difflib: the longest common runs).
What the alignment leaves unmatched on each side is where they differ; only the part of the passage
between the first and last matched word (and a few words around it) is compared, so a claim that
quotes one clause of a long sentence is not blamed for the modal of another clause.

- modality differs: an unmatched modal word of the claim and one of the passage in different classes
  (应当 vs 可以, shall vs may, 不得 vs 可以); a prohibition or exemption the claim adds where the passage
  has no modal (可以 -> 不得 is caught above; X -> 不得X here); one the passage has that the claim drops
  (不得X -> X). An obligation or permission written out as a plain statement (应当设立 -> 设立) is not
  a change of meaning here.
- negation added / removed: more unmatched negations (不 未 没有 非 无 / not no never) on one side.
- comparison differs: 以上 vs 以下, 不得超过 vs 不得少于, before vs after (不得超过三年 = 三年以下 = 最长三年).
- numbers: every number the claim states must be one the matched sentences state (same value, same
  unit where both give one); 三年 vs 五年 is "number differs", 3 days vs 3 months "unit differs".
"""
from __future__ import annotations

from collections.abc import Callable, Collection
from difflib import Match, SequenceMatcher
from functools import lru_cache

from rag_app.quality.lexicon import NEG, NEUTRAL, NOB, OBL, PER, PRO, WORD_RE, word_class
from rag_app.quality.numbers import Number, numbers
from rag_app.quality.units import EN_STOP

MODAL = (OBL, PRO, PER, NOB)
CMP = "CMP"  # a comparison with a number: CMP>=, CMP<=, CMP<, CMP>
STRONG = (PRO, NOB)  # adding or dropping one of these reverses what may be done
AROUND = 3  # words either side of the aligned part of the passage still compared
NEAR = 6  # a one-word match this close to the aligned part belongs to it

Word = tuple[str, str | None]  # (key, lexicon class or None)
Words = tuple[Word, ...]


@lru_cache(maxsize=4096)
def words(text: str) -> Words:
    """(key, class) per word: class is a lexicon class or None; keys compare equal across the two texts."""
    out: list[Word] = []
    for m in WORD_RE.finditer(text):
        kind, tok = m.lastgroup, m.group(0)
        if kind in ("en", "zh"):
            cls = word_class(tok)
            out.append((tok.lower() if kind == "en" else tok, None if cls == NEUTRAL else cls))
        elif kind == "nt":
            out.append((tok.lower(), NEG))
        elif kind == "w":
            low = tok.lower()
            if low not in EN_STOP:
                out.append((low, None))
        else:
            out.append((tok, None))
    return _fused(out)


def _fused(ws: list[Word]) -> Words:
    """A permission next to a negation is one modal word: 能够不 / 可不 = need not (as 可以不), 不能够 /
    not may = must not, so a paraphrase that writes them apart is read as the passage's word."""
    out: list[Word] = []
    for key, cls in ws:
        if out and ((out[-1][1] == PER and cls == NEG) or (out[-1][1] == NEG and cls == PER)):
            prev = out.pop()
            out.append((prev[0] + key, NOB if prev[1] == PER else PRO))
        else:
            out.append((key, cls))
    return tuple(out)


def _unmatched(claim: Words, span: Words) -> tuple[list[Word], list[Word]]:
    """The claim's words the alignment left unmatched, and the passage's within the aligned part."""
    blocks = _common_runs(claim, span)
    if not blocks:
        return list(claim), []
    lo, hi = _aligned_part(blocks, len(span))
    return (_left_out(claim, {i for b in blocks for i in range(b.a, b.a + b.size)}, 0),
            _left_out(span[lo:hi], {j for b in blocks for j in range(b.b, b.b + b.size)}, lo))


def _common_runs(claim: Words, span: Words) -> list[Match]:
    """The runs of words the two texts share (difflib's longest common runs, in order)."""
    matcher = SequenceMatcher(None, [k for k, _ in claim], [k for k, _ in span], autojunk=False)
    return [b for b in matcher.get_matching_blocks() if b.size]


def _left_out(ws: Words, matched: set[int], start: int) -> list[Word]:
    """The words of `ws` (numbered from `start`) whose number is not in `matched`."""
    return [w for i, w in enumerate(ws, start) if i not in matched]


def _aligned_part(blocks: list[Match], span_len: int) -> tuple[int, int]:
    """Where in the passage the claim is: from the first to the last run of two or more common words,
    AROUND words more either side. A lone common word (的, the) far off anchors nothing; one close by (效
    of 无效 after the quoted clause) extends the part."""
    anchors = [b for b in blocks if b.size >= 2] or blocks
    lo, hi = anchors[0].b, anchors[-1].b + anchors[-1].size
    for b in blocks:
        if hi <= b.b <= hi + NEAR:
            hi = b.b + b.size
    for b in reversed(blocks):
        if lo - NEAR <= b.b + b.size <= lo:
            lo = b.b
    return max(0, lo - AROUND), min(span_len, hi + AROUND)


# -- what the unmatched words of each side say: one named check per way a claim can flip its passage ----------
# Each takes (the claim's unmatched words, the passage's) and returns the reason or None; the first reason
# in MEANING_CHECKS' order is the one shown.

def _is_modal(cls: str | None) -> bool:
    return cls in MODAL


def _is_comparison(cls: str | None) -> bool:
    return cls is not None and cls.startswith(CMP)


def _of_kind(ws: list[Word], kind: Callable[[str | None], bool]) -> list[Word]:
    return [(k, c) for k, c in ws if kind(c)]


def _classes(ws: list[Word]) -> set[str | None]:
    return {c for _, c in ws}


def _first_in(ws: list[Word], classes: Collection[str | None]) -> str:
    return next(k for k, c in ws if c in classes)


def _swapped(mine: list[Word], theirs: list[Word], kind: Callable[[str | None], bool], what: str) -> str | None:
    """A word of `kind` in a class only the claim has, where the passage has one in a class only it has."""
    my_words, their_words = _of_kind(mine, kind), _of_kind(theirs, kind)
    added, dropped = _classes(my_words) - _classes(their_words), _classes(their_words) - _classes(my_words)
    if added and dropped:
        return f"{what} differs: {_first_in(my_words, added)} vs {_first_in(their_words, dropped)}"
    return None


def _strong_only_in(one: list[Word], other: list[Word]) -> str | None:
    """The first prohibition or exemption of `one`, when `one` has a STRONG class `other` has not."""
    ones, others = _of_kind(one, _is_modal), _of_kind(other, _is_modal)
    return _first_in(ones, STRONG) if (_classes(ones) - _classes(others)) & set(STRONG) else None


def _modality_swapped(mine: list[Word], theirs: list[Word]) -> str | None:
    return _swapped(mine, theirs, _is_modal, "modality")  # 应当 vs 可以, 不得 vs 可以


def _modality_added(mine: list[Word], theirs: list[Word]) -> str | None:
    word = _strong_only_in(mine, theirs)  # X -> 不得X
    return None if word is None else f"modality added: {word}"


def _modality_dropped(mine: list[Word], theirs: list[Word]) -> str | None:
    word = _strong_only_in(theirs, mine)  # 不得X -> X
    return None if word is None else f"modality dropped: {word}"


def _comparison_swapped(mine: list[Word], theirs: list[Word]) -> str | None:
    return _swapped(mine, theirs, _is_comparison, "comparison")  # 以上 vs 以下


def _negations(ws: list[Word]) -> list[str]:
    return [k for k, c in ws if c == NEG]


def _negation_added(mine: list[Word], theirs: list[Word]) -> str | None:
    my_negs = _negations(mine)
    return f"negation added: {my_negs[0]}" if len(my_negs) > len(_negations(theirs)) else None


def _negation_removed(mine: list[Word], theirs: list[Word]) -> str | None:
    their_negs = _negations(theirs)
    return f"negation removed: {their_negs[0]}" if len(their_negs) > len(_negations(mine)) else None


MEANING_CHECKS: tuple[Callable[[list[Word], list[Word]], str | None], ...] = (
    _modality_swapped, _modality_added, _modality_dropped, _comparison_swapped, _negation_added, _negation_removed)


def meaning_differs(claim_text: str, span_text: str) -> str | None:
    """Why the claim's modality or negation is not the passage's, or None."""
    claim, span = words(claim_text), words(span_text)
    if not any(c for _, c in claim) and not any(c for _, c in span):
        return None  # neither says anything modal, negated or compared: nothing to flip
    mine, theirs = _unmatched(claim, span)
    for check in MEANING_CHECKS:
        why = check(mine, theirs)
        if why is not None:
            return why
    return None


def _show(n: Number) -> str:
    return n.text


def number_differs(claim_text: str, span_text: str) -> str | None:
    """Why a number the claim states is not one the passage sentences state, or None."""
    mine = numbers(claim_text)
    if not mine:
        return None
    theirs = numbers(span_text)
    missing = next((n for n in mine if not any(n.same(t) for t in theirs)), None)
    return None if missing is None else _why_not_stated(missing, theirs)


def _why_not_stated(n: Number, theirs: list[Number]) -> str:
    """How the passage's numbers differ from one the claim states: the value in another unit, another value
    in the unit, or neither."""
    same_value = [t for t in theirs if abs(t.value - n.value) < 1e-9]
    if same_value:
        return f"unit differs: {_show(n)} vs {_show(same_value[0])}"
    same_unit = [t for t in theirs if n.unit and t.unit == n.unit]
    if same_unit:
        return f"number differs: {_show(n)} vs {_show(same_unit[0])}"
    return f"number not in the passage: {_show(n)}"
