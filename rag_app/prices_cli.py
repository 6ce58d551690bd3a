"""Bodies of `rag prices [MODEL]`, `rag prices check` and `rag reprice` (registered in cli.py)."""
from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from rag_app.cost_render import usd
from rag_app.errors import RagError


def _ledger(settings):
    from tracing.ledger import connect

    if not settings.ledger.exists():
        raise RagError(f"no ledger at {settings.ledger}; run `rag ask` first or set RAG_DATA_DIR")
    return connect(settings.ledger)


def show_prices(settings, model: str | None, out: Console, as_json: bool = False) -> int:
    """The price in force for MODEL (default RAG_LLM_MODE's model), with its layer, source and version."""
    from tracing.pricing import PriceTable

    table = PriceTable.load(settings.price_overrides)
    info = table.describe(model or settings.llm_model, provider=settings.llm_provider)
    if as_json:
        print(json.dumps(info, ensure_ascii=False, indent=2))
        return 0 if info["source"] != "unpriced" else 1
    out.print(f"[bold]{info['model']}[/bold]: {info['source']} (table {info['version']})")
    if info["source"] == "unpriced":
        out.print("no price: its rows are recorded as unpriced. Add it to a RAG_PRICE_OVERRIDES file "
                  '({"version": "...", "models": {"NAME": {"input_per_mtok": "0.1", "output_per_mtok": "0.4"}}})')
        return 1
    t = Table(title="USD per million tokens", pad_edge=False)
    for col in ("prompt up to", "input", "cache read", "cache write", "output"):
        t.add_column(col, justify="right")
    for tier in info["tiers"]:
        t.add_row("any" if tier["max_input_tokens"] is None else f"{tier['max_input_tokens']:,}", tier["input_per_mtok"],
                  tier["cache_read_per_mtok"] or "= input", tier["cache_write_per_mtok"] or "= input",
                  tier["output_per_mtok"])
    out.print(t)
    for key in ("url", "checked", "note"):
        if info.get(key):
            out.print(f"{key}: {info[key]}", markup=False)
    return 0


def check_prices(settings, out: Console) -> int:
    """`rag prices check`: ledger models today's table cannot price (exit 1 if any)."""
    from tracing.pricing import PriceTable
    from tracing.reprice import unpriced_models

    table = PriceTable.load(settings.price_overrides)
    conn = _ledger(settings)
    try:
        missing = unpriced_models(conn, table)
        stale = conn.execute("SELECT COUNT(*) FROM stage_calls_repriced WHERE price_source = 'unpriced'").fetchone()[0]
    finally:
        conn.close()
    if not missing:
        out.print(f"every model in the ledger has a price in {table.version}")
    else:
        t = Table(title=f"unpriced under {table.version}", pad_edge=False)
        for col in ("model", "provider", "rows", "unpriced rows", "tokens", "last seen"):
            t.add_column(col, overflow="fold")
        for m in missing:
            t.add_row(m["model"], m["provider"] or "-", str(m["rows"]), str(m["unpriced_rows"]), str(m["tokens"]),
                      (m["last_seen"] or "")[:19])
        out.print(t)
        out.print("add these to a RAG_PRICE_OVERRIDES file, then `rag reprice` to price their history")
    priceable = stale - sum(m["unpriced_rows"] for m in missing)
    if priceable > 0:
        out.print(f"{priceable} rows recorded as unpriced can be priced now: run `rag reprice`")
    return 1 if missing else 0


def run_reprice(settings, since: str | None, model: str | None, out: Console) -> None:
    from tracing.pricing import PriceTable
    from tracing.reprice import reprice

    table = PriceTable.load(settings.price_overrides)
    conn = _ledger(settings)
    try:
        r = reprice(conn, table, since=since, model=model)
    finally:
        conn.close()
    out.print(f"re-priced {r.rows} rows under {r.version}: {r.changed} changed; "
              f"{usd(r.old_nano / 1e9)} -> {usd(r.new_nano / 1e9)} (priced part); "
              f"unpriced rows {r.unpriced_before} -> {r.unpriced_after}")
    out.print("original figures are kept; `rag report --prices repriced` shows the new ones")
