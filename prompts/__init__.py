"""Versioned prompt files: prompts/<name>/<version>.md with `[system]` and `[user]` sections.

A prompt change is a new version file, never an edit, so ledger rows and experiments that name a
prompt version keep meaning what they meant.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from langchain_core.prompts import ChatPromptTemplate

ROOT = Path(__file__).parent
_SECTION = re.compile(r"^\[(system|user)\]\s*$", re.M)


def available(name: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / name).glob("*.md"))


@lru_cache(maxsize=32)
def load_prompt(name: str, version: str) -> ChatPromptTemplate:
    path = ROOT / name / f"{version}.md"
    if not path.exists():
        from rag_app.core import ConfigError

        raise ConfigError(f"prompt {name!r} version {version!r} not found at {path}; "
                          f"available: {', '.join(available(name)) or 'none'}")
    parts = _SECTION.split(path.read_text(encoding="utf-8"))
    sections = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    return ChatPromptTemplate.from_messages([("system", sections["system"]), ("human", sections["user"])])
