"""What a reader is shown of a passage: whole sentences within a token budget, and where they lie.

- Sentences end at 。！？； (Chinese) and at . ! ? followed by a space (English), or at a line
  break: line breaks in the corpora are structural (headings, list items, sub-clauses), so a line
  is never joined with the next.
- An English full stop after a bare number (`10.`, `2.07`) or a common abbreviation (`Inc.`,
  `No.`) is not a sentence end: contracts number every section that way.
- The excerpt is the run of consecutive sentences, within the budget, that holds the most of the
  question's terms (ties: below at `best_excerpt`); a passage that holds none is shown from its start.
  Showing the first N characters hid the answering clause: in a 250-token contract section
  "survive ... for five (5) years" is often the third sentence.
- A single sentence longer than the budget is cut at its last clause break (，,；;：:) that fits,
  else at a token, and marked with `…`: the one case where an excerpt does not end a sentence.
- Offsets are code points into the passage text; `section_at` names the article (第X条) or numbered
  section whose text the excerpt starts in, read from the passage itself.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rag_app.chunking import ARTICLE_START
from rag_app.text import find_article_refs
from rag_app.text import STEM, stems_of, tokenize
from rag_app.text import count_tokens, cut_to_tokens

_CJK_END = "。！？；"
_CLOSERS = "”’\"')）」』】"
# An English sentence end: . ! ? then optional closing quotes/brackets, then whitespace or the end.
_EN_END = re.compile(rf"[.!?][{re.escape(_CLOSERS)}]*(?=\s|$)")
_CJK_END_RE = re.compile(rf"[{_CJK_END}][{re.escape(_CLOSERS)}]*")
_NOT_AN_END = re.compile(r"(?:^|[\s(])(?:\d+(?:\.\d+)*|[A-Z]|Inc|Ltd|Co|Corp|No|Nos|Mr|Mrs|Ms|Dr|St|Sec|Art|"
                         r"e\.g|i\.e|etc|vs|viz|U\.S|cf|approx)\.$", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[，,；;：:]")
# A numbered section at a line start: `ARTICLE IV`, `Section 5.`, `10.`, `2.07 Return of ...`.
_EN_SECTION = re.compile(r"^\s*((?:ARTICLE|Article|SECTION|Section|Clause|CLAUSE|Paragraph)\s+[\dIVXLC]+(?:\.\d+)*"
                         r"|\d{1,3}(?:\.\d{1,3})*(?=\.?\s+[A-Z(“\"]))\.?(?=\s|$)")
# `15. Term and Termination. This Agreement ...`: the words up to the first full stop are the heading
_EN_HEADING = re.compile(r"\s+([A-Z][^.\n]{0,58}?)(?:\.\s|\s*$)")
# words of asking, not of the answer (BM25's stop list is mostly Chinese)
_QUESTION_WORDS = {"which", "what", "how", "when", "where", "who", "whom", "whose", "why", "doe", "do", "did",
                   "can", "could", "should", "would", "must", "may", "will", "shall", "there", "any", "many", "much"}
_SMALL_WORDS = {"and", "or", "of", "the", "to", "in", "on", "for", "a", "an", "by", "with"}


@dataclass(frozen=True)
class Excerpt:
    start: int  # code points into the passage text
    end: int
    text: str  # passage[start:end], or its cut prefix when `cut`
    tokens: int
    cut: bool = False  # a single sentence over the budget, cut at a clause break
    anchor: int = 0  # where the sentence that holds most of the question starts (its section is cited)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, without the whitespace between them; every line is split apart."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        _line_sentences(line, pos, spans)
        pos += len(line) + 1
    return spans


def _line_sentences(line: str, base: int, spans: list[tuple[int, int]]) -> None:
    ends = sorted({m.end() for m in _CJK_END_RE.finditer(line)}
                  | {m.end() for m in _EN_END.finditer(line) if not _NOT_AN_END.search(line[:m.start() + 1])})
    start = 0
    for end in [*ends, len(line)]:
        piece = line[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((base + start + lead, base + start + len(piece.rstrip())))
        start = end


def ends_sentence(text: str) -> bool:
    """Whether `text` ends where a sentence or a list item does (a clause mark counts: `；` `:`)."""
    tail = text.rstrip().rstrip(_CLOSERS)
    return tail[-1:] in set(_CJK_END + ".!?;:：")


def match_terms(text: str) -> set[str]:
    """BM25's terms, English words cut to a 6-letter stem: `governs`, `governed` and `Governing Law`
    answer one another, as do `survive`/`survival` and `law`/`laws` (BM25 itself does not stem)."""
    return {_stem(t) for t in tokenize(text)} - _QUESTION_WORDS


@lru_cache(maxsize=256)
def question_terms(question: str) -> frozenset[str]:
    """match_terms of a question, once per question (an answer looks for them in every passage)."""
    return frozenset(match_terms(question))


_ASCII_WORD = re.compile(r"[a-z0-9_]+")


def terms_in(sentence: str, wanted: frozenset[str]) -> set[str]:
    """The question's terms (`wanted`, from match_terms) that the sentence holds, found without segmenting
    the sentence: jieba over each new passage's sentences was ~8 ms of a cold extractive answer.
    - a Chinese word, or a `~` bigram: it occurs in the sentence (a bigram token is a substring anyway;
      a word may be one jieba would have cut differently here, and it is still the question's word);
    - an English word: a word of the sentence has its 6-letter stem; a `^` stem token: the sentence's
      snowball stems hold it (only a mostly-Latin sentence has them, as in tokenize);
    - a `§` article key: the sentence cites that article, whatever its numerals.
    Against jieba's terms of each sentence: the same set for 95% of (question, sentence) pairs on
    legal_zh, 99% on legal_en, mostly one-character terms; the gold spans shown are unchanged on both
    (bench/extractive_shown.py --chunks: 0.970 legal_zh, 0.934 legal_en)."""
    if not wanted:
        return set()
    lower = sentence.lower()
    words: set[str] | None = None
    found: set[str] = set()
    for term in wanted:
        head = term[:1]
        if head == "~":
            hit = term[1:] in sentence
        elif head == "§":
            hit = term[1:] in find_article_refs(sentence)
        elif head == STEM:
            hit = term in stems_of(sentence)
        elif term.isascii() and term.isalpha():
            if words is None:
                words = {_stem(w) for w in _ASCII_WORD.findall(lower)}
            hit = term in words
        else:  # a one-character term (法, _) is in most sentences: it would count everywhere, so nowhere
            hit = len(term) > 1 and term in lower
        if hit:
            found.add(term)
    return found


def _stem(term: str) -> str:
    if not (term.isascii() and term.isalpha()):
        return term
    if len(term) > 3 and term.endswith("s") and not term.endswith("ss"):
        term = term[:-1]
    return term[:6]


def best_excerpt(text: str, question: str, max_tokens: int, text_tokens: int | None = None) -> Excerpt:
    """The run of whole sentences within `max_tokens` that covers most of the question's terms.
    `text_tokens`: the text's own count where known (a chunk's token_count), not counted again."""
    spans = sentence_spans(text)
    if not spans:
        return Excerpt(0, 0, "", 0)
    wanted = question_terms(question)
    terms = [terms_in(text[a:b], wanted) for a, b in spans]
    top = max(range(len(spans)), key=lambda k: (len(terms[k]), -k))
    anchor = spans[top][0] if terms[top] else spans[0][0]
    whole = text[spans[0][0]:spans[-1][1]]
    n = text_tokens if text_tokens is not None and whole == text else count_tokens(whole)
    if n <= max_tokens:  # it all fits: nothing to choose
        return Excerpt(spans[0][0], spans[-1][1], whole, n, anchor=anchor)
    sizes = [count_tokens(text[a:b]) for a, b in spans]
    line_start = [a == 0 or text[a - 1] == "\n" for a, _ in spans]
    first, last = _best_window(sizes, terms, line_start, max_tokens)
    first = _widen_back(sizes, first, last, max_tokens)
    return _excerpt_of(text, spans[first][0], spans[last][1], anchor, max_tokens)


def _best_window(sizes: list[int], terms: list[set[str]], line_start: list[bool], max_tokens: int) -> tuple[int, int]:
    """The first and last sentence of the best window (the passage's start when no window holds a term).
    Ranked by (terms covered, most terms in one sentence, starts a line, start): the sentence that alone
    covers most of the question is the likeliest answer, so a window keeps it over one that only adds
    context before it; of the windows left, the one that opens at the latest line start (a section,
    an article, a list item) shows that answer from where its clause begins."""
    best: tuple[tuple[int, int, bool, int], int, int] | None = None
    for i in range(len(sizes)):
        covered, peak, last = _window_from(i, sizes, terms, max_tokens)
        score = (len(covered), peak, line_start[i], i)
        if best is None or score > best[0]:
            best = (score, i, last)
    assert best is not None
    score, first, last = best
    if score[0] == 0:  # nothing of the question in it: the passage from its start
        return 0, _fit(sizes, 0, max_tokens)
    return first, last


def _window_from(i: int, sizes: list[int], terms: list[set[str]], max_tokens: int) -> tuple[set[str], int, int]:
    """The sentences from `i` that fit the budget: the terms they cover, the most in one of them, the last."""
    covered: set[str] = set()
    used, j, peak = 0, i, 0
    while j < len(sizes) and used + sizes[j] + (1 if j > i else 0) <= max_tokens:
        used += sizes[j] + (1 if j > i else 0)  # a space or line break between sentences
        covered |= terms[j]
        peak = max(peak, len(terms[j]))
        j += 1
    if j == i:  # this sentence alone is over the budget
        covered, peak = terms[i], len(terms[i])
    return covered, peak, max(j - 1, i)


def _widen_back(sizes: list[int], first: int, last: int, max_tokens: int) -> int:
    """A window that reached the passage's end leaves budget over: spend it on the sentences before it."""
    used = sum(sizes[first:last + 1]) + (last - first)
    while first > 0 and used + 1 + sizes[first - 1] <= max_tokens:
        first, used = first - 1, used + 1 + sizes[first - 1]
    return first


def _excerpt_of(text: str, a: int, b: int, anchor: int, max_tokens: int) -> Excerpt:
    """text[a:b], cut at a clause when one sentence alone is over the budget."""
    anchor = min(max(anchor, a), b)
    shown = text[a:b]
    n = count_tokens(shown)
    if n <= max_tokens:
        return Excerpt(a, b, shown, n, anchor=anchor)
    cut = _cut_at_clause(shown, max_tokens)
    return Excerpt(a, a + len(cut), cut, count_tokens(cut), cut=True, anchor=a)


def _fit(sizes: list[int], first: int, max_tokens: int) -> int:
    """The last sentence of the run from `first` that fits the budget (`first` itself if none does)."""
    used, last = sizes[first], first
    while last + 1 < len(sizes) and used + 1 + sizes[last + 1] <= max_tokens:
        used, last = used + 1 + sizes[last + 1], last + 1
    return last


def _cut_at_clause(sentence: str, max_tokens: int) -> str:
    head = cut_to_tokens(sentence, max_tokens)
    breaks = [m.end() for m in _CLAUSE_BREAK.finditer(head)]
    # a clause break in the last third only: cutting a sentence to a few words shows less than the token cut
    if breaks and breaks[-1] >= len(head) * 2 // 3:
        return head[:breaks[-1]]
    return head.rstrip()


def sections_in(text: str, start: int, end: int, fallback: tuple[str, ...] = ()) -> str | None:
    """Every article or section the text between `start` and `end` lies in (`13, 14`; `第二十条、第二十一条`)."""
    first = section_at(text, start, fallback)
    labels = [first] if first else []
    pos = 0
    for line in text.split("\n"):
        if start < pos < end and (label := _line_section(line)) and label not in labels:
            labels.append(label)
        pos += len(line) + 1
    if not labels:
        return None
    return ("、" if any(ARTICLE_START.match(label) for label in labels) else ", ").join(labels)


def section_at(text: str, offset: int, fallback: tuple[str, ...] = ()) -> str | None:
    """The article or numbered section the passage text is in at `offset`: the last 第X条 / section line
    at or before it. `fallback` (the chunk's articles, else its heading path) when the passage begins
    inside a section whose number lies before it."""
    found: str | None = None
    pos = 0
    for line in text.split("\n"):
        if pos > offset:
            break
        label = _line_section(line)
        if label:
            found = label
        pos += len(line) + 1
    return found or ("、".join(fallback) if fallback else None)


def _line_section(line: str) -> str | None:
    art = ARTICLE_START.match(line)
    if art:
        return re.sub(r"\s+", "", art.group(1))
    m = _EN_SECTION.match(line)
    if not m:
        return None
    number = m.group(1)
    heading = _EN_HEADING.match(line, m.end())
    if heading and _looks_like_heading(heading.group(1)):
        return f"{number} {heading.group(1).strip()}"
    return number


def _looks_like_heading(words: str) -> bool:
    """`Term and Termination` (capitalised words), not `The Recipient shall` (a sentence)."""
    parts = words.split()
    return 0 < len(parts) <= 8 and all(p[:1].isupper() or p.lower() in _SMALL_WORDS or not p[:1].isalpha()
                                       for p in parts)
