"""Which documents a question is about: the collection's catalogue, scopes a caller asks for, and
documents a question names itself.

    catalogue(store, name) -> Catalogue     every document of a collection (id, title, file, type),
                                            collection-owned: dropped by the write that makes it stale
    Scope(docs, laws)                       what a caller restricts a question to (`rag ask --doc`,
                                            `/v1/ask {"scope": ...}`, `rag eval --scope doc`)
    resolve(scope, catalogue) -> Resolved   the documents those names mean (rag_app.core.types.Resolved); an unknown name raises
                                            UnknownDocument listing close matches (never an empty answer)
    named_in(question, catalogue)           the documents a question names (file name, id, a quoted
                                            title or 《law》, a full title written out), or None

A scope becomes a payload filter on `doc_id` (`Resolved.where`), applied by the store to every leg
and to what the levers add; the retrieve row says which documents it was.
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from rag_app.core import RagError
from rag_app.core import Resolved

MAX_NAMES = 50  # names one scope may list (each resolves through dict lookups, never a scan per name)
MAX_NAME_CHARS = 500
MIN_TITLE_CHARS = 4  # a title written out unquoted must be at least this long to count as naming it


class UnknownDocument(RagError):
    """A scope names a document the collection does not hold."""

    def __init__(self, kind: str, name: str, close: Sequence[str]):
        self.name, self.close = name, tuple(close)
        hint = f"close matches: {', '.join(close)}" if close else "no close match"
        super().__init__(f"scope {kind} {name!r} is not a document of this collection ({hint}); "
                         "name a document by its file name, title or id")


@dataclass(frozen=True)
class DocRef:
    doc_id: str
    title: str
    source_path: str
    doc_type: str = "other"

    @property
    def file_name(self) -> str:
        return PurePath(self.source_path).name

    @property
    def label(self) -> str:
        """How a scope names it back to people: its file name (titles repeat: 8 NDAs share one)."""
        return self.file_name or self.title


def _key(name: str) -> str:
    """Names compared without case, width or whitespace, and without the quotes around them."""
    text = unicodedata.normalize("NFKC", name).strip().strip("《》“”\"'「」‘’")
    return re.sub(r"\s+", "", text).casefold()


def law_names(title: str) -> list[str]:
    """How people name a law: its title, and without 中华人民共和国."""
    names = [title]
    if title.startswith("中华人民共和国") and len(title) > len("中华人民共和国") + 1:
        names.append(title[len("中华人民共和国"):])
    return names


def doc_names(ref: DocRef) -> list[str]:
    """A document's names: file name, file stem, id, the path's trailing parts, and its law names."""
    path = PurePath(ref.source_path)
    tails = ["/".join(path.parts[-n:]) for n in range(2, min(len(path.parts), 4) + 1)]
    return [ref.file_name, path.stem, ref.doc_id, *tails, *law_names(ref.title)]


@dataclass(frozen=True)
class Catalogue:
    docs: tuple[DocRef, ...]
    by_doc_name: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    by_law_name: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    by_id: Mapping[str, DocRef] = field(default_factory=dict, repr=False)
    # full titles without whitespace -> their documents, and one regex over all of them (longest first,
    # overlapping matches through a lookahead): a question is scanned once, whatever the library's size
    by_title: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    titles_re: re.Pattern[str] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, refs: Iterable[DocRef]) -> Catalogue:
        docs = tuple(sorted(refs, key=lambda r: (r.source_path, r.doc_id)))
        by_doc: dict[str, list[str]] = {}
        by_law: dict[str, list[str]] = {}
        for r in docs:
            for name in doc_names(r):
                if _key(name):
                    by_doc.setdefault(_key(name), []).append(r.doc_id)
            for name in law_names(r.title):
                by_law.setdefault(_key(name), []).append(r.doc_id)
        by_title: dict[str, list[str]] = {}
        for r in docs:
            squeezed = re.sub(r"\s+", "", unicodedata.normalize("NFKC", r.title))
            if len(squeezed) >= MIN_TITLE_CHARS:
                by_title.setdefault(squeezed, []).append(r.doc_id)
        pattern = (re.compile("(?=(" + "|".join(map(re.escape, sorted(by_title, key=len, reverse=True))) + "))")
                   if by_title else None)
        return cls(docs, {k: tuple(dict.fromkeys(v)) for k, v in by_doc.items()},
                   {k: tuple(dict.fromkeys(v)) for k, v in by_law.items()}, {r.doc_id: r for r in docs},
                   {k: tuple(v) for k, v in by_title.items()}, pattern)

    def labels(self, doc_ids: Iterable[str]) -> tuple[str, ...]:
        return tuple(self.by_id[d].label for d in doc_ids if d in self.by_id)


def catalogue_of(payloads: Iterable[Mapping[str, Any]]) -> Catalogue:
    """One DocRef per document from its chunks' payloads (the first chunk seen speaks for it)."""
    seen: dict[str, DocRef] = {}
    for p in payloads:
        if p["doc_id"] not in seen:
            seen[p["doc_id"]] = DocRef(p["doc_id"], p.get("title") or "", p.get("source_path") or "",
                                       p.get("doc_type") or "other")
    return Catalogue.of(seen.values())


def catalogue(store: Any, collection: str) -> Catalogue:
    """The collection's documents, kept by the store until it next writes the collection."""
    return store.derived(collection, "catalogue",  # type: ignore[no-any-return]
                         lambda: catalogue_of(store.documents(collection)))


@dataclass(frozen=True)
class Scope:
    """Names of documents (file name, title, id, path) and of laws (title or short name) to search within."""

    docs: tuple[str, ...] = ()
    laws: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = (*self.docs, *self.laws)
        if len(names) > MAX_NAMES:
            raise ValueError(f"scope lists {len(names)} names; at most {MAX_NAMES}")
        for n in names:
            if not isinstance(n, str) or not n.strip() or len(n) > MAX_NAME_CHARS:
                raise ValueError(f"scope name {str(n)[:60]!r} must be non-empty text of at most "
                                 f"{MAX_NAME_CHARS} characters")

    def __bool__(self) -> bool:
        return bool(self.docs or self.laws)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Scope:
        data = data or {}
        return cls(tuple(data.get("docs") or ()), tuple(data.get("laws") or ()))


def resolve(scope: Scope, cat: Catalogue) -> Resolved:
    """Every name must mean at least one document; a title several documents share means all of them."""
    ids: list[str] = []
    for kind, names, index in (("doc", scope.docs, cat.by_doc_name), ("law", scope.laws, cat.by_law_name)):
        for name in names:
            found = index.get(_key(name))
            if not found:
                raise UnknownDocument(kind, name, _close(name, cat, laws=kind == "law"))
            ids.extend(found)
    unique = tuple(dict.fromkeys(ids))
    return Resolved(unique, cat.labels(unique), "asked")


def _close(name: str, cat: Catalogue, *, laws: bool) -> list[str]:
    """Up to 5 names of the collection that look like `name` (as people wrote them, not as keys)."""
    shown: dict[str, str] = {}
    for r in cat.docs:
        for n in (law_names(r.title) if laws else [r.file_name, r.title, *law_names(r.title)[1:]]):
            shown.setdefault(_key(n), n)
    keys = difflib.get_close_matches(_key(name), list(shown), n=5, cutoff=0.6)
    keys += [k for k in shown if _key(name) in k and k not in keys][: 5 - len(keys)]
    return [shown[k] for k in keys]


# -- documents the question names ------------------------------------------------------------------
_FILE = re.compile(r"[\w\-()（）.]+?\.(?:txt|md|markdown|pdf|docx|html?)(?![\w])", re.IGNORECASE)
_HEX_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{16}(?![0-9a-f])")
_QUOTED = re.compile(r"《([^《》]{1,200})》|“([^“”]{1,300})”|\"([^\"]{1,300})\"|「([^「」]{1,200})」")


def named_in(question: str, cat: Catalogue) -> Resolved | None:
    """The documents `question` names, in this order of strength:

    1. a file name (`nda_0003.txt`) or a document id written in it;
    2. a quoted title, law name or file name (`"OISAIR PROJECT"`, `《劳动合同法》`);
    3. a full title written out, same case (`中华人民共和国劳动法`, `MUTUAL NON-DISCLOSURE AGREEMENT`).

    A title match that describes a document already named by file (the template `nda_0007.txt
    ("NON-DISCLOSURE AGREEMENT")`: eight NDAs share that title) adds nothing; a quoted name inside a
    longer title written out gives way to it (《中华人民共和国刑法》 inside the title of the 罪名补充规定).
    Unquoted short names are not read (公司法 is inside 有限公司法定代表人; "non-disclosure agreement"
    is what every NDA calls itself)."""
    text = unicodedata.normalize("NFKC", question)
    by_file: list[str] = []
    for m in (*_FILE.finditer(text), *_HEX_ID.finditer(text)):
        by_file.extend(cat.by_doc_name.get(_key(m.group(0)), ()))
    spans: list[tuple[int, int, tuple[str, ...]]] = []  # (start, end, doc ids) of title-like mentions
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        found = cat.by_doc_name.get(_key(inner), ())
        if found:
            spans.append((m.start(), m.end(), found))
    squeezed, where = _squeeze(text)
    for m in cat.titles_re.finditer(squeezed) if cat.titles_re else ():
        start, end = m.start(1), m.end(1)
        spans.append((where[start], where[end - 1] + 1, cat.by_title[m.group(1)]))
    spans = [s for s in spans if not any(o[0] <= s[0] and s[1] <= o[1] and o[1] - o[0] > s[1] - s[0] for o in spans)]
    named = set(by_file)
    by_title = [d for _, _, ids in spans if not named.intersection(ids) for d in ids]
    ids = tuple(dict.fromkeys([*by_file, *by_title]))
    return Resolved(ids, cat.labels(ids), "named") if ids else None


def _squeeze(text: str) -> tuple[str, list[int]]:
    """`text` without whitespace, and where each kept character was (titles match across stray spaces)."""
    kept = [(i, ch) for i, ch in enumerate(text) if not ch.isspace()]
    return "".join(ch for _, ch in kept), [i for i, _ in kept]
