"""Prices from genai-prices' bundled snapshot (no network) plus an optional override file for
self-hosted or custom models. An unknown model is *unpriced* (None), never a silent $0; every
quote carries the price-table version that produced it, which the ledger stores on each row.

Override file (JSON), per million tokens:
    {"version": "2026-11-01", "models": {"my-llm": {"input_per_mtok": "0.10",
      "output_per_mtok": "0.40", "cached_input_per_mtok": "0.05"}}}
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from decimal import Decimal
from importlib.metadata import version as pkg_version
from pathlib import Path

from tracing.money import to_nano

log = logging.getLogger(__name__)
MTOK = Decimal(1_000_000)


@dataclass(frozen=True)
class Quote:
    cost_nano: int | None  # None = unpriced
    version: str
    source: str  # genai-prices | override | rate | unpriced


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cached_input_per_mtok: Decimal | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> Decimal:
        cached = min(cached_tokens, input_tokens) if self.cached_input_per_mtok is not None else 0
        return ((input_tokens - cached) * self.input_per_mtok + cached * (self.cached_input_per_mtok or 0)
                + output_tokens * self.output_per_mtok) / MTOK


class PriceTable:
    def __init__(self, overrides: dict[str, ModelPrice] | None = None, override_version: str | None = None):
        self.overrides = overrides or {}
        base = f"genai-prices@{pkg_version('genai-prices')}"
        self.version = f"{base}+overrides:{override_version}" if self.overrides else base
        self._warned: set[str] = set()

    @classmethod
    def load(cls, overrides_path: Path | None = None) -> "PriceTable":
        if not overrides_path:
            return cls()
        raw = Path(overrides_path).read_bytes()
        try:
            data = json.loads(raw)
            models = {name: ModelPrice(Decimal(str(p["input_per_mtok"])), Decimal(str(p["output_per_mtok"])),
                                       Decimal(str(p["cached_input_per_mtok"])) if p.get("cached_input_per_mtok") is not None else None)
                      for name, p in data["models"].items()}
        except (ValueError, KeyError, TypeError) as e:
            from rag_app.errors import ConfigError
            raise ConfigError(f"price override file {overrides_path}: {e!r}; expected "
                              '{"version": "...", "models": {"name": {"input_per_mtok": "0.1", "output_per_mtok": "0.4"}}}') from e
        version = str(data.get("version") or hashlib.sha256(raw).hexdigest()[:8])
        return cls(models, version)

    def quote(self, model: str, input_tokens: int, output_tokens: int = 0, cached_tokens: int = 0,
              provider: str | None = None) -> Quote:
        if model in self.overrides:
            return Quote(to_nano(self.overrides[model].cost(input_tokens, output_tokens, cached_tokens)),
                         self.version, "override")
        from genai_prices import Usage, calc_price

        try:
            calc = calc_price(Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                                    cache_read_tokens=cached_tokens or None),
                              model_ref=model, provider_id=provider)
        except LookupError:
            if model not in self._warned:
                self._warned.add(model)
                log.warning("model %r has no price in %s; its cost is recorded as unpriced (null). "
                            "Add it to a RAG_PRICE_OVERRIDES file.", model, self.version)
            return Quote(None, self.version, "unpriced")
        return Quote(to_nano(calc.total_price), self.version, "genai-prices")


def rate_quote(tokens: int, per_1k: float, label: str) -> Quote:
    """Per-1k-token rate for embedding / rerank (hosted-equivalent price of a local model)."""
    return Quote(to_nano(Decimal(tokens) * Decimal(str(per_1k)) / Decimal(1000)), f"rate:{label}={per_1k}/1k", "rate")
