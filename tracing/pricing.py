"""What a model's tokens cost, from three layers (first match wins):

1. the user's override file (`RAG_PRICE_OVERRIDES`), for self-hosted models or negotiated prices;
2. `tracing/bundled_prices.json`: a dated table for models genai-prices lacks or has stale
   (DeepSeek, Qwen, GLM, Kimi), each entry with its source URL and the date it was checked;
3. genai-prices' bundled snapshot (no network).

An unknown model is *unpriced* (None), never a silent $0. Every quote carries the version of the
table that produced it, which the ledger stores on each row so history can be re-priced.

Provider rules: input tokens include cache reads and writes. Cache reads are billed at the
cache-read price (a discount), cache writes at the cache-write price (a premium on Anthropic-style
caches), the rest at the input price; where a provider prices by prompt length, the tier whose
`max_input_tokens` covers the prompt applies, and a prompt above the last known tier is unpriced.

Override file (JSON), per million tokens; the flat form or tiers:
    {"version": "2026-11-01", "models": {
      "my-llm": {"input_per_mtok": "0.10", "output_per_mtok": "0.40", "cached_input_per_mtok": "0.05"},
      "my-long-llm": {"tiers": [{"max_input_tokens": 32000, "input_per_mtok": "1", "output_per_mtok": "2"},
                                {"input_per_mtok": "2", "output_per_mtok": "4", "cache_write_per_mtok": "2.5"}]}}}
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from importlib.metadata import version as pkg_version
from pathlib import Path

from rag_app.money import to_nano

log = logging.getLogger(__name__)
MTOK = Decimal(1_000_000)
BUNDLED = "bundled_prices.json"


@dataclass(frozen=True)
class Quote:
    cost_nano: int | None  # None = unpriced
    version: str
    source: str  # override | bundled | genai-prices | rate | unpriced


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cached_input_per_mtok: Decimal | None = None  # cache reads; None = billed as input
    cache_write_per_mtok: Decimal | None = None   # cache writes; None = billed as input
    max_input_tokens: int | None = None           # this tier covers prompts up to here

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int, cache_write_tokens: int = 0) -> Decimal:
        cached = min(cached_tokens, input_tokens)
        write = min(cache_write_tokens, input_tokens - cached)
        plain = input_tokens - cached - write
        read_rate = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        write_rate = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        return (plain * self.input_per_mtok + cached * read_rate + write * write_rate
                + output_tokens * self.output_per_mtok) / MTOK


@dataclass(frozen=True)
class PriceEntry:
    tiers: tuple[ModelPrice, ...]
    source: str = ""   # where the figures came from (URL)
    checked: str = ""  # when they were checked
    note: str = ""

    def tier_for(self, input_tokens: int) -> ModelPrice | None:
        for tier in self.tiers:
            if tier.max_input_tokens is None or input_tokens <= tier.max_input_tokens:
                return tier
        return None


def _dec(p: dict, *keys: str) -> Decimal | None:
    for k in keys:
        if p.get(k) is not None:
            return Decimal(str(p[k]))
    return None


def _tier(p: dict) -> ModelPrice:
    return ModelPrice(Decimal(str(p["input_per_mtok"])), Decimal(str(p["output_per_mtok"])),
                      _dec(p, "cache_read_per_mtok", "cached_input_per_mtok"), _dec(p, "cache_write_per_mtok"),
                      int(p["max_input_tokens"]) if p.get("max_input_tokens") is not None else None)


def parse_entries(data: dict) -> dict[str, PriceEntry]:
    out = {}
    for name, p in data["models"].items():
        tiers = tuple(_tier(t) for t in p["tiers"]) if "tiers" in p else (_tier(p),)
        if not tiers:
            raise ValueError(f"model {name!r} has an empty tiers list")
        out[name] = PriceEntry(tiers, str(p.get("source", "")), str(p.get("checked", "")), str(p.get("note", "")))
    return out


def load_bundled() -> tuple[dict[str, PriceEntry], str]:
    data = json.loads(resources.files("tracing").joinpath(BUNDLED).read_text(encoding="utf-8"))
    return parse_entries(data), str(data["version"])


def bare_model(model: str) -> str:
    """`deepseek/deepseek-chat` (LiteLLM / router spelling) -> `deepseek-chat`."""
    return model.rsplit("/", 1)[-1]


class PriceTable:
    def __init__(self, overrides: dict[str, PriceEntry | ModelPrice] | None = None, override_version: str | None = None,
                 *, bundled: dict[str, PriceEntry] | None = None, bundled_version: str | None = None):
        self.overrides = {k: v if isinstance(v, PriceEntry) else PriceEntry((v,)) for k, v in (overrides or {}).items()}
        if bundled is None:
            bundled, bundled_version = load_bundled()
        self.bundled = bundled
        self.genai_version = f"genai-prices@{pkg_version('genai-prices')}"
        self.version = f"{self.genai_version}+bundled:{bundled_version}"
        if self.overrides:
            self.version += f"+overrides:{override_version}"
        self._warned: set[str] = set()

    @classmethod
    def load(cls, overrides_path: Path | None = None) -> "PriceTable":
        if not overrides_path:
            return cls()
        try:
            raw = Path(overrides_path).read_bytes()
        except OSError as e:
            from rag_app.errors import ConfigError
            raise ConfigError(f"price override file {overrides_path} cannot be read ({e.strerror}); "
                              "fix RAG_PRICE_OVERRIDES or unset it") from e
        try:
            data = json.loads(raw)
            models = parse_entries(data)
        except (ValueError, KeyError, TypeError, ArithmeticError) as e:
            from rag_app.errors import ConfigError
            raise ConfigError(f"price override file {overrides_path}: {e!r}; expected "
                              '{"version": "...", "models": {"name": {"input_per_mtok": "0.1", "output_per_mtok": "0.4"}}}') from e
        version = str(data.get("version") or hashlib.sha256(raw).hexdigest()[:8])
        return cls(models, version)

    def entry(self, model: str) -> tuple[PriceEntry | None, str]:
        """The table entry in force for a model and which layer it came from (None: genai-prices or nothing)."""
        for name in (model, bare_model(model)):
            if name in self.overrides:
                return self.overrides[name], "override"
        for name in (model, bare_model(model)):
            if name in self.bundled:
                return self.bundled[name], "bundled"
        return None, ""

    def quote(self, model: str, input_tokens: int, output_tokens: int = 0, cached_tokens: int = 0,
              provider: str | None = None, cache_write_tokens: int = 0) -> Quote:
        entry, layer = self.entry(model)
        if entry is not None:
            tier = entry.tier_for(input_tokens)
            if tier is None:
                self._warn(model, f"a {input_tokens}-token prompt is above its last priced tier")
                return Quote(None, self.version, "unpriced")
            return Quote(to_nano(tier.cost(input_tokens, output_tokens, cached_tokens, cache_write_tokens)),
                         self.version, layer)
        calc = self._genai(model, input_tokens, output_tokens, cached_tokens, cache_write_tokens, provider)
        if calc is None:
            self._warn(model, "it has no price")
            return Quote(None, self.version, "unpriced")
        return Quote(to_nano(calc.total_price), self.version, "genai-prices")

    def _genai(self, model, input_tokens, output_tokens, cached_tokens, cache_write_tokens, provider):
        from genai_prices import Usage, calc_price

        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                      cache_read_tokens=cached_tokens or None, cache_write_tokens=cache_write_tokens or None)
        for ref in dict.fromkeys((model, bare_model(model))):
            try:
                return calc_price(usage, model_ref=ref, provider_id=provider)
            except LookupError:
                continue
        return None

    def _warn(self, model: str, why: str) -> None:
        if model not in self._warned:
            self._warned.add(model)
            log.warning("model %r is unpriced in %s: %s; its cost is recorded as null. "
                        "Add it to a RAG_PRICE_OVERRIDES file.", model, self.version, why)

    def describe(self, model: str, provider: str | None = None) -> dict:
        """The price in force for `rag prices MODEL`: per-million figures, layer, source and version."""
        entry, layer = self.entry(model)
        if entry is not None:
            return {"model": model, "source": layer, "version": self.version, "url": entry.source,
                    "checked": entry.checked, "note": entry.note,
                    "tiers": [{"max_input_tokens": t.max_input_tokens, "input_per_mtok": str(t.input_per_mtok),
                               "cache_read_per_mtok": _s(t.cached_input_per_mtok),
                               "cache_write_per_mtok": _s(t.cache_write_per_mtok),
                               "output_per_mtok": str(t.output_per_mtok)} for t in entry.tiers]}
        calc = self._genai(model, 1, 0, 0, 0, provider)
        if calc is None:
            return {"model": model, "source": "unpriced", "version": self.version, "tiers": []}
        mp = calc.model_price
        return {"model": model, "source": "genai-prices", "version": self.version,
                "url": f"genai-prices: {calc.provider.name} / {calc.model.name}", "checked": "", "note": "",
                "tiers": [{"max_input_tokens": None, "input_per_mtok": _s(mp.input_mtok),
                           "cache_read_per_mtok": _s(mp.cache_read_mtok),
                           "cache_write_per_mtok": _s(getattr(mp, "cache_write_mtok", None)),
                           "output_per_mtok": _s(mp.output_mtok)}]}


def _s(x) -> str | None:
    if x is None:
        return None
    return str(x) if not hasattr(x, "tiers") else "tiered (see genai-prices)"


def rate_quote(tokens: int, per_1k: float, label: str) -> Quote:
    """Per-1k-token rate for embedding / rerank (hosted-equivalent price of a local model)."""
    return Quote(to_nano(Decimal(tokens) * Decimal(str(per_1k)) / Decimal(1000)), f"rate:{label}={per_1k}/1k", "rate")
