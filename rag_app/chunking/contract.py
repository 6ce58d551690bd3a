"""The contract chunker: clauses and list items are the units, a chunk never crosses a top-level
clause, and every chunk carries its clause path ("5.2(b)") and headings in its indexed text.

Contracts number their clauses in many ways (`ARTICLE IV`, `Section 5`, `1.`, `1.1`, `2.01`, `(a)`,
`(ii)`, `A.`), have recitals (WHEREAS), an operative part (NOW, THEREFORE) and a signature block
(IN WITNESS WHEREOF). Their evidence is a sentence or list item of ~200 characters (ContractNLI), so
units are small and chunks pack only a few of them (target ~120 tokens, statutes' 200-250 would
bury the clause asked about among its neighbours).

    lines -> labelled lines (style, label, heading?) -> units (a labelled line and its continuation)
          -> chunks (neighbouring units of one top-level clause, within the token target;
             a unit over the hard max is cut at sentence ends)

The clause path is kept as a stack of (style, label): a label of a style already on the stack closes
everything below it, a new style opens a level. Offsets index the document's text exactly.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from rag_app.chunking.legal import _hard_cut, _span_counter, chunk_id_for
from rag_app.chunking.semantic import split_sentences
from rag_app.text import count_tokens
from rag_app.core import Chunk, ParsedDocument

_ARTICLE = re.compile(r"^\s*(ARTICLE|Article|SECTION|Section|CLAUSE|Clause)\s+(\d{1,3}(?:\.\d{1,3})*|[IVXLC]{1,7})\b[.:)]?")
_DECIMAL = re.compile(r"^\s*(\d{1,2}(?:\.\d{1,3})+)\.?(?=\s|$)")  # 1.1  2.01  5.2.1
_NUMBER = re.compile(r"^\s*(\d{1,2})[.)](?=\s|$)")  # 1.  1)
_PAREN = re.compile(r"^\s*\(([a-z]{1,2}|[ivxlc]{1,6}|[A-Z]{1,2}|\d{1,2})\)")  # (a) (ii) (A) (1)
_LETTER = re.compile(r"^\s*([a-zA-Z])[.)](?=\s)")  # a.  A)
_RECITALS = re.compile(r"^\s*(WHEREAS|RECITALS?\b|BACKGROUND\b)", re.IGNORECASE)
_OPERATIVE = re.compile(r"^\s*(NOW,?\s+THEREFORE|NOW\s+IT\s+IS\s+HEREBY\s+AGREED|THE\s+PARTIES\s+AGREE\s+AS\s+FOLLOWS)",
                        re.IGNORECASE)
_SIGNATURES = re.compile(r"^\s*(IN\s+WITNESS\s+WHEREOF|SIGNED\s+(?:by|for|on\s+behalf))", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.;:!?][\"'”’)]*\s*$")
_ROMAN = re.compile(r"^(?:i|ii|iii|iv|v|vi|vii|viii|ix|x|xi|xii)$")
HEADING_MAX_CHARS = 80


@dataclass(frozen=True)
class Label:
    style: str  # article | dec1 | dec2 ... | alpha | ALPHA | roman | digit | part
    text: str  # as shown in the path: "5.2", "(b)", "Section 5", "Recitals"


@dataclass
class Unit:
    start: int
    end: int
    path: tuple[Label, ...]
    headings: tuple[str, ...]
    heading_only: bool = False

    @property
    def top(self) -> Label | None:
        return self.path[0] if self.path else None


def clause_path(path: tuple[Label, ...]) -> str:
    """The deepest numbered clause and the list items below it: ('Section 5', '5.2', '(b)') -> '5.2(b)'."""
    if not path:
        return ""
    base = max((i for i, lb in enumerate(path) if lb.style not in ("alpha", "ALPHA", "roman", "digit")), default=-1)
    head = path[base].text if base >= 0 else ""
    items = "".join(lb.text for lb in path[base + 1:])
    return head + items


def _paren_style(label: str, stack: list[Label]) -> str:
    """(i) after (h) is a letter; otherwise i, v, x ... are roman numerals."""
    if label.isdigit():
        return "digit"
    if label.isupper():
        return "ALPHA"
    if _ROMAN.match(label):
        prev = next((lb.text.strip("()") for lb in reversed(stack) if lb.style == "alpha"), None)
        if prev is not None and len(label) == 1 and ord(label) == ord(prev) + 1:
            return "alpha"
        return "roman"
    return "alpha"


def read_label(line: str, stack: list[Label]) -> tuple[Label, int] | None:
    """(label, where its text ends) for a line that opens a clause or item, else None."""
    if m := _ARTICLE.match(line):
        return Label("article", f"{m.group(1).capitalize()} {m.group(2)}"), m.end()
    if m := _DECIMAL.match(line):
        return Label(f"dec{m.group(1).count('.') + 1}", m.group(1)), m.end()
    if m := _NUMBER.match(line):
        return Label("dec1", m.group(1)), m.end()
    if m := _PAREN.match(line):
        return Label(_paren_style(m.group(1), stack), f"({m.group(1)})"), m.end()
    if m := _LETTER.match(line):
        style = "ALPHA" if m.group(1).isupper() else _paren_style(m.group(1), stack)
        return Label(style, f"({m.group(1)})"), m.end()
    return None


def _push(stack: list[Label], label: Label) -> list[Label]:
    for i, lb in enumerate(stack):
        if lb.style == label.style:
            return [*stack[:i], label]
    return [*stack, label]


def _is_heading(rest: str) -> bool:
    """What follows a label is a heading when it is short, not a sentence, and in title or capital
    case: `2.01 Confidential Information`, `1. DEFINITIONS` (not a clause broken across lines)."""
    rest = rest.lstrip(" \t-–—:.").rstrip()
    words = rest.split()
    capitalised = sum(1 for w in words if w[:1].isupper() or not w[:1].isalpha())
    return (0 < len(rest) <= HEADING_MAX_CHARS and not _SENTENCE_END.search(rest) and len(words) <= 10
            and capitalised >= 0.6 * len(words))


def _bare_heading(line: str) -> bool:
    """An unlabelled short line in capitals (`CONFIDENTIALITY`, `GENERAL PROVISIONS`)."""
    s = line.strip()
    letters = [c for c in s if c.isalpha()]
    return 3 <= len(s) <= HEADING_MAX_CHARS and len(letters) >= 3 and all(c.isupper() for c in letters) \
        and not _SENTENCE_END.search(s)


def split_units(doc: ParsedDocument) -> list[Unit]:
    text = doc.text
    reader = _UnitReader(text)
    title_seen = False
    for block in doc.blocks:
        line = text[block.start:block.end]
        if not line.strip():
            continue
        if not title_seen and line.strip() == doc.title:
            title_seen = True  # carried on every chunk already
            continue
        reader.read(line, block.start, block.end)
    return reader.units


def _part(line: str) -> Label | None:
    return (Label("part", "Recitals") if _RECITALS.match(line) else Label("part", "Signatures")
            if _SIGNATURES.match(line) else None)


@dataclass
class _UnitReader:
    """Reads a contract's lines into units: the labels open above each line and the headings they opened."""

    text: str
    units: list[Unit] = field(default_factory=list)
    stack: list[Label] = field(default_factory=list)
    headings: dict[int, str] = field(default_factory=dict)  # depth of the stack -> the heading that opened it

    def read(self, line: str, start: int, end: int) -> None:
        found = read_label(line, self.stack)
        part = _part(line)
        if found is not None:
            self._labelled(line, found, start, end)
        elif part is not None or _OPERATIVE.match(line):
            self.stack = [part] if part is not None else []  # NOW, THEREFORE: the operative part starts afresh
            self.headings = {}
            self.units.append(Unit(start, end, tuple(self.stack), ()))
        elif _bare_heading(line):
            self.headings = {d: h for d, h in self.headings.items() if d <= len(self.stack)}
            self.headings[len(self.stack) + 1] = line.strip()
            self.units.append(Unit(start, end, tuple(self.stack), _headings(self.headings), True))
        else:
            self._paragraph(start, end)

    def _labelled(self, line: str, found: tuple[Label, int], start: int, end: int) -> None:
        label, label_end = found
        self.stack = _push(self.stack, label)
        heading = _is_heading(line[label_end:])
        self.headings = {d: h for d, h in self.headings.items() if d < len(self.stack)}
        if heading:
            self.headings[len(self.stack)] = line.strip()
        self.units.append(Unit(start, end, tuple(self.stack), _headings(self.headings), heading))

    def _paragraph(self, start: int, end: int) -> None:
        last = self.units[-1] if self.units else None
        if last is not None and not last.heading_only and not _SENTENCE_END.search(self.text[last.start:last.end]):
            last.end = end  # a line broken mid-sentence (PDF extraction) continues its unit
        elif last is not None and last.heading_only:
            last.end, last.heading_only = end, False  # a heading and its first paragraph
        else:
            self.units.append(Unit(start, end, tuple(self.stack), _headings(self.headings)))


def _headings(by_depth: dict[int, str]) -> tuple[str, ...]:
    return tuple(h for _, h in sorted(by_depth.items()))


class ContractChunker:
    name = "contract"
    version = "1"

    def __init__(self, target_max: int = 120, hard_max: int = 240, min_tokens: int = 25):
        self.target_max, self.hard_max, self.min_tokens = target_max, hard_max, min_tokens

    def chunk(self, doc: ParsedDocument) -> list[Chunk]:
        span_tokens = _span_counter(doc.text)
        pieces: list[Unit] = []
        for u in split_units(doc):
            pieces.extend(self._fit(doc.text, u, span_tokens))
        return [self._to_chunk(doc, group) for group in self._pack(pieces, span_tokens)]

    def _fit(self, text: str, unit: Unit, span_tokens: Callable[[int, int], int]) -> list[Unit]:
        """A unit over the hard max, cut at sentence ends (then at a comma or token edge)."""
        if span_tokens(unit.start, unit.end) <= self.hard_max:
            return [unit]
        out: list[Unit] = []
        cur: tuple[int, int] | None = None
        for a, b in split_sentences(text, unit.start, unit.end):
            for s, e in _hard_cut(text, a, b, self.hard_max, span_tokens):
                if cur is not None and span_tokens(cur[0], e) <= self.target_max:
                    cur = (cur[0], e)
                    continue
                if cur is not None:
                    out.append(Unit(cur[0], cur[1], unit.path, unit.headings))
                cur = (s, e)
        if cur is not None:
            out.append(Unit(cur[0], cur[1], unit.path, unit.headings))
        return out

    def _pack(self, units: list[Unit], span_tokens: Callable[[int, int], int]) -> list[list[Unit]]:
        """Neighbours of one top-level clause, while within the target; a heading joins what follows it,
        a fragment under the minimum joins its neighbour when the hard max allows."""
        groups: list[list[Unit]] = []
        for u in units:
            if groups:
                cur = groups[-1]
                combined = span_tokens(cur[0].start, u.end)
                same_clause = cur[-1].top == u.top
                small = span_tokens(u.start, u.end) < self.min_tokens or span_tokens(cur[0].start, cur[-1].end) < self.min_tokens
                if combined <= self.hard_max and (cur[-1].heading_only or (
                        same_clause and (combined <= self.target_max or small))):
                    cur.append(u)
                    continue
            groups.append([u])
        return groups

    def _to_chunk(self, doc: ParsedDocument, group: list[Unit]) -> Chunk:
        start, end = group[0].start, group[-1].end
        text = doc.text[start:end]
        paths = tuple(dict.fromkeys(p for p in (clause_path(u.path) for u in group) if p))
        content = next((u for u in group if not u.heading_only), group[0])
        return Chunk(doc_id=doc.doc_id, source_path=doc.source_path, title=doc.title, text=text,
                     char_start=start, char_end=end, token_count=count_tokens(text), chunker=self.name,
                     chunker_version=self.version, heading_path=content.headings, articles=paths,
                     page=next((b.page for b in doc.blocks if b.start <= start < max(b.end, b.start + 1)), None),
                     chunk_id=chunk_id_for(self.name, self.version, doc.content_hash, start, end),
                     doc_type="contract")
