"""When a call was made, in the provider's own clock: instants, peak windows and holiday calendars.

A price can depend on the moment of the call. DeepSeek's current models, for example, bill twice
the off-peak price in peak hours: Beijing time Monday to Friday 09:00-12:00 and 14:00-18:00, with
Chinese public holidays off-peak all day. `PeakRule.evaluate` answers "peak or off-peak?" for one
instant, in the rule's timezone, and says why, so a quote can show its reasoning.

Holiday calendars are dated data (`holidays_cn.json`), each year with the official notice it came
from. A year whose notice is not in the calendar cannot be decided: the rule then answers peak
(the upper bound) and says the calendar is missing, rather than guessing a lunar date.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from importlib import resources
from zoneinfo import ZoneInfo

WEEKDAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
DAY_SETS = {"mon-fri": frozenset(range(5)), "daily": frozenset(range(7))}


def as_utc(at: datetime | str) -> datetime:
    """An aware UTC datetime from a datetime or ISO-8601 text; naive values are UTC (the ledger's
    started_at is UTC ISO-8601, with or without an offset)."""
    if isinstance(at, str):
        text = at.strip()
        if not text:
            raise ValueError("empty timestamp")
        if len(text) == 10:  # a bare date: its start, UTC
            text += "T00:00:00"
        at = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    if at.tzinfo is None:
        return at.replace(tzinfo=timezone.utc)
    return at.astimezone(timezone.utc)


def parse_instant(text: str, tz: str) -> datetime:
    """An effective-from value: `2026-08-23` is that day's midnight in the provider's timezone;
    a full timestamp keeps its own offset (or is UTC when it has none)."""
    text = str(text).strip()
    if len(text) == 10:
        return datetime.combine(date.fromisoformat(text), time(0), ZoneInfo(tz)).astimezone(timezone.utc)
    return as_utc(text)


def _expand(days: list[str]) -> set[date]:
    """`2026-02-15..2026-02-23` ranges and single dates -> the set of dates."""
    out: set[date] = set()
    for item in days:
        if ".." in item:
            start, end = (date.fromisoformat(x) for x in item.split(".."))
            if end < start:
                raise ValueError(f"holiday range {item!r} ends before it starts")
            out.update(start + timedelta(n) for n in range((end - start).days + 1))
        else:
            out.add(date.fromisoformat(item))
    return out


@dataclass(frozen=True)
class HolidayCalendar:
    """Public holidays (days off) by year; a year absent from `years` is unknown, not holiday-free."""
    name: str
    days_off: frozenset[date]
    years: frozenset[int]
    sources: dict = field(default_factory=dict, compare=False)  # year -> where its dates came from

    def status(self, day: date) -> str:
        """holiday | workday-calendar | unknown-year"""
        if day.year not in self.years:
            return "unknown-year"
        return "holiday" if day in self.days_off else "workday-calendar"

    def with_years(self, years: dict) -> "HolidayCalendar":
        """This calendar plus years given elsewhere (an override file), which replace same years."""
        extra = {int(y): _year_days(v) for y, v in years.items()}
        kept = {d for d in self.days_off if d.year not in extra}
        for days in extra.values():
            kept |= days
        sources = {**self.sources, **{int(y): (v.get("source", "override file") if isinstance(v, dict) else "override file")
                                      for y, v in years.items()}}
        return HolidayCalendar(self.name, frozenset(kept), self.years | frozenset(extra), sources)


def _year_days(value) -> set[date]:
    days = value.get("days_off", []) if isinstance(value, dict) else value
    if not isinstance(days, list):
        raise ValueError("a holiday year needs a list of dates or date ranges (days_off)")
    return _expand(days)


def load_calendar(data: dict) -> HolidayCalendar:
    """A calendar from its JSON form: years with `days_off` (a year without `days_off` is listed
    only to say its notice is not published yet, and stays unknown)."""
    days: set[date] = set()
    years: set[int] = set()
    sources = {}
    for year, info in data["years"].items():
        if info.get("days_off") is None:
            continue
        got = _year_days(info)
        if any(d.year != int(year) for d in got):
            raise ValueError(f"holiday calendar {data['calendar']}: a date outside {year} is listed under {year}")
        days |= got
        years.add(int(year))
        sources[int(year)] = info.get("source", "")
    return HolidayCalendar(data["calendar"], frozenset(days), frozenset(years), sources)


def bundled_calendars() -> dict[str, HolidayCalendar]:
    data = json.loads(resources.files("tracing.pricing").joinpath("holidays_cn.json").read_text(encoding="utf-8"))
    return {data["calendar"]: load_calendar(data)}


def _window(text: str) -> tuple[time, time]:
    start, end = (time.fromisoformat(x.strip()) for x in text.split("-"))
    if end <= start:
        raise ValueError(f"peak window {text!r} must end after it starts (same day)")
    return start, end


@dataclass(frozen=True)
class RuleResult:
    peak: bool
    why: str  # e.g. "off-peak: Sat 10:30 Asia/Shanghai (weekend)"
    warning: str | None = None
    kind: str = ""  # what a row records: peak | off-peak | holiday

    def __post_init__(self):
        if not self.kind:
            object.__setattr__(self, "kind", "peak" if self.peak else "off-peak")


@dataclass(frozen=True)
class PeakRule:
    """Prices times `multiplier` inside the windows on the given weekdays, in `tz`; holidays of
    `calendar` (when set) are off-peak all day."""
    tz: str
    windows: tuple[tuple[time, time], ...]
    days: frozenset[int] = DAY_SETS["mon-fri"]
    calendar: str | None = None
    multiplier: str = "2"

    @classmethod
    def from_json(cls, p: dict, default_tz: str) -> "PeakRule":
        days = p.get("days", "mon-fri")
        if days not in DAY_SETS:
            raise ValueError(f"peak days must be one of {sorted(DAY_SETS)}, not {days!r}")
        rule = cls(p.get("timezone") or default_tz, tuple(_window(w) for w in p["windows"]), DAY_SETS[days],
                   p.get("holidays"), str(p.get("multiplier", "2")))
        ZoneInfo(rule.tz)  # an unknown timezone fails here, at load time
        return rule

    def describe(self) -> str:
        days = "daily" if self.days == DAY_SETS["daily"] else "Mon-Fri"
        wins = ", ".join(f"{a:%H:%M}-{b:%H:%M}" for a, b in self.windows)
        hol = f", {self.calendar} public holidays off-peak" if self.calendar else ""
        return f"x{self.multiplier} {days} {wins} {self.tz}{hol}"

    def evaluate(self, at: datetime, calendars: dict[str, HolidayCalendar]) -> RuleResult:
        local = as_utc(at).astimezone(ZoneInfo(self.tz))
        stamp = f"{WEEKDAY_NAMES[local.weekday()]} {local:%Y-%m-%d %H:%M} {self.tz}"
        in_window = any(a <= local.time() < b for a, b in self.windows)
        if not in_window:
            return RuleResult(False, f"off-peak: {stamp} (outside peak hours)")
        if local.weekday() not in self.days:
            return RuleResult(False, f"off-peak: {stamp} (weekend)")
        if self.calendar:
            cal = calendars.get(self.calendar)
            status = cal.status(local.date()) if cal else "unknown-year"
            if status == "holiday":
                return RuleResult(False, f"off-peak: {stamp} ({self.calendar} public holiday)", kind="holiday")
            if status == "unknown-year":
                return RuleResult(True, f"peak: {stamp}",
                                  f"no {self.calendar} holiday calendar for {local.year}: priced at peak (upper bound); "
                                  "add the year to a RAG_PRICE_OVERRIDES file")
        return RuleResult(True, f"peak: {stamp}")
