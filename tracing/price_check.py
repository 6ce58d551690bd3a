"""A second opinion on our prices: LiteLLM's bundled model price map (`rag prices check --against
litellm`). LiteLLM is an optional extra, never needed at runtime; its map is read offline
(LITELLM_LOCAL_MODEL_COST_MAP=True). Every chat model of the providers we price is compared field by
field (input, output, cache read, explicit cache read, cache write, per million tokens, USD); a
field counts as different when the two differ by more than 1% of LiteLLM's figure. A field LiteLLM
does not list is not compared; a model LiteLLM prices and we cannot is a difference. Time-of-day
prices match when LiteLLM's figure equals ours at either off-peak or peak (LiteLLM lists DeepSeek's
peak price)."""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from tracing.pricing import PriceTable

INSTALL_HINT = "litellm is not installed: pip install 'legal-rag[litellm]' (an optional extra)"
TOLERANCE = Decimal("0.01")
# LiteLLM's provider -> ours, for the providers whose prices we carry (USD endpoints only: LiteLLM has
# no mainland CNY entries to compare bigmodel.cn or Model Studio Beijing with)
PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "deepseek": "deepseek", "dashscope": "alibaba-intl",
             "zai": "zai", "moonshot": "moonshotai"}
FIELDS = (("input", "input_per_mtok", "input_cost_per_token"),
          ("output", "output_per_mtok", "output_cost_per_token"),
          ("cache read", "cached_input_per_mtok", "cache_read_input_token_cost"),
          ("explicit read", "explicit_cache_read_per_mtok", "explicit_cache_read_input_token_cost"),
          ("cache write", "cache_write_per_mtok", "cache_creation_input_token_cost"))
MTOK = Decimal(1_000_000)


@dataclass(frozen=True)
class PriceDiff:
    model: str        # LiteLLM's key
    field: str        # input | output | cache read | explicit read | cache write | price
    ours: str         # $/M as text, or "unpriced" / "= input"
    theirs: str
    note: str = ""


def litellm_cost_map() -> dict | None:
    """LiteLLM's bundled map, or None when LiteLLM is not installed."""
    if importlib.util.find_spec("litellm") is None:
        return None
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the map over the network
    import litellm

    return dict(litellm.model_cost)


def _per_mtok(value) -> Decimal | None:
    if value is None:
        return None
    return (Decimal(str(value)) * MTOK).normalize()


def _differs(ours: Decimal, theirs: Decimal) -> bool:
    if theirs == 0:
        return ours != 0
    return abs(ours - theirs) > TOLERANCE * abs(theirs)


def _fmt(x: Decimal | None) -> str:
    return "-" if x is None else f"{x.normalize():f}"


def compare(table: PriceTable, cost_map: dict, at: datetime | str | None = None) -> tuple[list[PriceDiff], int]:
    """Differences beyond 1% between our prices in force at `at` and LiteLLM's map, and how many
    LiteLLM models were compared."""
    diffs: list[PriceDiff] = []
    compared = 0
    for key, info in sorted(cost_map.items()):
        provider = PROVIDERS.get(str(info.get("litellm_provider")))
        if provider is None or info.get("mode") != "chat" or info.get("input_cost_per_token") is None:
            continue
        compared += 1
        card = table.rate_card(key.rsplit("/", 1)[-1], provider=provider, at=at)
        if card.price is None:
            diffs.append(PriceDiff(key, "price", "unpriced", _fmt(_per_mtok(info["input_cost_per_token"])) + " in",
                                   card.why[:60]))
            continue
        if card.currency != "USD":
            continue  # not comparable with LiteLLM's USD
        factors = [Decimal(1)] + ([card.peak_multiplier] if card.peak_multiplier else [])
        for label, ours_attr, theirs_key in FIELDS:
            theirs = _per_mtok(info.get(theirs_key))
            if theirs is None or (theirs == 0 and label != "input" and label != "output"):
                continue  # LiteLLM does not list it (a 0 cache price there means "not listed")
            ours = getattr(card.price, ours_attr)
            if ours is None and label == "explicit read":
                ours = card.price.cached_input_per_mtok
            if ours is None:
                if label == "cache write":
                    continue  # ours bills writes at the input rate; LiteLLM's premium is its own field
                diffs.append(PriceDiff(key, label, "= input", _fmt(theirs), "we bill these tokens at the input rate"))
                continue
            if all(_differs(ours * f, theirs) for f in factors):
                pct = ((ours - theirs) / theirs * 100) if theirs else None
                note = f"{pct:+.1f}%" if pct is not None else ""
                if card.peak_multiplier:
                    note += f" (peak x{card.peak_multiplier} also differs)"
                diffs.append(PriceDiff(key, label, _fmt(ours), _fmt(theirs), note.strip()))
    return diffs, compared
