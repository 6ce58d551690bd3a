"""A second opinion on our prices: LiteLLM's bundled model price map (`rag prices check --against
litellm`). LiteLLM is an optional extra, never needed at runtime; its map is read offline
(LITELLM_LOCAL_MODEL_COST_MAP=True). Every chat model of the providers we price is compared field by
field (input, output, cache read, explicit cache read, cache write, per million tokens, USD); a
field counts as different when the two differ by more than 1% of LiteLLM's figure. A field LiteLLM
does not list is not compared; a model LiteLLM prices and we cannot is a difference. Time-of-day
prices match when LiteLLM's figure equals ours at either off-peak or peak (LiteLLM lists DeepSeek's
peak price). A tiered entry (LiteLLM's `tiered_pricing`, by prompt length) is compared tier by tier:
each of its tiers against our tier for a prompt in the middle of its range. What cannot be compared
is listed with why (a yuan price, an entry with neither a price nor tiers)."""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from tracing.pricing.table import PriceTable

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


def compare(table: PriceTable, cost_map: dict, at: datetime | str | None = None
            ) -> tuple[list[PriceDiff], int, list[tuple[str, str]]]:
    """Differences beyond 1% between our prices in force at `at` and LiteLLM's map, how many LiteLLM
    models were compared, and the (key, why) of those of our providers' chat models that could not be."""
    diffs: list[PriceDiff] = []
    skipped: list[tuple[str, str]] = []
    compared = 0
    for key, info in sorted(cost_map.items()):
        provider = PROVIDERS.get(str(info.get("litellm_provider")))
        if provider is None or info.get("mode") != "chat":
            continue
        tiers = info.get("tiered_pricing") or []
        if info.get("input_cost_per_token") is None and not tiers:
            skipped.append((key, "LiteLLM lists neither a price nor tiers"))
            continue
        compared += 1
        bare = key.rsplit("/", 1)[-1]
        # (label suffix, LiteLLM's figures, a prompt length inside that tier)
        parts = [("", info, None)] if not tiers else [
            (f" {_k(t['range'][0])}-{_k(t['range'][1])}", t, int((t["range"][0] + t["range"][1]) // 2)) for t in tiers]
        for suffix, theirs_info, prompt in parts:
            card = table.rate_card(bare, provider=provider, at=at, input_tokens=prompt)
            if card.price is None:
                diffs.append(PriceDiff(key, "price" + suffix, "unpriced",
                                       _fmt(_per_mtok(theirs_info.get("input_cost_per_token"))) + " in", card.why[:60]))
                continue
            if card.currency != "USD":
                skipped.append((key, f"ours is in {card.currency}, LiteLLM's in USD"))
                break
            diffs += _field_diffs(key, suffix, card, theirs_info)
    return diffs, compared, skipped


def _k(tokens) -> str:
    """A tier bound as LiteLLM writes it (256000 -> 256K, 1000000 -> 1M)."""
    n = int(tokens)
    return "0" if not n else f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}K"


def _field_diffs(key: str, suffix: str, card, info: dict) -> list[PriceDiff]:
    diffs = []
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
            diffs.append(PriceDiff(key, label + suffix, "= input", _fmt(theirs), "we bill these tokens at the input rate"))
            continue
        if all(_differs(ours * f, theirs) for f in factors):
            pct = ((ours - theirs) / theirs * 100) if theirs else None
            note = f"{pct:+.1f}%" if pct is not None else ""
            if card.peak_multiplier:
                note += f" (peak x{card.peak_multiplier} also differs)"
            diffs.append(PriceDiff(key, label + suffix, _fmt(ours), _fmt(theirs), note.strip()))
    return diffs
