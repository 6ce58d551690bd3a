"""BM25 as Qdrant sparse vectors: we store saturated term frequencies, Qdrant applies IDF
(`Modifier.IDF`), so the score of a query is BM25 over the whole collection.

Chinese is segmented with jieba (search mode, so 中华人民共和国公司法 also yields 公司法). Article
references are pulled out *before* segmentation and indexed as one token each (`§264`, `§133-1`):
jieba splits 第一千零六十四条 inconsistently and Arabic citations never match Chinese numerals.

English: a text written mostly in Latin letters also gets each word's Snowball stem as a token of
its own (`^disclos` for disclose / disclosed / disclosure), English function words left out, so
"disclosing" in a question meets "disclosure" in a clause. The surface words stay as they were, and a
Chinese text (more CJK characters than Latin letters) tokenizes exactly as before: a collection built
with tokenizer /2 is read unchanged (its English chunks lack the stems, which then match nothing).
"""
from __future__ import annotations

import hashlib
import logging
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rag_app.text.legal_numbers import ARTICLE_REF, find_article_refs

K1, B = 1.2, 0.75
# Bumped whenever tokenize() changes: a collection built with another version must be rebuilt, unless
# that version is in READS (its tokens are a subset of this version's for every text, so queries rank as before).
TOKENIZER_VERSION = "jieba-search+cjk-bigram+en-stem/3"
READS = frozenset({"jieba-search+cjk-bigram/2"})
STEM = "^"  # marks a stem token; like "~" bigrams and "§" article keys it is never a word a lever adds
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
_CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")
_LATIN_LETTER = re.compile(r"[A-Za-z]")
# English function words: no stem token (their surface tokens stay, as they always were)
_EN_STOP = frozenset("""a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each either else few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just may me might more most must
my myself neither no nor not now of off on once only or other ought our ours ourselves out over own same shall she
should so some such than that the their theirs them themselves then there these they this those through to too under
until up upon us very was we were what when where whether which while who whom whose why will with within without
would you your yours yourself yourselves""".split())
_WORD = re.compile(r"[\w\u4e00-\u9fff]", re.UNICODE)
_STOP = set("的 了 是 在 和 与 或 及 等 对 为 其 之 而 以 于 由 被 将 并 有 这 那 中 上 下 不 也 就 都 "
            "吗 呢 吧 啊 么 什么 怎么 如何 哪些 是否 可以 应当 the a an of to and or in on for by is are be "
            "this that with as any".split())

# LawBench prefixes questions with LawRefBook's category (民法商法公司法第…); jieba splits it into
# 民法/商法, which then pulls in 民法典 articles.
_CATEGORY_PREFIX = re.compile(r"^(民法商法|社会法|行政法|经济法|诉讼与非诉讼程序法|宪法相关法)(?=[\u4e00-\u9fff]{2,}法)")


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def warm() -> None:
    """Load jieba's dictionary now (about a second), e.g. before a worker's budget starts."""
    _jieba()


def normalize_query(question: str) -> str:
    return _CATEGORY_PREFIX.sub("", question.strip())


def tokenize(text: str) -> list[str]:
    """Article keys, jieba search-mode words, and character bigrams of Chinese runs.

    The bigrams catch what segmentation misses in colloquial questions (measured on the 632 dev
    questions, legal chunker: layperson recall@5 0.574 -> 0.592, case facts 0.280 -> 0.321); the
    article key token keeps `第X条` exact.
    """
    tokens = [f"§{key}" for key in find_article_refs(text)]
    rest = ARTICLE_REF.sub(" ", text)
    tokens.extend(word_tokens(_jieba().cut_for_search(rest)))
    for run in _CJK_RUN.findall(rest):
        tokens.extend("~" + run[i:i + 2] for i in range(len(run) - 1))
    if _mostly_latin(rest):
        words = [t for t in tokens if t.isascii() and t.isalpha() and len(t) > 2 and t not in _EN_STOP]
        tokens.extend(STEM + s for s in _stemmer().stemWords(words))
    return tokens


def word_tokens(words: Iterable[str]) -> Iterator[str]:
    """The segmenter's words BM25 keeps: stripped, lower-cased, with a letter, digit or CJK character,
    not a stop word."""
    for tok in words:
        tok = tok.strip().lower()
        if tok and _WORD.search(tok) and tok not in _STOP:
            yield tok


def _mostly_latin(text: str) -> bool:
    return len(_LATIN_LETTER.findall(text)) > len(_CJK_CHAR.findall(text))


_LATIN_WORD = re.compile(r"[A-Za-z]{3,}")


def stems_of(text: str) -> frozenset[str]:
    """The `^` stem tokens tokenize gives a text, without segmenting it (English words are runs of
    letters either way): empty unless the text is mostly Latin."""
    rest = ARTICLE_REF.sub(" ", text)
    if not _mostly_latin(rest):
        return frozenset()
    words = [w for w in (m.lower() for m in _LATIN_WORD.findall(rest)) if w not in _EN_STOP]
    return frozenset(STEM + s for s in _stemmer().stemWords(words))


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def token_index(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little")


@dataclass(frozen=True)
class TermCounts:
    """A text's tokens, counted and hashed: the expensive half of a BM25 vector.

    Computed where the per-file budget applies (the parse worker); the cheap half, `weigh`, needs
    the collection's avgdl and runs in the server. One entry per distinct token (two tokens whose
    hashes collide stay two entries, as they always did), `length` is the token count.
    """

    indices: array[int]
    tfs: array[int]
    length: int


def term_counts(text: str) -> TermCounts:
    counts = Counter(tokenize(text))
    return TermCounts(array("I", map(token_index, counts)), array("I", counts.values()), sum(counts.values()))


def weigh(terms: TermCounts, avgdl: float) -> tuple[list[int], list[float]]:
    norm = K1 * (1 - B + B * (terms.length or 1) / avgdl)
    merged: dict[int, float] = {}
    for idx, tf in zip(terms.indices, terms.tfs):
        merged[idx] = merged.get(idx, 0.0) + tf * (K1 + 1) / (tf + norm)
    return list(merged), list(merged.values())


def document_vector(text: str, avgdl: float) -> tuple[list[int], list[float]]:
    return weigh(term_counts(text), avgdl)


def query_vector(text: str) -> tuple[list[int], list[float]]:
    merged: dict[int, float] = {}
    for tok in set(tokenize(normalize_query(text))):
        idx = token_index(tok)
        merged[idx] = merged.get(idx, 0.0) + 1.0
    return list(merged), list(merged.values())


def mean_length(texts: list[str]) -> float:
    return (sum(len(tokenize(t)) for t in texts) / len(texts)) if texts else 100.0
