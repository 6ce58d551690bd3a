"""What kind of document a parsed file is — statute, contract or other — decided once at ingest,
recorded on every chunk (`doc_type`) and used to pick the chunker (routing.py).

    statute   numbered articles at line starts (第X条, `Article 12` / `Section 3` headings of an act)
              and no parties
    contract  two parties bound by it: recitals (WHEREAS), "the Parties", "Disclosing Party",
              "IN WITNESS WHEREOF", "hereby agree"; in Chinese 甲方 and 乙方
    other     anything else (the statute rules, which also pack plain prose, chunk it)

The cues are the words contracts are written with, not a list of topics: a law that regulates
contracts (民法典合同编) has articles and no 甲方/乙方, an NDA has parties and no 第X条. Overrides per
file (`rag ingest --doc-type GLOB=TYPE`) win over the cues.
"""
from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from pathlib import PurePath

from rag_app.chunking.structure import ARTICLE_START
from rag_app.core import ParsedDocument

DOC_TYPES = ("statute", "contract", "other")
SCAN_CHARS = 200_000  # the cues show in a document's first pages; a huge file is not read twice over

_ARTICLE_LINE = re.compile(ARTICLE_START.pattern.lstrip("^"), re.MULTILINE)
_EN_ACT_LINE = re.compile(r"^\s*(?:§\s*\d+|(?:SECTION|Section|Sec\.)\s+\d+[A-Za-z]?\.)", re.MULTILINE)
# Each cue counts once however often it occurs; a contract shows several of them.
_EN_PARTY_CUES = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"\bwhereas\b",
    r"\bin witness whereof\b",
    r"\b(?:disclosing|receiving|first|second|other) party\b",
    r"\bthe parties\b|\bparties hereto\b|\beach party\b",
    r"\b(?:hereby|mutually) agree|\bagree[sd]? (?:as follows|that|to|not to)\b",
    r"\bthis [\w ,&-]{0,40}?(?:agreement|contract)\b",
    r"\b(?:hereinafter|hereto|hereunder)\b",
    r"\bentered into\b|\bthe undersigned\b",
))
_EN_TITLE_CUE = re.compile(r"\b(?:agreement|contract|undertaking|nda)\b", re.IGNORECASE)  # in the title line
_ZH_PARTIES = (re.compile(r"甲方"), re.compile(r"乙方"))
MIN_EN_CUES = 3
MIN_ARTICLES = 2  # 民法典's 附则 has two


def classify(doc: ParsedDocument) -> str:
    """statute | contract | other, from the document's own text (see the module docstring)."""
    text = doc.text[:SCAN_CHARS]
    if all(p.search(text) for p in _ZH_PARTIES):
        return "contract"
    cues = sum(1 for p in _EN_PARTY_CUES if p.search(text)) + bool(_EN_TITLE_CUE.search(doc.title))
    if cues >= MIN_EN_CUES:
        return "contract"
    if len(_ARTICLE_LINE.findall(text, 0, SCAN_CHARS)) >= MIN_ARTICLES or len(_EN_ACT_LINE.findall(text)) >= MIN_ARTICLES:
        return "statute"
    return "other"


def parse_override(spec: str) -> tuple[str, str]:
    """'GLOB=TYPE' or 'TYPE' (every file) -> (glob, type); ValueError naming the fix."""
    glob, sep, kind = spec.rpartition("=")
    if not sep:
        glob, kind = "*", spec
    kind = kind.strip().lower()
    if kind not in DOC_TYPES or not glob.strip():
        raise ValueError(f"--doc-type {spec!r}: use TYPE or GLOB=TYPE with TYPE one of {', '.join(DOC_TYPES)} "
                         "(e.g. --doc-type 'contracts/*.pdf=contract')")
    return glob.strip(), kind


def doc_type_for(doc: ParsedDocument, overrides: Sequence[tuple[str, str]] = ()) -> str:
    """The last override whose glob matches the file (its name, or its path from any folder down), else
    the classification."""
    return overridden_type(doc.source_path, overrides) or classify(doc)


def overridden_type(source_path: str, overrides: Sequence[tuple[str, str]] = ()) -> str | None:
    """The type the last matching override gives this file, None when no override matches."""
    path = PurePath(source_path)
    candidates = [path.name, *("/".join(path.parts[i:]) for i in range(len(path.parts)))]
    for glob, kind in reversed(overrides):
        if any(fnmatch.fnmatchcase(c, glob) for c in candidates):
            return kind
    return None
