"""The one rule for text entering from outside (HTTP bodies, the CLI's arguments): it must be text a
database can store. A lone surrogate (U+D800-U+DFFF: half of a UTF-16 pair, no character; Python makes
them from undecodable argv bytes, JSON lets `"\\ud800"` through) cannot be encoded at all, and
PostgreSQL refuses NUL (U+0000) in text. Refused once, at the edge, for every front door alike: the
ledger's salvage path (tracing/ledger/writer.py) is the net below it, not the rule."""
from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_SURROGATE = re.compile("[\ud800-\udfff]")
# Unicode's bidirectional controls (marks, embeddings, overrides, isolates): `evil\u202e.md` shown as is
# reads `evil` + the rest reversed, so a name echoed to people carries them as visible escapes instead
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def has_bidi(value: str) -> bool:
    return _BIDI.search(value) is not None


def shown_name(value: str) -> str:
    """A name as messages and replies echo it: each bidirectional control written as `\\u202e`."""
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", value)


def why_not_text(value: str) -> str | None:
    """Why `value` is refused, or None."""
    m = _SURROGATE.search(value)
    if m:
        return (f"holds a lone surrogate (U+{ord(m.group()):04X}) at character {m.start()}, which is not "
                "text; send valid UTF-8")
    i = value.find("\x00")
    if i >= 0:
        return f"holds a NUL character (U+0000) at character {i}; remove it"
    return None


def _edge_text(value: str) -> str:
    why = why_not_text(value)
    if why:
        raise ValueError(why)
    return value


EdgeText = Annotated[str, AfterValidator(_edge_text)]
