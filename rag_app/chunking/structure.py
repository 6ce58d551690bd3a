"""Legal structure of a parsed document: each block classified, then grouped into units.

A unit is the smallest span the chunker never cuts unless it alone exceeds the hard max: an
article (第X条 … up to the next article or heading), an annex, a table, or a run of plain
paragraphs. Patterns only match at a line start, so `依照本条（一）项` mid-sentence is no break.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag_app.text import CN_NUM, parse_article_label
from rag_app.core import Block, ParsedDocument

# `\s+(\S.*)` and no trailing `\s*$`: that pair backtracks quadratically on a long run of spaces.
_MD_HEADING = re.compile(r"^(#{1,6})\s+(\S.*)")
_PART = re.compile(rf"^第[{CN_NUM}\d]+(分编|编)(\s|$)")
_CHAPTER = re.compile(rf"^第[{CN_NUM}\d]+章(\s|$)")
_SECTION = re.compile(rf"^第[{CN_NUM}\d]+节(\s|$)")
# No space is required after 条: 刑事诉讼法 has `第一百二十八 条侦查人员…`. A line-start 第X条 is an
# article in all 5,691 cases of the corpus (FINDINGS), never a 款 quoting another article.
ARTICLE_START = re.compile(rf"^\s*(第\s*[{CN_NUM}\d]+\s*条(?:之[{CN_NUM}]+)?)")
_ANNEX = re.compile(rf"^附件[{CN_NUM}\d]*\s*[：:]?\s*")
ITEM_START = re.compile(rf"^\s*(（[{CN_NUM}\d]+）|\([{CN_NUM}\da-z]+\)|\d+(\.\d+)*[.．、]\s?\S)")
_BLANK = " \t\r\n\u3000\u200b\ufeff"  # 民事诉讼法 has zero-width-space-only lines
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
_EN_SECTION = re.compile(r"^\s*(ARTICLE|Article|SECTION|Section)\s+[\dIVXLC]+\b|^\s*\d+\.\s+[A-Z]")


@dataclass
class Line:
    start: int
    end: int
    kind: str = "text"  # text | item | table
    page: int | None = None


@dataclass
class Unit:
    kind: str  # article | annex | table | text
    lines: list[Line]
    heading_path: tuple[str, ...]
    boundary: tuple[str, ...]  # 编/章 path: merging never crosses a change in it
    article: str | None = None
    article_key: str | None = None
    pieces: list[tuple[int, int]] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.lines[0].start

    @property
    def end(self) -> int:
        return self.lines[-1].end

    @property
    def page(self) -> int | None:
        return self.lines[0].page


def heading_level(text: str) -> tuple[str, str] | None:
    """(level, title) for a heading line, else None. Markdown `#` and bare 第X编/章/节 both count."""
    md = _MD_HEADING.match(text)
    title = md.group(2).strip() if md else text.strip()
    if _PART.match(title):
        return "part", title
    if _CHAPTER.match(title):
        return "chapter", title
    if _SECTION.match(title):
        return "section", title
    if title.startswith("附件"):
        return ("annex", title) if md or _ANNEX.fullmatch(title) else None
    if md:
        return ("title" if len(md.group(1)) == 1 else "heading"), title
    return None


def _is_annex_line(raw: str) -> bool:
    """`附件：` / `附件一` on a short line of its own; `附件一所列…。` inside an article is not one."""
    line = raw.strip()
    return bool(_ANNEX.match(line)) and len(line) <= 40 and not line.endswith(("。", "；"))


def _set_heading(path: dict[str, str], level: str, title: str) -> None:
    order = ["title2", "part", "chapter", "section", "heading", "annex"]
    if level == "annex":  # an annex ends the body: it replaces every lower heading
        for k in order[1:]:
            path.pop(k, None)
        path["annex"] = title
        return
    idx = order.index(level)
    for k in order[idx:]:
        path.pop(k, None)
    path[level] = title


def split_units(doc: ParsedDocument) -> list[Unit]:
    reader = _UnitReader(doc.title)
    for block in doc.blocks:
        reader.read(doc.text[block.start:block.end], block)
    reader.flush()
    return reader.units


_HEADING_PATH = ("title2", "part", "chapter", "section", "heading", "annex")
_BOUNDARY = ("title2", "part", "chapter", "heading", "annex")  # what merging never crosses (节 it may)


@dataclass
class _UnitReader:
    """Reads a law's lines into units (articles, annexes, tables, plain text) under the headings above them."""

    title: str
    units: list[Unit] = field(default_factory=list)
    path: dict[str, str] = field(default_factory=dict)
    current: Unit | None = None
    seen_title: bool = False

    def flush(self) -> None:
        if self.current and self.current.lines:
            self.units.append(self.current)
        self.current = None

    def new_unit(self, kind: str, article: str | None = None) -> Unit:
        hp = tuple(self.path[k] for k in _HEADING_PATH if k in self.path)
        boundary = tuple(self.path[k] for k in _BOUNDARY if k in self.path)
        return Unit(kind=kind, lines=[], heading_path=hp, boundary=boundary, article=article,
                    article_key=parse_article_label(article) if article else None)

    def read(self, raw: str, block: Block) -> None:
        if block.kind == "table":
            self._table(block)
            return
        if not raw.strip(_BLANK) or _COMMENT.match(raw):
            return
        if not self.seen_title and raw.strip() == self.title:
            self.seen_title = True  # PDF/DOCX: the title line is carried on every chunk already
            return
        h = heading_level(raw)
        if h:
            self._heading(*h, block)
            return
        self._opening(raw)
        if self.current is None:
            self.current = self.new_unit("text")
        kind = "item" if ITEM_START.match(raw) and self.current.lines else "text"
        self.current.lines.append(Line(block.start, block.end, kind, block.page))

    def _table(self, block: Block) -> None:
        self.flush()
        u = self.new_unit("table")
        u.lines.append(Line(block.start, block.end, "table", block.page))
        self.units.append(u)

    def _heading(self, level: str, title: str, block: Block) -> None:
        if level == "title":
            if not self.seen_title:
                self.seen_title = True
                return  # the law's own title is carried on every chunk already
            level = "title2"  # 民法典's second `#` line names its 编
        self.flush()
        _set_heading(self.path, level, title)
        if level == "annex":  # the annex heading line belongs to the annex's text
            self.current = self.new_unit("annex")
            self.current.lines.append(Line(block.start, block.end, "text", block.page))

    def _opening(self, raw: str) -> None:
        """A line that opens a unit of its own: an article, an annex, an English contract's numbered section."""
        current = self.current
        art = ARTICLE_START.match(raw)
        if art:
            self.flush()
            self.current = self.new_unit("article", re.sub(r"\s+", "", art.group(1)))
        elif _is_annex_line(raw) and (current is None or current.kind != "annex"):
            self.flush()
            _set_heading(self.path, "annex", raw.strip().rstrip("：:"))
            self.current = self.new_unit("annex")
        elif _EN_SECTION.match(raw) and current is not None and current.kind == "text" and current.lines:
            self.flush()  # English contracts: a numbered section starts a new unit
