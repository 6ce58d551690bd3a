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

from difflib import SequenceMatcher
from functools import lru_cache

from rag_app.quality.lexicon import NEG, NEUTRAL, NOB, OBL, PER, PRO, WORD_RE, word_class
from rag_app.quality.numbers import Number, numbers
from rag_app.quality.units import EN_STOP

MODAL = (OBL, PRO, PER, NOB)
CMP = "CMP"  # a comparison with a number: CMP>=, CMP<=, CMP<, CMP>
STRONG = (PRO, NOB)  # adding or dropping one of these reverses what may be done
AROUND = 3  # words either side of the aligned part of the passage still compared
NEAR = 6  # a one-word match this close to the aligned part belongs to it


@lru_cache(maxsize=4096)
def words(text: str) -> tuple[tuple[str, str | None], ...]:
    """(key, class) per word: class is a lexicon class or None; keys compare equal across the two texts."""
    out = []
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


def _fused(ws: list[tuple[str, str | None]]) -> tuple[tuple[str, str | None], ...]:
    """A permission next to a negation is one modal word: 能够不 / 可不 = need not (as 可以不), 不能够 /
    not may = must not, so a paraphrase that writes them apart is read as the passage's word."""
    out: list[tuple[str, str | None]] = []
    for key, cls in ws:
        if out and ((out[-1][1] == PER and cls == NEG) or (out[-1][1] == NEG and cls == PER)):
            prev = out.pop()
            out.append((prev[0] + key, NOB if prev[1] == PER else PRO))
        else:
            out.append((key, cls))
    return tuple(out)


def _unmatched(claim, span) -> tuple[list, list]:
    """The claim's words the alignment left unmatched, and the passage's within the aligned part."""
    sm = SequenceMatcher(None, [k for k, _ in claim], [k for k, _ in span], autojunk=False)
    blocks = [b for b in sm.get_matching_blocks() if b.size]
    if not blocks:
        return list(claim), []
    in_claim = {i for b in blocks for i in range(b.a, b.a + b.size)}
    in_span = {j for b in blocks for j in range(b.b, b.b + b.size)}
    # the aligned part: from the first to the last run of two or more words; a lone common word (的, the)
    # far off anchors nothing, one close by (效 of 无效 after the quoted clause) extends it
    anchors = [b for b in blocks if b.size >= 2] or blocks
    lo, hi = anchors[0].b, anchors[-1].b + anchors[-1].size
    for b in blocks:
        if hi <= b.b <= hi + NEAR:
            hi = b.b + b.size
    for b in reversed(blocks):
        if lo - NEAR <= b.b + b.size <= lo:
            lo = b.b
    lo, hi = max(0, lo - AROUND), min(len(span), hi + AROUND)
    return ([w for i, w in enumerate(claim) if i not in in_claim],
            [w for j, w in enumerate(span[lo:hi], lo) if j not in in_span])


def meaning_differs(claim_text: str, span_text: str) -> str | None:
    """Why the claim's modality or negation is not the passage's, or None."""
    claim, span = words(claim_text), words(span_text)
    if not any(c for _, c in claim) and not any(c for _, c in span):
        return None
    mine, theirs = _unmatched(claim, span)
    mine_modal = [(k, c) for k, c in mine if c in MODAL]
    their_modal = [(k, c) for k, c in theirs if c in MODAL]
    mine_cls, their_cls = {c for _, c in mine_modal}, {c for _, c in their_modal}
    added, dropped = mine_cls - their_cls, their_cls - mine_cls
    if added and dropped:
        a = next(k for k, c in mine_modal if c in added)
        d = next(k for k, c in their_modal if c in dropped)
        return f"modality differs: {a} vs {d}"
    if added & set(STRONG):
        a = next(k for k, c in mine_modal if c in STRONG)
        return f"modality added: {a}"
    if dropped & set(STRONG):
        d = next(k for k, c in their_modal if c in STRONG)
        return f"modality dropped: {d}"
    mine_cmp = [(k, c) for k, c in mine if c and c.startswith(CMP)]
    their_cmp = [(k, c) for k, c in theirs if c and c.startswith(CMP)]
    more, fewer = {c for _, c in mine_cmp} - {c for _, c in their_cmp}, {c for _, c in their_cmp} - {c for _, c in mine_cmp}
    if more and fewer:
        a = next(k for k, c in mine_cmp if c in more)
        d = next(k for k, c in their_cmp if c in fewer)
        return f"comparison differs: {a} vs {d}"
    mine_neg = [k for k, c in mine if c == NEG]
    their_neg = [k for k, c in theirs if c == NEG]
    if len(mine_neg) > len(their_neg):
        return f"negation added: {mine_neg[0]}"
    if len(their_neg) > len(mine_neg):
        return f"negation removed: {their_neg[0]}"
    return None


def _show(n: Number) -> str:
    return n.text


def number_differs(claim_text: str, span_text: str) -> str | None:
    """Why a number the claim states is not one the passage sentences state, or None."""
    mine = numbers(claim_text)
    if not mine:
        return None
    theirs = numbers(span_text)
    for n in mine:
        if any(n.same(t) for t in theirs):
            continue
        same_value = [t for t in theirs if abs(t.value - n.value) < 1e-9]
        if same_value:
            return f"unit differs: {_show(n)} vs {_show(same_value[0])}"
        same_unit = [t for t in theirs if n.unit and t.unit == n.unit]
        if same_unit:
            return f"number differs: {_show(n)} vs {_show(same_unit[0])}"
        return f"number not in the passage: {_show(n)}"
    return None
