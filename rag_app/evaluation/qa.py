"""QA files (legal_zh / legal_en schema): one JSON object per line with `gold[].doc/char_start/char_end`."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rag_app.core import ConfigError


@dataclass(frozen=True)
class Gold:
    doc: str  # path relative to the corpus dir
    char_start: int
    char_end: int


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    task: str
    gold: tuple[Gold, ...]
    doc: str | None = None  # the document the question is about (the line's own `doc`), for --scope doc


def load_qa(path: Path, limit: int | None = None) -> list[Question]:
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            gold = tuple(Gold(g["doc"], int(g["char_start"]), int(g["char_end"])) for g in r["gold"])
            doc = r.get("doc")
            out.append(Question(str(r["id"]), r["question"], r.get("task", ""), gold,
                                doc if isinstance(doc, str) and doc else None))
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path}:{n}: not a QA record ({e!r}); each line needs id, question and "
                              "gold[] with doc, char_start, char_end") from e
        if limit and len(out) >= limit:
            break
    if not out:
        raise ConfigError(f"{path}: no questions")
    return out
