"""`rag report`, `rag budgets`, `rag prices` and `rag reprice`: what was spent, against what limits, at which prices."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from rag_app.cli.args import export_format, output_path
from rag_app.cli.common import err, fail, fail_one_line, out
from rag_app.core import RagError

TABLE_ROWS = 20  # `rag report` without --last: totals over everything, the latest rows only


def report_cmd(last: Optional[int] = typer.Option(None, help="only the N most recent queries"),
               fmt: Optional[str] = typer.Option(None, "--format",
                                                 help="table | csv | json (default: from --out's extension, else table)"),
               variant: Optional[str] = typer.Option(None, help="only this variant"),
               output: Optional[Path] = typer.Option(None, "--out", help="write to a file instead of stdout"),
               prices: str = typer.Option("original", help="original (as recorded) | repriced (latest `rag reprice`)"),
               by: Optional[str] = typer.Option(None, "--by", help="spend per user | key | variant | model | day | stage"),
               rebuild_totals: bool = typer.Option(False, "--rebuild-totals",
                                                   help="recompute the report totals from the ledger rows first")):
    """Per-query cost rows and totals: tokens and $ per stage, p50/p95, retry waste, cache hit rate."""
    from rag_app.config import load_settings
    from rag_app.present import write_by, write_report
    from tracing.ledger import BY_DIMS, Ledger

    try:
        form = export_format(fmt, output)
        output_path("--out", output)  # else a missing folder is reported as the ledger unreachable
    except RagError as e:
        fail(e)
    if prices not in ("original", "repriced"):
        fail(ValueError(f"--prices must be original or repriced, not {prices!r}"))
    if last is not None and last < 1:
        fail(ValueError(f"--last must be at least 1, not {last}"))
    if by is not None and by not in BY_DIMS:
        fail(ValueError(f"--by must be one of {', '.join(BY_DIMS)}, not {by!r}"))
    if by is not None and prices != "original":
        fail(ValueError("--by reports recorded prices only; drop --prices repriced"))
    settings = load_settings()
    currency = _report_currency(settings)
    try:
        ledger = Ledger.readable(settings.ledger)
    except RagError as e:
        fail(e)
    with ledger:
        if ledger.pending:  # read-only ledger: no migration, say so
            err.print(f"note: ledger is read-only and has migrations pending ({', '.join(ledger.pending)}); "
                      "reporting what it holds")
        try:
            if rebuild_totals:
                if ledger.pending:
                    raise RagError("migrations pending on a read-only ledger")
                n = ledger.rebuild_totals()
                err.print(f"report totals rebuilt from the rows ({n:,} queries)")
            stream = output.open("w", encoding="utf-8", newline="") if output else sys.stdout
            try:
                if by:
                    write_by(ledger, by, form, stream, out, variant=variant, currency=currency)
                else:
                    write_report(ledger, form, stream, out, last=last, variant=variant, prices=prices,
                                 table_rows=TABLE_ROWS, currency=currency)
            finally:
                if output:
                    stream.close()
        except RagError as e:
            fail(e)
        except Exception as e:  # the ledger went away mid-report: one line, never a traceback
            from tracing.ledger import is_transient

            if not is_transient(e):
                raise
            fail(RagError(f"ledger {settings.ledger} unreachable ({type(e).__name__}); try again shortly"))
    if output:
        err.print(f"wrote {output}")


def budgets_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON"),
                digest: bool = typer.Option(False, "--digest", help="send each budget's daily spend digest to "
                                            "RAG_ALERT_WEBHOOK (once a UTC day; run it from cron)")):
    """Each budget of RAG_BUDGETS_FILE: its limit, spend this period (priced; unpriced calls counted
    apart, never as $0), and time to reset, per key, user or variant, from the ledger every replica writes."""
    from rag_app.config import load_settings
    from rag_app.spend import Limits, budget_status, load_budgets, render_status
    from tracing.ledger import Ledger
    from tracing.pricing import PriceTable

    settings = load_settings()
    if settings.budgets_file is None:
        fail_one_line(RagError("RAG_BUDGETS_FILE is not set; point it at a budgets file (docs/spend-control.md)"))
    if digest and not settings.alert_webhook:
        fail_one_line(RagError("--digest sends to RAG_ALERT_WEBHOOK, which is not set; set it to an http(s) URL"))
    try:
        budgets = load_budgets(settings.budgets_file)
        limits = Limits(PriceTable.load(settings.price_overrides).fx)
        limits.check(budgets, settings.budgets_file)
        if digest:
            with Ledger.open(settings.ledger) as ledger:
                _send_digests(settings, ledger, budgets, limits)
            return
        with Ledger.readable(settings.ledger) as ledger:
            rows = budget_status(ledger, budgets, limits)
    except RagError as e:
        fail_one_line(e)
    if as_json:
        print(json.dumps({"budgets": rows, "unpriced_policy": settings.budget_unpriced}, ensure_ascii=False, indent=2))
    else:
        print(render_status(rows))


def _send_digests(settings, ledger, budgets, limits) -> None:
    """`rag budgets --digest`: one line per budget; exit 1 when a digest was not delivered."""
    from datetime import UTC, datetime

    from rag_app.spend import renderer, send_digests
    from rag_app.spend import Webhook

    outcome: dict[int, str] = {}

    def mark(event_id: int, status: str) -> None:
        outcome[event_id] = status
        ledger.set_budget_webhook(event_id, status)

    assert settings.alert_webhook is not None  # checked before
    hook = Webhook(settings.alert_webhook, mark, deadline_s=settings.alert_webhook_deadline_s,
                   render=renderer(settings.alert_format))
    queued = send_digests(ledger, budgets, limits, hook, datetime.now(UTC))
    hook.wait()
    hook.close()
    for b, event_id in queued:
        print(f"digest {b.label}: " + ("already sent today" if event_id is None else "sent"
                                       if outcome.get(event_id) == "sent" else
                                       "NOT delivered (the next run today sends it again)"))
    if hook.failed:
        raise typer.Exit(1)


def _report_currency(settings):
    """RAG_REPORT_CURRENCY: USD (the ledger's) or CNY at the price table's latest dated rate."""
    from tracing.pricing import display_currency
    from tracing.pricing import PriceTable

    try:
        return display_currency(settings.report_currency, PriceTable.load(settings.price_overrides).fx)
    except (ValueError, RagError) as e:
        fail(e)


def prices_cmd(model: Optional[str] = typer.Argument(None, help="a model name (default RAG_LLM_MODEL), or `check`"),
               as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
               at: Optional[str] = typer.Option(None, "--at", help="the price in force at this UTC time (default now)"),
               against: Optional[str] = typer.Option(None, "--against",
                                                     help="`check --against litellm`: compare with LiteLLM's map")):
    """The price in force for a model (source, version, dated history); `rag prices check` lists
    unpriced ledger models; `rag prices check --against litellm` lists where LiteLLM's map differs by >1%."""
    from rag_app.config import load_settings
    from rag_app.cli.prices import check_against, check_prices, show_prices

    try:
        settings = load_settings()
        if against is not None:
            if model != "check":
                raise RagError("--against goes with `rag prices check --against litellm`")
            code = check_against(settings, against, out, as_json, at)
        elif model == "check":
            code = check_prices(settings, out)
        else:
            code = show_prices(settings, model, out, as_json, at)
    except RagError as e:
        fail(e)
    raise typer.Exit(code)


def reprice_cmd(since: Optional[str] = typer.Option(None, help="only rows started at or after this UTC date/time"),
                model: Optional[str] = typer.Option(None, help="only this model"),
                assume_provider: Optional[str] = typer.Option(
                    None, "--assume-provider",
                    help="price rows that record no endpoint (older ledgers) as sent to this provider "
                         "(e.g. deepseek, alibaba-cn; auto: the model name's usual provider)")):
    """Recompute stored rows' dollars at today's prices, each where it was sent; originals are kept.

    A row is priced at the provider it recorded, never at this shell's OPENAI_BASE_URL."""
    from rag_app.config import load_settings
    from rag_app.cli.prices import run_reprice

    try:
        run_reprice(load_settings(), since, model, out, assume_provider)
    except RagError as e:
        fail(e)
