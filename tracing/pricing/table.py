"""What a model's tokens cost at the moment a call was made, from three layers merged by date (for a
call at T, the first layer with a price in force at T answers; an override dated D covers calls from D,
and before D the layers below still answer, with their own rules):

1. the user's override file (`RAG_PRICE_OVERRIDES`), for self-hosted models or negotiated prices;
2. `tracing/pricing/bundled_prices.json`: dated prices for models genai-prices lacks or has stale
   (DeepSeek, Qwen on Model Studio, GLM on z.ai and bigmodel.cn, Kimi), each with its source URL
   and the date it was checked;
3. genai-prices' bundled snapshot (no network), asked with the call's own timestamp.

Every quote takes the call's start time (`at`): the dated price in force then, its time-of-day
rule evaluated in the provider's own timezone (DeepSeek's peak hours are Beijing time, holidays
off), and, for a CNY price, the exchange rate of that time. A call made before an entry's first
dated price falls through to the next layer; a call made after a model name was retired is
unpriced and says so. An unknown model is *unpriced* (None), never a silent $0. Every quote
carries the table version, which the ledger stores on each row so history can be re-priced, and a
`basis` line saying which dated price and rule produced it.

Provider rules: input tokens include cache reads and writes. Cache reads are billed at the
cache-read price (on Model Studio: the explicit-cache hit price when the request used an explicit
cache, which a cache write shows), cache writes at the cache-write price, the rest at the input
price; where a provider prices by prompt length, the tier whose `max_input_tokens` covers the
prompt applies, and a prompt above the last known tier is unpriced.

Override file (JSON), per million tokens. The flat form, tiers, or dated prices:
    {"version": "2026-11-01", "models": {
      "my-llm": {"input_per_mtok": "0.10", "output_per_mtok": "0.40", "cached_input_per_mtok": "0.05"},
      "my-long-llm": {"tiers": [{"max_input_tokens": 32000, "input_per_mtok": "1", "output_per_mtok": "2"},
                                {"input_per_mtok": "2", "output_per_mtok": "4", "cache_write_per_mtok": "2.5"}]},
      "zhipuai/glm-4.6": {"currency": "CNY", "prices": [
          {"from": "2026-01-01", "input_per_mtok": "2", "output_per_mtok": "8", "cache_read_per_mtok": "0.4"}]}},
     "holidays": {"CN": {"2027": {"source": "https://www.gov.cn/...", "days_off": ["2027-01-01"]}}},
     "fx": {"CNY": [{"from": "2026-12-01", "per_usd": "7.05", "source": "my bank"}]}}
A model without `from` (or a top-level `effective_from`) applies to every call, whenever made. Any
override file, one with only `holidays` or only `fx` too, adds `+overrides:<version>` to the table's
version, so a re-price names the file that changed a figure.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from decimal import Decimal
from functools import lru_cache
from importlib import resources
from importlib.metadata import version as pkg_version
from pathlib import Path

from tracing.pricing.fx import USD, FxTable
from rag_app.core import to_nano
from tracing.pricing.rules import HolidayCalendar, PeakRule, as_utc, bundled_calendars, parse_instant

log = logging.getLogger(__name__)
MTOK = Decimal(1_000_000)
BUNDLED = "bundled_prices.json"
SNAPSHOT = re.compile(r"^(?P<base>.+)-\d{4}-\d{2}-\d{2}$")  # Model Studio's dated snapshots: qwen-plus-2025-07-28


@dataclass(frozen=True)
class Quote:
    cost_nano: int | None  # USD nano-dollars; None = unpriced
    version: str
    source: str  # override | bundled | genai-prices | rate | unpriced
    basis: str = ""  # which dated price and rule: "bundled deepseek/deepseek-flash from 2026-09-19, off-peak: ..."
    effective_from: str | None = None
    rule: str | None = None  # peak | off-peak | None (no time rule)
    currency: str = USD  # the price's own currency
    native_cost: Decimal | None = None  # in that currency, before conversion
    fx: str | None = None  # the rate used, when converted
    warning: str | None = None  # retired name, missing holiday calendar, why unpriced
    applied: str | None = None  # the rule as a row records it: peak | off-peak | holiday | genai's time-of-day rule


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cached_input_per_mtok: Decimal | None = None  # cache reads (implicit cache); None = billed as input
    cache_write_per_mtok: Decimal | None = None   # cache writes; None = billed as input
    max_input_tokens: int | None = None           # this tier covers prompts up to here
    explicit_cache_read_per_mtok: Decimal | None = None  # Model Studio: hits of an explicit cache

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int, cache_write_tokens: int = 0,
             explicit_cache: bool | None = None) -> Decimal:
        cached = min(cached_tokens, input_tokens)
        write = min(cache_write_tokens, input_tokens - cached)
        plain = input_tokens - cached - write
        # Model Studio: explicit and implicit caching are exclusive per request, and only an explicit
        # request writes a cache; so a cache write marks the request's hits as explicit ones.
        explicit = (write > 0) if explicit_cache is None else explicit_cache
        read_rate = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        if explicit and self.explicit_cache_read_per_mtok is not None:
            read_rate = self.explicit_cache_read_per_mtok
        write_rate = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        return (plain * self.input_per_mtok + cached * read_rate + write * write_rate
                + output_tokens * self.output_per_mtok) / MTOK

    def scaled(self, factor: Decimal) -> "ModelPrice":
        def s(x):
            return None if x is None else x * factor
        return replace(self, input_per_mtok=self.input_per_mtok * factor, output_per_mtok=self.output_per_mtok * factor,
                       cached_input_per_mtok=s(self.cached_input_per_mtok),
                       cache_write_per_mtok=s(self.cache_write_per_mtok),
                       explicit_cache_read_per_mtok=s(self.explicit_cache_read_per_mtok))


@dataclass(frozen=True)
class PricePeriod:
    """The price of one model from `effective_from` until the next period begins."""
    effective_from: datetime | None  # UTC; None = applies to every call (an undated override)
    tiers: tuple[ModelPrice, ...] = ()
    peak: PeakRule | None = None
    billed_as: str | None = None   # from here on, served and billed as this model of the same provider
    unpriced: str | None = None    # a known entry with no confirmed figure: why
    note: str = ""
    label: str = ""                # effective-from as written in the table (2026-08-23 = Beijing midnight)
    # whether the entry says its time rule ("peak": {...}, or "peak": null for none); an override that does
    # not keeps the rule of the price in force beneath it (a correction of figures is not a change of rule)
    peak_set: bool = True

    def tier_for(self, input_tokens: int) -> ModelPrice | None:
        for tier in self.tiers:
            if tier.max_input_tokens is None or input_tokens <= tier.max_input_tokens:
                return tier
        return None

    def since(self) -> str:
        if self.effective_from is None:
            return "any date"
        return self.label or _iso(self.effective_from)


@dataclass(frozen=True)
class PriceEntry:
    tiers: tuple[ModelPrice, ...] = ()  # shorthand for one undated period
    source: str = ""   # where the figures came from (URL)
    checked: str = ""  # when they were checked
    note: str = ""
    periods: tuple[PricePeriod, ...] = ()
    currency: str = USD
    retired_at: datetime | None = None
    retired_label: str = ""
    aliases: tuple[str, ...] = ()
    snapshots: bool = False  # dated snapshot names (<model>-YYYY-MM-DD) are priced as this model
    prefixes: tuple[str, ...] = ()  # names starting so are priced as this model (fine-tuned ft:<base>:<org>:...)

    def __post_init__(self):
        if not self.periods and self.tiers:
            object.__setattr__(self, "periods", (PricePeriod(None, self.tiers),))
        ordered = sorted(self.periods, key=lambda p: p.effective_from or datetime.min.replace(tzinfo=timezone.utc))
        object.__setattr__(self, "periods", tuple(ordered))

    def period_at(self, when: datetime) -> PricePeriod | None:
        current = None
        for p in self.periods:
            if p.effective_from is None or p.effective_from <= when:
                current = p
        return current

    def tier_for(self, input_tokens: int) -> ModelPrice | None:  # the latest period (undated entries)
        return self.periods[-1].tier_for(input_tokens) if self.periods else None


@dataclass(frozen=True)
class Provider:
    id: str
    name: str
    currency: str = USD
    timezone: str = "UTC"
    hosts: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    genai_id: str | None = None  # genai-prices' provider id, where it has one


@dataclass(frozen=True)
class Bundled:
    entries: dict[str, PriceEntry]
    version: str
    providers: dict[str, Provider]
    default_provider: dict[str, str]  # model-name prefix -> provider id, when nothing else says
    fx: FxTable
    calendars: dict[str, HolidayCalendar] = field(default_factory=dict)


def _dec(p: dict, *keys: str) -> Decimal | None:
    for k in keys:
        if p.get(k) is not None:
            return Decimal(str(p[k]))
    return None


def _tier(p: dict) -> ModelPrice:
    return ModelPrice(Decimal(str(p["input_per_mtok"])), Decimal(str(p["output_per_mtok"])),
                      _dec(p, "cache_read_per_mtok", "cached_input_per_mtok"), _dec(p, "cache_write_per_mtok"),
                      int(p["max_input_tokens"]) if p.get("max_input_tokens") is not None else None,
                      _dec(p, "explicit_cache_read_per_mtok"))


def _tiers(p: dict) -> tuple[ModelPrice, ...]:
    if "tiers" in p:
        if not p["tiers"]:
            raise ValueError("an empty tiers list")
        return tuple(_tier(t) for t in p["tiers"])
    return (_tier(p),) if "input_per_mtok" in p else ()


def _period(p: dict, tz: str, default_from: str | None) -> PricePeriod:
    when = p.get("from", default_from)
    tiers = () if p.get("unpriced") or p.get("billed_as") else _tiers(p)
    if not tiers and not p.get("unpriced") and not p.get("billed_as"):
        raise ValueError("a price needs input_per_mtok and output_per_mtok (or tiers, billed_as, unpriced)")
    return PricePeriod(None if when is None else parse_instant(when, tz), tiers,
                       PeakRule.from_json(p["peak"], tz) if p.get("peak") else None,
                       p.get("billed_as"), p.get("unpriced"), str(p.get("note", "")), "" if when is None else str(when),
                       "peak" in p)


def parse_entries(data: dict, providers: dict[str, Provider] | None = None) -> dict[str, PriceEntry]:
    out = {}
    default_from = data.get("effective_from")
    for name, p in (data.get("models") or {}).items():
        try:
            prov = (providers or {}).get(name.split("/", 1)[0]) if "/" in name else None
            tz = p.get("timezone") or (prov.timezone if prov else "UTC")
            raw = p["prices"] if "prices" in p else [p]
            periods = tuple(_period(x, tz, default_from) for x in raw)
            out[name] = PriceEntry(
                source=str(p.get("source", "")), checked=str(p.get("checked", "")), note=str(p.get("note", "")),
                periods=periods, currency=str(p.get("currency") or (prov.currency if prov else USD)),
                retired_at=parse_instant(p["retired"], tz) if p.get("retired") else None,
                retired_label=str(p.get("retired") or ""),
                aliases=tuple(p.get("aliases", ())), snapshots=bool(p.get("snapshots", False)),
                prefixes=tuple(p.get("prefixes", ())))
        except (KeyError, TypeError, ValueError, ArithmeticError) as e:
            raise ValueError(f"model {name!r}: {e}") from e
    return out


def _providers(data: dict) -> dict[str, Provider]:
    return {pid: Provider(pid, p.get("name", pid), p.get("currency", USD), p.get("timezone", "UTC"),
                          tuple(p.get("hosts", ())), tuple(p.get("aliases", ())), p.get("genai_id"))
            for pid, p in data.get("providers", {}).items()}


@lru_cache(maxsize=1)
def load_bundled_table() -> Bundled:
    data = json.loads(resources.files("tracing.pricing").joinpath(BUNDLED).read_text(encoding="utf-8"))
    providers = _providers(data)
    return Bundled(parse_entries(data, providers), str(data["version"]), providers,
                   dict(data.get("default_provider", {})), FxTable.parse(data.get("fx")), bundled_calendars())


def bare_model(model: str) -> str:
    """`deepseek/deepseek-chat` (LiteLLM / router spelling) -> `deepseek-chat`."""
    return model.rsplit("/", 1)[-1]


def _iso(d: datetime) -> str:
    return d.astimezone(timezone.utc).isoformat(timespec="minutes").replace("+00:00", "Z")


@dataclass(frozen=True)
class RateCard:
    source: str
    price: ModelPrice | None  # per million tokens, in `currency`; None = unpriced
    peak_multiplier: Decimal | None = None
    currency: str = USD
    why: str = ""


@dataclass(frozen=True)
class Resolved:
    entry: PriceEntry
    layer: str  # override | bundled
    key: str    # the table key that matched
    provider: Provider | None
    via: str = ""  # "alias of qwen-plus" / "dated snapshot of qwen-plus"


class PriceTable:
    def __init__(self, overrides: Mapping[str, PriceEntry | ModelPrice] | None = None, override_version: str | None = None,
                 *, bundled: dict[str, PriceEntry] | None = None, bundled_version: str | None = None,
                 default_provider: str | None = None, clock: Callable[[], datetime] | None = None,
                 calendars: dict | None = None, fx: FxTable | None = None):
        self.overrides = {k: v if isinstance(v, PriceEntry) else PriceEntry((v,)) for k, v in (overrides or {}).items()}
        table = load_bundled_table()
        if bundled is None:
            bundled, bundled_version = table.entries, table.version
        self.bundled = bundled
        self.providers = table.providers
        self.name_defaults = table.default_provider
        self.fx = table.fx if fx is None else table.fx.merged(fx)
        self.calendars = dict(table.calendars)
        for name, years in (calendars or {}).items():
            base = self.calendars.get(name) or HolidayCalendar(name, frozenset(), frozenset())
            self.calendars[name] = base.with_years(years)
        self.default_provider = self._provider_id(default_provider)
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.genai_version = f"genai-prices@{pkg_version('genai-prices')}"
        self.version = f"{self.genai_version}+bundled:{bundled_version}"
        # any override changes the version, a calendar-only or FX-only one too: a re-price then names it
        if self.overrides or calendars or (fx is not None and fx.rates):
            self.version += f"+overrides:{override_version}"
        self._warned: set[str] = set()

    @classmethod
    def load(cls, overrides_path: Path | None = None, *, base_url: str | None = None,
             clock: Callable[[], datetime] | None = None) -> "PriceTable":
        """The table with the user's override file; `base_url` (OPENAI_BASE_URL) names the provider
        whose prices apply when a call does not say (api.z.ai -> z.ai's USD list, open.bigmodel.cn -> CNY)."""
        default = provider_for_url(base_url)
        if not overrides_path:
            return cls(default_provider=default, clock=clock)
        from rag_app.core import ConfigError
        try:
            raw = Path(overrides_path).read_bytes()
        except OSError as e:
            raise ConfigError(f"price override file {overrides_path} cannot be read ({e.strerror}); "
                              "fix RAG_PRICE_OVERRIDES or unset it") from e
        try:
            data = json.loads(raw)
            models = parse_entries(data, load_bundled_table().providers)
            fx = FxTable.parse(data.get("fx"))
            calendars = data.get("holidays") or {}
            table = cls(models, str(data.get("version") or hashlib.sha256(raw).hexdigest()[:8]),
                        default_provider=default, clock=clock, calendars=calendars, fx=fx)
        except (ValueError, KeyError, TypeError, ArithmeticError, AttributeError) as e:
            raise ConfigError(f"price override file {overrides_path}: {e}; expected "
                              '{"version": "...", "models": {"name": {"input_per_mtok": "0.1", "output_per_mtok": "0.4"}}} '
                              '(dated: "prices": [{"from": "2026-01-01", ...}])') from e
        return table

    def for_recorded_rows(self) -> "PriceTable":
        """This table with no endpoint of its own: re-pricing prices each row by the provider recorded on
        it, never by the shell's OPENAI_BASE_URL."""
        table = copy.copy(self)
        table.default_provider = None
        return table

    def endpoint_provider(self, model: str, provider: str | None = None) -> str | None:
        """The provider a call's row records: RAG_LLM_PROVIDER, else a LiteLLM-style prefix, else the
        endpoint's host; None when none says (the model name's usual provider is a guess, not recorded)."""
        prefix = model.rsplit("/", 1)[0] if "/" in model else None
        return self._provider_id(provider) or self._provider_id(prefix) or self.default_provider

    # -- which entry ----------------------------------------------------------------------------
    def _provider_id(self, name: str | None) -> str | None:
        if not name:
            return None
        low = name.lower()
        for p in self.providers.values():
            if low == p.id or low in p.aliases:
                return p.id
        return low  # a provider we hold no prices for (openai, anthropic, openrouter...): genai-prices knows it

    def provider_of(self, model: str, provider: str | None = None) -> str | None:
        """Whose prices apply: the call's provider, else a LiteLLM-style prefix, else the endpoint
        (OPENAI_BASE_URL), else the usual provider of that model name (glm-* -> z.ai)."""
        prefix = model.rsplit("/", 1)[0] if "/" in model else None
        explicit = self._provider_id(provider) or self._provider_id(prefix) or self.default_provider
        if explicit:
            return explicit
        bare = bare_model(model).lower()
        for start, pid in self.name_defaults.items():
            if bare.startswith(start):
                return pid
        return None

    def _match(self, table: dict[str, PriceEntry], names: list[str]) -> tuple[str, str] | None:
        for name in names:
            if name in table:
                return name, ""
        for name in names:  # aliases (qwen-plus-latest) and dated snapshots (qwen-plus-2025-07-28)
            prefix, _, bare = name.rpartition("/")
            for key, entry in table.items():
                kp, _, kb = key.rpartition("/")
                if kp != prefix:
                    continue
                if bare in entry.aliases:
                    return key, f"alias of {kb}"
                m = SNAPSHOT.match(bare)
                if entry.snapshots and m and m["base"] == kb:
                    return key, f"dated snapshot of {kb}"
                if any(bare.startswith(p) for p in entry.prefixes):
                    return key, f"a name of {kb}"
        return None

    def resolve_layers(self, model: str, provider: str | None = None) -> list[Resolved]:
        """The model's entry in each layer that has one, first layer first. Layers merge by date: an
        override answers only from its first `from` on; before that, the bundled entry (then
        genai-prices) answers with its own rules."""
        bare = bare_model(model)
        pid = self.provider_of(model, provider)
        qualified = [f"{pid}/{bare}"] if pid else []
        out = []
        for layer, table, names in (("override", self.overrides, [model, *qualified, bare]),
                                    ("bundled", self.bundled, qualified)):
            hit = self._match(table, list(dict.fromkeys(names)))
            if hit:
                key, via = hit
                prov = self.providers.get(key.split("/", 1)[0]) if "/" in key else None
                out.append(Resolved(table[key], layer, key, prov, via))
        return out

    def resolve(self, model: str, provider: str | None = None, at: datetime | None = None) -> Resolved | None:
        """The entry that answers for a call at `at` (any date when None): the first layer with a
        price in force then, or a retirement."""
        layers = self.resolve_layers(model, provider)
        if at is None:
            return layers[0] if layers else None
        for res in layers:
            if res.entry.period_at(at) is not None or (res.entry.retired_at is not None and at >= res.entry.retired_at):
                return res
        return None

    def entry(self, model: str, provider: str | None = None) -> tuple[PriceEntry | None, str]:
        """The table entry for a model and which layer it came from (None: genai-prices or nothing)."""
        r = self.resolve(model, provider)
        return (r.entry, r.layer) if r else (None, "")

    # -- quotes ---------------------------------------------------------------------------------
    def when(self, at: datetime | str | None) -> datetime:
        return self.clock() if at is None else as_utc(at)

    def quote(self, model: str, input_tokens: int, output_tokens: int = 0, cached_tokens: int = 0,
              provider: str | None = None, cache_write_tokens: int = 0, *, at: datetime | str | None = None,
              explicit_cache: bool | None = None) -> Quote:
        """The price of one call made at `at` (its start; default: now)."""
        when = self.when(at)
        tokens = (input_tokens, output_tokens, cached_tokens, cache_write_tokens, explicit_cache)
        before_first = None
        layers = self.resolve_layers(model, provider)
        for i, res in enumerate(layers):
            q = self._quote_entry(res, when, tokens, depth=0, below=tuple(layers[i + 1:]))
            if q is not None:
                return q
            if before_first is None and res.entry.periods and res.entry.periods[0].effective_from:
                before_first = f"{res.key}'s first dated price starts {_iso(res.entry.periods[0].effective_from)}"
        q = self._quote_genai(model, tokens, self.provider_of(model, provider), when)
        if q is not None:
            return q
        why = f"no price in force at {_iso(when)} ({before_first})" if before_first else "it has no price"
        return self._unpriced(model, why)

    def _unpriced(self, model: str, why: str, basis: str = "") -> Quote:
        self._warn(model, why)
        return Quote(None, self.version, "unpriced", basis=basis, warning=why)

    def _quote_entry(self, res: Resolved, when: datetime, tokens: tuple, depth: int,
                     below: tuple[Resolved, ...] = ()) -> Quote | None:
        entry, name = res.entry, res.key + (f" ({res.via})" if res.via else "")
        if entry.retired_at is not None and when >= entry.retired_at:
            return self._unpriced(res.key, f"{name} was retired {entry.retired_label or _iso(entry.retired_at)}; a call made after that "
                                  "was not served under this name at its provider's price (price the gateway that "
                                  "served it in a RAG_PRICE_OVERRIDES file)", basis=f"{res.layer} {name}: retired")
        period = entry.period_at(when)
        if period is None:
            return None  # before the first dated price: the next layer may know
        basis = f"{res.layer} {name} from {period.since()}"
        if period.unpriced:
            return self._unpriced(res.key, f"{name}: {period.unpriced}", basis=basis)
        if period.billed_as:
            return self._quote_billed_as(res, name, period.billed_as, basis, when, tokens, depth)
        return self._quote_period(res, name, period, basis, when, tokens, below)

    def rule_in_force(self, res: Resolved, period: PricePeriod, when: datetime,
                      below: tuple[Resolved, ...] = ()) -> tuple[PeakRule | None, str | None]:
        """The time rule a period prices by at `when`, and where it comes from when not from the period itself:
        an override period that does not say (`"peak"` absent) keeps the rule of the price in force beneath
        it then (the bundled table's, following a `billed_as`); `"peak": null` says there is none."""
        if res.layer != "override" or period.peak_set:
            return period.peak, None
        for lower in below:
            found = self._period_in_force(lower, when)
            if found is not None:
                where, p = found
                return (p.peak, where) if p.peak is not None else (None, None)
        return None, None

    def _period_in_force(self, res: Resolved, when: datetime) -> tuple[str, PricePeriod] | None:
        """(label, period) of the dated price `res` bills a call at `when` by, through `billed_as` hand-overs."""
        for _ in range(4):
            e = res.entry
            if e.retired_at is not None and when >= e.retired_at:
                return None
            p = e.period_at(when)
            if p is None:
                return None
            if not p.billed_as:
                return f"{res.layer} {res.key} from {p.since()}", p
            prefix = res.key.rpartition("/")[0]
            nxt = self.resolve(f"{prefix}/{p.billed_as}" if prefix else p.billed_as, at=when)
            if nxt is None:
                return None
            res = nxt
        return None

    def _quote_billed_as(self, res: Resolved, name: str, billed_as: str, basis: str, when: datetime, tokens: tuple,
                         depth: int) -> Quote:
        """A period billed as another model (beside it at the same provider): that model's price then."""
        if depth > 3:
            raise ValueError(f"{res.key}: billed_as chain too long")
        prefix = res.key.rpartition("/")[0]
        target = self.resolve(f"{prefix}/{billed_as}" if prefix else billed_as, at=when)
        q = self._quote_entry(target, when, tokens, depth + 1) if target else None
        if q is None:
            return self._unpriced(res.key, f"{name} is billed as {billed_as}, which has no price then")
        return replace(q, basis=f"{basis}: billed as {q.basis}")

    def _quote_period(self, res: Resolved, name: str, period: PricePeriod, basis: str, when: datetime,
                      tokens: tuple, below: tuple[Resolved, ...] = ()) -> Quote:
        """The price of a call under one dated period: its prompt's tier, at peak or not, in dollars."""
        input_tokens = tokens[0]
        tier = period.tier_for(input_tokens)
        if tier is None:
            return self._unpriced(res.key, f"a {input_tokens}-token prompt is above {name}'s last priced tier", basis)
        peak, inherited = self.rule_in_force(res, period, when, below)
        if inherited:
            basis += f", time rule of {inherited}"
        tier, basis, rule, warning, applied = self._peak_or_not(res.key, name, replace(period, peak=peak), tier, when,
                                                                basis)
        entry = res.entry
        native = tier.cost(*tokens)
        usd, fx_label = native, None
        if entry.currency != USD:
            rate, fx_warning = self.fx.rate_at(entry.currency, when)
            if rate is None:
                return self._unpriced(res.key, f"{name} is priced in {entry.currency}: {fx_warning}", basis)
            usd, fx_label = native / rate.per_usd, rate.label()
            if fx_warning:
                self._warn_once(res.key, f"{name} at {_iso(when)}: {fx_warning}")
            warning = "; ".join(w for w in (warning, fx_warning) if w) or None
        return Quote(to_nano(usd), self.version, res.layer, basis, period.since(), rule, entry.currency,
                     native, fx_label, warning, applied)

    def _peak_or_not(self, key: str, name: str, period: PricePeriod, tier: ModelPrice, when: datetime,
                     basis: str) -> tuple[ModelPrice, str, str | None, str | None, str | None]:
        """The tier at `when` under the period's time rule (scaled at peak), the basis with the rule's reason,
        and the quote's rule, warning and applied kind (all None without a rule)."""
        if period.peak is None:
            return tier, basis, None, None, None
        verdict = period.peak.evaluate(when, self.calendars)
        if verdict.warning:
            self._warn_once(key, f"{name} at {_iso(when)}: {verdict.warning}")
        if verdict.peak:
            tier = tier.scaled(Decimal(period.peak.multiplier))
        return tier, f"{basis}, {verdict.why}", ("peak" if verdict.peak else "off-peak"), verdict.warning, verdict.kind

    def _genai_calc(self, model: str, tokens: tuple, provider: str | None, when: datetime):
        from genai_prices import Usage, calc_price

        input_tokens, output_tokens, cached_tokens, cache_write_tokens, _ = tokens
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                      cache_read_tokens=cached_tokens or None, cache_write_tokens=cache_write_tokens or None)
        prov = self.providers.get(provider) if provider else None
        genai_provider = prov.genai_id if prov else provider
        if prov is not None and genai_provider is None:
            return None  # a provider genai-prices does not carry: its names there mean someone else's prices
        for ref in dict.fromkeys((model, bare_model(model))):
            try:
                return calc_price(usage, model_ref=ref, provider_id=genai_provider, genai_request_timestamp=when)
            except LookupError:
                continue
        return None

    def _quote_genai(self, model: str, tokens: tuple, provider: str | None, when: datetime) -> Quote | None:
        calc = self._genai_calc(model, tokens, provider, when)
        if calc is None:
            return None
        since, rule = genai_in_force(calc.model, when)
        basis = f"genai-prices {calc.provider.id}/{calc.model.id}" + (f" from {since}" if since else "") + \
            (f", {rule}" if rule else "")
        warning = "deprecated by its provider (genai-prices)" if getattr(calc.model, "deprecated", None) else None
        # genai-prices dates only its conditional prices: a base price is the one its snapshot holds, said so,
        # never left blank (a finance team matches each row to the price list it was billed by)
        return Quote(to_nano(calc.total_price), self.version, "genai-prices", basis, since or self.genai_version, rule,
                     warning=warning, applied=rule)

    def _warn_once(self, model: str, warning: str) -> None:
        """A priced call the table is not sure of (a holiday calendar missing the call's year): logged once
        per model and warning, and kept on the quote (so on the row and in `rag ask`)."""
        key = f"{model}\0{warning.split(': ', 1)[-1]}"
        if key not in self._warned:
            self._warned.add(key)
            log.warning("price of %r: %s", model, warning)

    def _warn(self, model: str, why: str) -> None:
        if model not in self._warned:
            self._warned.add(model)
            fix = "" if "RAG_PRICE_OVERRIDES" in why else " Add it to a RAG_PRICE_OVERRIDES file."
            log.warning("model %r is unpriced in %s: %s; its cost is recorded as null.%s", model, self.version, why, fix)

    def rate_card(self, model: str, provider: str | None = None, at: datetime | str | None = None,
                  input_tokens: int | None = None) -> "RateCard":
        """The per-million prices in force at `at` (the tier of an `input_tokens` prompt, else the first;
        off-peak with the peak multiplier beside it), for comparing tables; `price` is None when unpriced,
        with `why`."""
        when = self.when(at)
        res = self.resolve(model, provider, at=when)
        for _ in range(4):  # follow billed_as
            if res is None:
                break
            e, period = res.entry, res.entry.period_at(when)
            if e.retired_at is not None and when >= e.retired_at:
                return RateCard(res.layer, None, why=f"retired {e.retired_label}")
            if period is None:
                break
            if period.unpriced:
                return RateCard(res.layer, None, why=period.unpriced)
            if period.billed_as:
                prefix = res.key.rpartition("/")[0]
                res = self.resolve(f"{prefix}/{period.billed_as}" if prefix else period.billed_as, at=when)
                continue
            return self._period_rate_card(model, provider, res, period, when, input_tokens)
        return self._genai_rate_card(model, provider, when)

    def _period_rate_card(self, model: str, provider: str | None, res: Resolved, period: PricePeriod, when: datetime,
                          input_tokens: int | None) -> "RateCard":
        """The rate card of a table entry's period in force (the tier of an `input_tokens` prompt, else the first)."""
        tier = period.tiers[0] if input_tokens is None else period.tier_for(input_tokens)
        if tier is None:
            return RateCard(res.layer, None, why=f"a {input_tokens}-token prompt is above {res.key}'s last tier")
        peak, _ = self.rule_in_force(res, period, when, _below(self.resolve_layers(model, provider), res))
        return RateCard(res.layer, tier, Decimal(peak.multiplier) if peak else None,
                        res.entry.currency, f"{res.key} from {period.since()}")

    def _genai_rate_card(self, model: str, provider: str | None, when: datetime) -> "RateCard":
        """The rate card genai-prices gives a model the table does not price (its base prices, USD)."""
        calc = self._genai_calc(model, (1, 0, 0, 0, None), self.provider_of(model, provider), when)
        if calc is None:
            return RateCard("unpriced", None, why="no price")
        mp = calc.model_price

        def base(x):
            return None if x is None else Decimal(str(getattr(x, "base", x)))
        price = ModelPrice(base(mp.input_mtok) or Decimal(0), base(mp.output_mtok) or Decimal(0),
                           base(mp.cache_read_mtok), base(getattr(mp, "cache_write_mtok", None)))
        return RateCard("genai-prices", price, None, USD, f"genai-prices {calc.provider.id}/{calc.model.id}")

    # -- what `rag prices MODEL` shows ----------------------------------------------------------
    def describe(self, model: str, provider: str | None = None, at: datetime | str | None = None) -> dict:
        """The price in force at `at` (default now) for `rag prices MODEL`, with its layer, source,
        version and the model's dated history."""
        when = self.when(at)
        layers = self.resolve_layers(model, provider)
        res = self.resolve(model, provider, at=when)
        if res is not None:
            return self._describe_entry(model, res, when, layers)
        res = layers[0] if layers else None
        if res is not None and res.entry.retired_at:
            return self._describe_entry(model, res, when, layers)
        calc = self._genai_calc(model, (1, 0, 0, 0, None), self.provider_of(model, provider), when)
        if calc is None:
            out = {"model": model, "source": "unpriced", "version": self.version, "at": _iso(when), "tiers": [],
                   "history": []}
            if res is not None:
                out["note"] = f"{res.key}'s first dated price starts {res.entry.periods[0].since()}"
            return out
        mp = calc.model_price
        since, rule = genai_in_force(calc.model, when)
        return {"peak": False, "rule_applied": rule, "basis": "", "warning": None,
                "model": model, "source": "genai-prices", "version": self.version, "at": _iso(when),
                "url": f"genai-prices: {calc.provider.name} / {calc.model.name}", "checked": "",
                "note": calc.model.price_comments or "", "currency": USD, "effective_from": since or self.genai_version,
                "rule": rule,
                "retired": None, "deprecated": bool(getattr(calc.model, "deprecated", False)),
                "tiers": [{"max_input_tokens": None, "input_per_mtok": _s(mp.input_mtok),
                           "cache_read_per_mtok": _s(mp.cache_read_mtok),
                           "cache_write_per_mtok": _s(getattr(mp, "cache_write_mtok", None)),
                           "explicit_cache_read_per_mtok": None, "output_per_mtok": _s(mp.output_mtok)}],
                "history": []}

    def _describe_entry(self, model: str, res: Resolved, when: datetime, layers: list[Resolved]) -> dict:
        e = res.entry
        current = e.period_at(when)
        retired = e.retired_at is not None and when >= e.retired_at
        rule, source = self._rule_json(res, current, when, _below(layers, res))
        out = {"model": model, "key": res.key, "via": res.via or None, "source": "unpriced" if retired else res.layer,
               "version": self.version, "at": _iso(when), "url": e.source, "checked": e.checked, "note": e.note,
               "currency": e.currency, "retired": _retired_json(e),
               "effective_from": current.since() if current else None,
               "rule": rule, "rule_source": source, **_in_force_json(current, retired),
               # every layer's dated prices: an override answers from its first `from`, the layers below before it
               "history": [_history_json(r, p) for r in layers for p in r.entry.periods]}
        if current is not None and current.unpriced:
            out["source"] = "unpriced"
        return {**out, **self._moment(model, res, when)}

    def _rule_json(self, res: Resolved, period: PricePeriod | None, when: datetime,
                   below: tuple[Resolved, ...]) -> tuple[str | None, str | None]:
        """(the time rule a call at `when` is priced by, where it comes from) for `rag prices --json`."""
        if period is None:
            return None, None
        rule, inherited = self.rule_in_force(res, period, when, below)
        if rule is not None:
            return rule.describe(), (f"inherited from {inherited}" if inherited
                                     else f"{res.layer} {res.key} from {period.since()}")
        if res.layer == "override" and period.peak_set:  # "peak": null: said so, with what it turned off
            lower = next((f for lo in below if (f := self._period_in_force(lo, when)) is not None), None)
            if lower is not None and lower[1].peak is not None:
                return None, (f'none: the override sets "peak": null ({lower[0]} has '
                              f"{lower[1].peak.describe()})")
        return None, None

    def override_rules(self, at: datetime | str | None = None) -> list[str]:
        """One line per override entry whose calls now have a time rule, or had one beneath and turned it
        off with `"peak": null`: what `rag serve` says at start-up, so a correction that changes a rule
        never does it silently."""
        when = self.when(at)
        lines = []
        for key, entry in self.overrides.items():
            period = entry.period_at(when)
            if period is None or not period.tiers:
                continue
            layers = self.resolve_layers(key)
            res = next((r for r in layers if r.layer == "override" and r.key == key), None)
            if res is None:
                continue
            rule, source = self._rule_json(res, period, when, _below(layers, res))
            line = _override_rule_line(f"price override {key}" + (f" (from {period.since()})" if period.effective_from
                                                                   else ""), rule, source)
            if line:
                lines.append(line)
        return lines

    def _moment(self, model: str, res: Resolved | None, when: datetime) -> dict:
        """Whether `when` is peak for this model (false when it has no time rule), the rule applied and
        any warning (a holiday calendar that does not cover `when`'s year), as a call then would record."""
        q = self.quote(model, 1, 0, provider=res.provider.id if res and res.provider else None, at=when)
        return {"peak": q.rule == "peak", "rule_applied": q.applied, "basis": q.basis, "warning": q.warning}


def _below(layers: list[Resolved], res: Resolved) -> tuple[Resolved, ...]:
    """The layers under `res` (what an override can inherit a time rule from)."""
    return tuple(layers[layers.index(res) + 1:]) if res in layers else ()


def _override_rule_line(what: str, rule: str | None, source: str | None) -> str | None:
    """What `rag serve` says of one override's time rule: its own, one it inherits, or one it turns off
    (None: no rule anywhere, nothing to say)."""
    if rule is not None and source and source.startswith("inherited"):
        return (f"{what}: time rule {rule}, {source} (its figures are the "
                'off-peak ones; "peak": null in the entry turns the rule off)')
    if rule is not None:
        return f"{what}: time rule {rule}, as the entry says"
    if source:
        return (f"{what}: no time rule, {source.removeprefix('none: ')}; every "
                "call is priced at the override's figures, peak hours too")
    return None


def _retired_json(e: PriceEntry) -> str | None:
    return (e.retired_label or _iso(e.retired_at)) if e.retired_at else None


def _in_force_json(current: PricePeriod | None, retired: bool) -> dict:
    """The period in force as `rag prices --json` shows it: what it is billed as, why it is unpriced, its tiers
    (none once retired)."""
    return {"billed_as": current.billed_as if current else None,
            "unpriced_reason": current.unpriced if current else None,
            "tiers": [] if retired or current is None else [_tier_json(t) for t in current.tiers]}


def _history_json(r: Resolved, p: PricePeriod) -> dict:
    """One dated price of one layer, for the history of `rag prices --json`."""
    return {"layer": r.layer, "key": r.key, "effective_from": p.since(), "tiers": [_tier_json(t) for t in p.tiers],
            "rule": p.peak.describe() if p.peak else None, "billed_as": p.billed_as,
            "unpriced": p.unpriced, "note": p.note, **({"rule_set": p.peak_set} if r.layer == "override" else {})}


def _tier_json(t: ModelPrice) -> dict:
    return {"max_input_tokens": t.max_input_tokens, "input_per_mtok": str(t.input_per_mtok),
            "cache_read_per_mtok": _s(t.cached_input_per_mtok), "cache_write_per_mtok": _s(t.cache_write_per_mtok),
            "explicit_cache_read_per_mtok": _s(t.explicit_cache_read_per_mtok), "output_per_mtok": str(t.output_per_mtok)}


def genai_in_force(model_info, when: datetime) -> tuple[str | None, str | None]:
    """Which of genai-prices' conditional prices applies at `when`: its start date (when it has one)
    and its time-of-day window (when it is one). genai-prices does not date its base prices."""
    prices = model_info.prices
    if not isinstance(prices, list):
        return None, None
    since = rule = None
    for cp in prices:
        c = cp.constraint
        if c is None or not c.active(when):
            continue
        if hasattr(c, "start_date"):
            since = c.start_date.isoformat()
        elif hasattr(c, "start_time"):
            rule = f"time-of-day price {c.start_time:%H:%M}-{c.end_time:%H:%M} UTC"
    return since, rule


def _s(x) -> str | None:
    if x is None:
        return None
    return str(x) if not hasattr(x, "tiers") else "tiered (see genai-prices)"


def provider_for_url(base_url: str | None) -> str | None:
    """The provider an OpenAI-compatible base URL belongs to (by host), or None."""
    if not base_url:
        return None
    from urllib.parse import urlparse

    host = (urlparse(base_url if "://" in base_url else f"https://{base_url}").hostname or "").lower()
    for p in load_bundled_table().providers.values():
        if any(host == h or host.endswith("." + h) for h in p.hosts):
            return p.id
    return None


def endpoint_of(base_url: str | None) -> str:
    """host[:port] of an OpenAI-compatible base URL, as a row records it (no scheme, path or credentials);
    no base URL is OpenAI's own API."""
    if not base_url:
        return "api.openai.com"
    from urllib.parse import urlparse

    u = urlparse(base_url if "://" in base_url else f"https://{base_url}")
    host = (u.hostname or "").lower()
    return f"{host}:{u.port}" if u.port else host


def rate_quote(tokens: int, per_1k: float, label: str) -> Quote:
    """Per-1k-token rate for embedding / rerank (hosted-equivalent price of a local model)."""
    return Quote(to_nano(Decimal(tokens) * Decimal(str(per_1k)) / Decimal(1000)), f"rate:{label}={per_1k}/1k", "rate")
