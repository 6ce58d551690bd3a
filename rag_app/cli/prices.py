"""Bodies of `rag prices [MODEL]`, `rag prices check [--against litellm]` and `rag reprice`
(registered in cli.py)."""
from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from rag_app.present import keyed_labels, usd
from rag_app.core import RagError


def _ledger(settings):
    from tracing.ledger import Ledger

    if not settings.ledger.exists():
        raise RagError(f"no ledger at {settings.ledger}; run `rag ask` first or set RAG_DATA_DIR")
    return Ledger.open(settings.ledger)


def _table(settings):
    from tracing.pricing import PriceTable

    return PriceTable.load(settings.price_overrides, base_url=settings.openai_base_url)


def _at(at: str | None, flag: str = "--at") -> str | None:
    """A UTC date/time as the ledger and the price table compare them (`rag prices --at`, `rag reprice --since`)."""
    if at is None:
        return None
    from tracing.pricing import as_utc

    try:
        as_utc(at)
    except ValueError as e:
        raise RagError(f"{flag} {at!r} is not a date/time ({e}); use e.g. 2026-08-23 or 2026-08-23T03:00:00Z") from e
    return at


def _tiers_table(tiers: list[dict], currency: str) -> Table:
    t = Table(title=f"{currency} per million tokens", pad_edge=False)
    for col in ("prompt up to", "input", "cache read", "explicit read", "cache write", "output"):
        t.add_column(col, justify="right")
    for tier in tiers:
        t.add_row("any" if tier["max_input_tokens"] is None else f"{tier['max_input_tokens']:,}", tier["input_per_mtok"],
                  tier["cache_read_per_mtok"] or "= input", tier.get("explicit_cache_read_per_mtok") or "-",
                  tier["cache_write_per_mtok"] or "= input", tier["output_per_mtok"])
    return t


def _short(tiers: list[dict]) -> str:
    if not tiers:
        return ""
    t = tiers[0]
    more = f" (+{len(tiers) - 1} longer-prompt tiers)" if len(tiers) > 1 else ""
    return f"{t['input_per_mtok']} in / {t['cache_read_per_mtok'] or '= input'} cached / {t['output_per_mtok']} out{more}"


def show_prices(settings, model: str | None, out: Console, as_json: bool = False, at: str | None = None) -> int:
    """The price in force for MODEL (default RAG_LLM_MODE's model) at `at` (default now), with its
    layer, source, version, time rule and dated history."""
    table = _table(settings)
    info = table.describe(model or settings.llm_model, provider=settings.llm_provider, at=_at(at))
    code = 0 if info["source"] != "unpriced" else 1
    if as_json:
        print(json.dumps(info, ensure_ascii=False, indent=2))
        return code
    _print_entry(info, out)
    if info["source"] == "unpriced" and not info.get("history"):
        _print_no_price(info, out)
        return 1
    _print_not_its_own_price(info, out)
    if info["tiers"]:
        _print_in_force(info, out)
    _print_history(info, out)
    _print_source_notes(info, out)
    return code


def _print_entry(info: dict, out: Console) -> None:
    """Which entry of which table prices the model, and whether it is retired."""
    out.print(f"[bold]{info['model']}[/bold]: {info['source']} (table {info['version']})", highlight=False)
    if info.get("key"):
        out.print(f"entry {info['key']}" + (f" ({info['via']})" if info.get("via") else ""), markup=False)
    if info.get("retired"):
        out.print(f"retired {info['retired']}: calls made after that are unpriced", markup=False)


def _print_no_price(info: dict, out: Console) -> None:
    out.print("no price: its rows are recorded as unpriced. Add it to a RAG_PRICE_OVERRIDES file "
              '({"version": "...", "models": {"NAME": {"input_per_mtok": "0.1", "output_per_mtok": "0.4"}}})',
              markup=False)
    if info.get("note"):
        out.print(f"note: {info['note']}", markup=False)


def _print_not_its_own_price(info: dict, out: Console) -> None:
    """Why it has no confirmed price, or the model it is billed as."""
    if info.get("unpriced_reason"):
        out.print(f"no confirmed price: {info['unpriced_reason']}", markup=False)
    if info.get("billed_as"):
        out.print(f"at {info['at']} billed as {info['billed_as']}: see `rag prices {info['billed_as']}`", markup=False)


def _print_source_notes(info: dict, out: Console) -> None:
    for key in ("url", "checked", "note"):
        if info.get(key):
            out.print(f"{key}: {info[key]}", markup=False)
    if info.get("warning"):
        out.print(f"warning: {info['warning']}", markup=False, overflow="fold")


def _print_in_force(info: dict, out: Console) -> None:
    """The tiers in force at the asked time, and the time rule that chose them."""
    since = f" (in force from {info['effective_from']})" if info.get("effective_from") else ""
    out.print(f"at {info['at']}{since}:", markup=False)
    if info.get("rule_applied"):
        out.print(f"{'peak' if info.get('peak') else 'not peak'} then: {info.get('basis') or info['rule_applied']}",
                  markup=False, overflow="fold")
    out.print(_tiers_table(info["tiers"], info.get("currency", "USD")))
    source = info.get("rule_source")
    if info.get("rule"):
        out.print(f"time rule: {info['rule']}; the figures above are the off-peak ones"
                  + (f" ({source})" if source and source.startswith("inherited") else ""), markup=False,
                  overflow="fold")
    elif source:  # an override that turned the rule beneath it off ("peak": null)
        out.print(f"time rule: {source}", markup=False, overflow="fold")


def _print_history(info: dict, out: Console) -> None:
    """The dated prices, when there is more to them than the one in force."""
    history = info.get("history") or []
    if not (len(history) > 1 or (history and not info["tiers"])):
        return
    out.print("dated prices:")
    layered = len({h.get("layer") for h in history}) > 1
    for p in history:
        out.print(_dated_line(p, layered), markup=False, overflow="fold")


def _dated_line(p: dict, layered: bool) -> str:
    what = (f"billed as {p['billed_as']}" if p["billed_as"] else
            f"unpriced ({p['unpriced'][:60]}...)" if p["unpriced"] else _short(p["tiers"]))
    rule = f"; {p['rule']}" if p["rule"] else ""
    layer = f"{p['layer']} " if layered else ""
    return f"  {layer}from {p['effective_from']}: {what}{rule}"


def check_prices(settings, out: Console) -> int:
    """`rag prices check`: ledger models today's table cannot price (exit 1 if any)."""
    table = _table(settings)
    with _ledger(settings) as ledger:
        missing = ledger.unpriced_models(table)
        stale = ledger.unpriced_rows_now()
        warned = ledger.price_warnings()
    if not missing:
        out.print(f"every model in the ledger has a price in {table.version}")
    else:
        def build(labels: dict) -> Table:
            t = Table(title=f"unpriced under {table.version}", pad_edge=False, collapse_padding=True)
            for col in ("model", "provider", "rows", "unpriced rows", "tokens", "last seen (UTC)"):
                t.add_column(col, no_wrap=True, justify="right" if col in ("rows", "unpriced rows", "tokens") else "left")
            for m in missing:
                t.add_row(labels[m["model"]], labels.get(m["provider"], m["provider"] or "-"), f"{m['rows']:,}",
                          f"{m['unpriced_rows']:,}", f"{m['tokens']:,}", (m["last_seen"] or "")[:16].replace("T", " "))
            return t
        t, legend = keyed_labels((m["model"] for m in missing), build, "M")
        out.print(t)
        for line in legend:
            out.print(line)
        for m in missing:
            if m.get("why"):
                out.print(f"{m['model']}: {m['why']}", markup=False, overflow="fold")
        out.print("add these to a RAG_PRICE_OVERRIDES file, then `rag reprice` to price their history")
    priceable = stale - sum(m["unpriced_rows"] for m in missing)
    if priceable > 0:
        out.print(f"{priceable} rows recorded as unpriced can be priced now: run `rag reprice`")
    _warned_rows(table, warned, out)
    return 1 if missing else 0


def _warned_rows(table, warned: list[dict], out: Console) -> None:
    """Rows whose price carried a warning, and whether today's table still has it at their time."""
    for w in warned:
        what = f"answer-cache hits of {w['model'] or 'an unrecorded model'}" if w.get("hits") else f"{w['model']} rows"
        now = ""
        if w["model"]:
            q = table.quote(w["model"], 1000, 100, provider=w["provider"], at=w["last_seen"])
            now = "; " + (("today's table still warns: " + q.warning) if q.warning
                          else "today's table no longer warns: run `rag reprice`")
        out.print(f"warning on {w['rows']} {what} ({(w['first_seen'] or '')[:10]} to "
                  f"{(w['last_seen'] or '')[:10]}): {w['warning']}{now}", markup=False, overflow="fold")


def check_against(settings, against: str, out: Console, as_json: bool = False, at: str | None = None) -> int:
    """`rag prices check --against litellm`: every model where LiteLLM's bundled map and our table
    differ by more than 1% (exit 1 if any; exit 2 when LiteLLM is not installed)."""
    from tracing.pricing import INSTALL_HINT, compare, litellm_cost_map

    if against != "litellm":
        raise RagError(f"--against {against!r}: the only second opinion is `litellm`")
    cost_map = litellm_cost_map()
    if cost_map is None:
        out.print(INSTALL_HINT, markup=False, soft_wrap=True)
        return 2
    table = _table(settings)
    diffs, compared, skipped = compare(table, cost_map, at=_at(at))
    if as_json:
        print(json.dumps({"version": table.version, "compared": compared,
                          "differences": [d.__dict__ for d in diffs],
                          "not_compared": [{"model": k, "why": why} for k, why in skipped]},
                         ensure_ascii=False, indent=2))
        return 1 if diffs else 0
    not_compared = (f"not compared ({len(skipped)}): " + "; ".join(f"{k} ({why})" for k, why in skipped)
                    if skipped else "")
    if not diffs:
        out.print(f"{compared} LiteLLM chat models compared: all within 1% of {table.version}")
        if not_compared:
            out.print(not_compared, markup=False, soft_wrap=True)
        return 0
    def build(labels: dict) -> Table:
        t = Table(title=f"{len({d.model for d in diffs})} of {compared} models differ by more than 1% ($/M tokens)",
                  pad_edge=False, collapse_padding=True)
        t.add_column("model (LiteLLM key)", no_wrap=True)
        t.add_column("field", no_wrap=True)
        t.add_column("ours", justify="right", no_wrap=True)
        t.add_column("LiteLLM", justify="right", no_wrap=True)
        t.add_column("note", overflow="fold", max_width=22)
        for d in diffs:
            t.add_row(labels[d.model], d.field, d.ours, d.theirs, d.note)
        return t
    t, legend = keyed_labels((d.model for d in diffs), build, "M")
    out.print(t)
    for line in legend:
        out.print(line)
    if not_compared:
        out.print(not_compared, markup=False, soft_wrap=True)
    out.print(f"ours: {table.version}; a stale entry of ours goes in a RAG_PRICE_OVERRIDES file until the bundled "
              "table is updated", markup=False)
    return 1


def run_reprice(settings, since: str | None, model: str | None, out: Console,
                assume_provider: str | None = None) -> None:
    from tracing.pricing import reprice

    since = _at(since, "--since")  # a bad date matched no row and exited 0 having repriced nothing
    table = _table(settings)  # its endpoint (this shell's OPENAI_BASE_URL) is not used: rows say where they went
    with _ledger(settings) as ledger:
        r = reprice(ledger, table, since=since, model=model, assume_provider=assume_provider)
    out.print(f"re-priced {r.rows - r.left} of {r.rows} rows under {r.version}, each by the price in force when it "
              f"was made, where it was sent: {r.changed} changed, {r.unchanged} unchanged, {r.left} left as recorded; "
              f"{usd(r.old_nano / 1e9)} -> {usd(r.new_nano / 1e9)} (priced part); "
              f"unpriced rows {r.unpriced_before} -> {r.unpriced_after}", markup=False)
    for reason, n in sorted(r.reasons.items()):
        out.print(f"  {n} {reason}", markup=False)
    h = r.savings
    if h is not None and h.hits:
        out.print(f"re-priced the savings of {h.hits - h.left} of {h.hits} answer-cache hits, each as a live call at "
                  f"the hit's time: {h.changed} changed; {usd(h.old_nano / 1e9)} -> {usd(h.new_nano / 1e9)} saved"
                  + (f"; {h.unknown_after} unknown now (unpriced)" if h.unknown_after else "")
                  + (f"; {h.left} left as recorded (their answer's calls are not in the ledger)" if h.left else ""),
                  markup=False)
    out.print("original figures are kept; `rag report --prices repriced` shows the new ones")
