"""Labelled pairs mined from the corpus's own text, for the query adapter (`rag train-adapter --mined N`):
nothing written by hand, nothing from a question set.

- definition: `本法所称X，是指Y` -> "什么是X？" with the defining article as gold;
- crossref: an article's sentence that applies another article of the same law (`依照本法第N条的规定……`),
  the reference taken out -> article N;
- heading: a chapter or section heading over at most three articles (`第三节 违约责任` -> "违约责任有哪些规定？")
  -> each of its articles.

(This corpus carries no 条旨, the article gists some editions print, so there is no gist kind.) Each pair is a
`Question` whose gold spans an article exactly as qa_dev's do (its label to the end of its last paragraph).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from rag_app.evaluation.qa import Gold, Question
from rag_app.text import CN_NUM, cn_to_int

_ARTICLE = re.compile(rf"^第([{CN_NUM}]+)\s*条(?:之([{CN_NUM}]+))?", re.M)
_HEADING = re.compile(r"^(#{2,6})\s+(.+?)\s*$", re.M)
_DEFINITION = re.compile(r"(?:本法|本条例|本办法|本规定|本解释|本编|本章|本节)?所称(?:的)?([^，,。；：“”]{2,24})，(?:是指|指|包括|，是指)")
_REF = re.compile(rf"(?:依照|依据|按照|适用|违反|参照)?本(?:法|条例|办法|规定|解释|编)第([{CN_NUM}]+)条(?:之([{CN_NUM}]+))?"
                  rf"(?:第[{CN_NUM}]+款)?(?:第[{CN_NUM}]+项)?(?:、第[{CN_NUM}]+条(?:第[{CN_NUM}]+款)?)*(?:的)?(?:规定)?")
_SENTENCE = re.compile(r"[^。；;\n]+[。；;]?")
_LABEL_WORDS = re.compile(rf"^第[{CN_NUM}]+[编分章节]\s*")
KINDS = ("definition", "crossref", "heading")
_GENERIC = {"附则", "总则", "一般规定", "其他规定", "通则"}  # headings that name no subject


@dataclass(frozen=True)
class Article:
    key: tuple[int, int]  # (number, 之 sub)
    start: int
    end: int  # label to the end of its last paragraph, as qa_dev's gold spans
    headings: tuple[str, ...]


def articles_of(text: str) -> list[Article]:
    """Every article of one document (a line that opens with 第X条) with its span and heading path."""
    heads: list[tuple[int, int, str]] = [(m.start(), len(m.group(1)), m.group(2)) for m in _HEADING.finditer(text)]
    marks = [m for m in _ARTICLE.finditer(text)]
    out = []
    for i, m in enumerate(marks):
        nxt = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        head_after = next((h for h, _, _ in heads if m.start() < h < nxt), None)
        end = head_after if head_after is not None else nxt
        while end > m.start() and text[end - 1] in " \n\r\t\u200b":
            end -= 1
        path: dict[int, str] = {}
        for h, level, title in heads:
            if h > m.start():
                break
            path = {k: v for k, v in path.items() if k < level}
            path[level] = title
        try:
            key = (cn_to_int(m.group(1)), cn_to_int(m.group(2)) if m.group(2) else 0)
        except ValueError:
            continue
        out.append(Article(key, m.start(), end, tuple(path[k] for k in sorted(path))))
    return out


def pairs_of(doc: str, text: str) -> list[Question]:
    """Every mined pair of one document (`doc`: its path as the QA file names documents)."""
    arts = articles_of(text)
    by_key = {a.key: a for a in arts}
    out: list[Question] = []

    def add(kind: str, question: str, golds: list[Article], n: int) -> None:
        question = question.strip("，,；; ")
        if 4 <= len(question) <= 90 and golds:
            out.append(Question(f"mined-{kind}-{doc}-{n}", question, f"mined_{kind}",
                                tuple(Gold(doc, a.start, a.end) for a in golds)))

    for a in arts:
        body = text[a.start:a.end]
        for m in _DEFINITION.finditer(body):
            add("definition", f"什么是{m.group(1).strip()}？", [a], a.start + m.start())
        for s in _SENTENCE.finditer(body):
            for m in _REF.finditer(s.group()):
                try:
                    target = by_key.get((cn_to_int(m.group(1)), cn_to_int(m.group(2)) if m.group(2) else 0))
                except ValueError:
                    continue
                if target is None or target is a:
                    continue
                rest = _ARTICLE.sub("", s.group().replace(m.group(), ""), count=1)
                add("crossref", rest, [target], a.start + s.start() + m.start())
    under: dict[tuple[str, ...], list[Article]] = {}
    for a in arts:
        if a.headings:
            under.setdefault(a.headings, []).append(a)
    for path, members in under.items():
        title = _LABEL_WORDS.sub("", path[-1]).strip()
        if len(members) <= 3 and title and not title.startswith("第") and title not in _GENERIC:
            add("heading", f"{title}有哪些规定？", members, members[0].start)
    return out


def mine(documents: list[tuple[str, str]], n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> list[Question]:
    """Up to `n` mined pairs (a seeded sample, every kind in proportion) from (doc, text) pairs."""
    found = [q for doc, text in sorted(documents) for q in pairs_of(doc, text) if q.task.removeprefix("mined_") in kinds]
    random.Random(seed).shuffle(found)
    return found[:n]
