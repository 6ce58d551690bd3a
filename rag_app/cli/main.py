"""`rag` command line: ingest, ask, report, demo. Thin: parse flags, call RagApp, render."""
from __future__ import annotations

import csv
import json
import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup

from rag_app.cli.args import at_least_one, export_format, output_path, positive_ints
from rag_app.core.errors import RagError


class _RagGroup(TyperGroup):
    """Notes whether the command line asks for a help screen before the callback below runs (click runs a
    group's callback before it parses the subcommand's arguments, where --help is seen)."""

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        before_dashes = rest[:rest.index("--")] if "--" in rest else rest
        ctx.meta["rag_help_asked"] = any(a in ctx.help_option_names for a in before_dashes)
        return name, cmd, rest


# `rag`, `rag --help` and `rag -h` are answered by rag_app/cli/entry.py from rag_app/data/cli_help.txt
# without importing this module: after changing a command or a help string, run `make cli-help`.
app = typer.Typer(help="Legal-document RAG that records what every answer costs.", no_args_is_help=True,
                  pretty_exceptions_enable=False, cls=_RagGroup,
                  context_settings={"help_option_names": ["-h", "--help"]})
out = Console()
err = Console(stderr=True)


def _setup() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s", stream=sys.stderr)
    for noisy in ("httpx", "jieba", "sentence_transformers", "FlagEmbedding", "unstructured"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


def _app(**overrides):
    from rag_app.app import RagApp
    from rag_app.config.settings import check_data_dir, load_settings

    settings = load_settings(**overrides)
    check_data_dir(settings.data_dir)
    return RagApp(settings)


def _fail(e: Exception) -> None:
    err.print(f"[red]error:[/red] {e}", soft_wrap=True)  # one line, however narrow the terminal
    raise typer.Exit(2)


@app.callback()
def main(ctx: typer.Context) -> None:
    """Every command starts here: settings are validated once, before any work (one line, exit 2)."""
    if ctx.meta.get("rag_help_asked"):  # a help screen does no work: no settings, no pydantic (issue 20)
        return
    _setup()
    from rag_app.config.settings import load_settings

    try:
        load_settings()
    except RagError as e:
        _fail_one_line(e)


@app.command()
def ingest(paths: list[Path] = typer.Argument(..., help="files or folders (PDF, DOCX, HTML, Markdown, text)"),
           rebuild: bool = typer.Option(False, help="drop the collection first and rebuild it"),
           collection: Optional[str] = typer.Option(None, help="Qdrant collection (default RAG_COLLECTION)"),
           doc_type: list[str] = typer.Option([], "--doc-type", help="statute | contract | other for every file, "
                                              "or GLOB=TYPE for the files it matches; repeat (the last match wins)")):
    """Parse, chunk, embed and index documents; prints one outcome per file (with its document type)."""
    from rag_app.chunking.doctype import parse_override

    try:
        overrides = tuple(parse_override(d) for d in doc_type)
    except ValueError as e:
        _fail(e)
    try:
        with _app(**({"collection": collection} if collection else {})) as rag:
            report = _ingest_with_progress(rag, paths, rebuild, overrides)
    except RagError as e:
        _fail(e)
    if not any(o.status in ("written", "unchanged") for o in report.outcomes):
        err.print(f"error: nothing ingestible in {', '.join(str(p) for p in paths)}: no file was written or "
                  "found unchanged (see the lines above); pass PDF, DOCX, HTML, Markdown or text files")
        raise typer.Exit(1)
    if report.errors:
        raise typer.Exit(1)


@contextmanager
def _progress_bars(labels: dict[str, str] | None = None):
    """A rich progress display; yields the (phase, done, total) callback the domain code accepts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err) as bar:
        tasks: dict[str, Any] = {}  # phase -> rich's TaskID

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task((labels or {}).get(phase, phase), total=total)
            bar.update(tasks[phase], completed=done)

        yield progress


def _asked(rag, answer) -> dict:
    """The answer and what it cost, from the usages it carries (the same values its ledger rows hold)."""
    from rag_app.present.presenter import answer_payload

    if rag.writer.failing:  # the rows wait in memory / a spill file; the figures shown are still exact
        err.print(f"warning: ledger not writable ({rag.writer.failing}); rows kept in memory / spill file")
    return answer_payload(answer)


def _ingest_with_progress(rag, paths, rebuild, doc_types=()):
    with _progress_bars({"parse": "parse + chunk", "index": "embed + index",
                         "rescore": f"rescore vectors ({rag.settings.rescore_model})"}) as progress:
        report = rag.ingest(paths, rebuild=rebuild, progress=progress, doc_types=doc_types)
    # One line per file, never wrapped: readable, and greppable by scripts.
    for o in sorted(report.outcomes, key=lambda o: o.path):
        style = {"written": "green", "unchanged": "dim", "skipped": "yellow", "error": "red"}[o.status]
        detail = o.error if o.error else f"{o.chunks} chunks  {o.doc_type or '-':<8}  {_short(o.path)}"
        out.print(f"[{style}]{o.status:<9}[/{style}] {detail}", soft_wrap=True, highlight=False)
        if o.warning:
            out.print(f"[yellow]  warning:[/yellow] {o.warning}", soft_wrap=True, highlight=False, markup=True)
    n = {s: sum(o.status == s for o in report.outcomes) for s in ("written", "unchanged", "skipped", "error")}
    info = report.collection
    legs = "dense + bm25" if info and info.dense_enabled else "bm25 only"
    skipped = f", {n['skipped']} skipped" if n["skipped"] else ""
    out.print(f"{n['written']} written, {n['unchanged']} unchanged, {n['error']} failed{skipped}; "
              f"collection {info.name if info else '-'} ({info.embed_model if info else '-'}, {legs}); "
              f"embedding cache {report.embed.cache_hits} hits / {report.embed.cache_misses} misses", soft_wrap=True)
    if report.rescore is not None:
        r = report.rescore
        out.print(f"rescore vectors: {r.texts} chunks, {r.cache_hits} already embedded, {r.cache_misses} embedded now "
                  f"({r.tokens} tokens)", soft_wrap=True)
    return report


def _short(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


@app.command()
def ask(question: str = typer.Argument(..., help="the question"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
        variant: Optional[str] = typer.Option(None, help="variant label recorded on ledger rows"),
        doc: list[str] = typer.Option([], "--doc", help="search only this document (file name, title or id); repeat"),
        law: list[str] = typer.Option([], "--law", help="search only this law (title or short name); repeat")):
    """Answer a question with citations and a per-stage cost table."""
    from rag_app.text.edge_text import why_not_text
    from rag_app.query.scope import Scope

    for name, text in [("QUESTION", question), *(("--doc", d) for d in doc), *(("--law", x) for x in law)]:
        if why_not_text(text):  # undecodable bytes in an argument arrive as lone surrogates
            _fail(ValueError(f"{name} {why_not_text(text)}"))
    try:
        scope = Scope(tuple(doc), tuple(law))
        with _app() as rag:
            startup_ms = rag.warm_up()  # model loading, booked apart from the question's latency
            payload = _asked(rag, rag.ask(question, variant=variant, scope=scope or None))
            payload["startup_ms"] = startup_ms
    except (RagError, ValueError) as e:
        _fail(e)
    if as_json:
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    _print_answer(payload)


def _print_answer(p: dict) -> None:
    from rag_app.present.cost_render import stage_table, usd
    from rag_app.present.presenter import citation_label

    out.print(f"[bold]Q:[/bold] {p['question']}")
    out.print(p["answer"], markup=False)
    if p.get("incomplete"):
        out.print("[yellow]the model's reply stream ended without a finish reason: this answer may be cut short[/yellow]")
    out.print("[bold]citations[/bold]")
    for i, c in enumerate(p["citations"], 1):
        out.print(f"  [{i}] {citation_label({**c, 'doc': _short(c['doc'])})}", markup=False)
    q = p.get("quality")
    if q:
        grounded = "-" if q["groundedness"] is None else f"{q['groundedness']:.0%}"
        bad = q["invalid_citations"]
        out.print(f"quality: grounded {grounded}, {len(bad)} invalid citation{'s' * (len(bad) != 1)}"
                  + "".join(f" ({b['citation']}: {b['why']})" for b in bad[:3])
                  + f", retrieval confidence {q['retrieval_confidence']:.2f}", markup=False, soft_wrap=True)
    out.print(stage_table(p["stages"], title=f"cost of query {p['query_id']}"))
    def total(known, priced) -> str:  # an unknown total shows what is priced and that the rest is not
        rows = p["unpriced_rows"]
        return usd(known) if known is not None else f"{usd(priced)} + {rows} unpriced row{'s' * (rows != 1)}"

    out.print(f"total {total(p['total_cost_usd'], p['priced_cost_usd'])} billed, "
              f"{total(p['total_shadow_cost_usd'], p['priced_shadow_cost_usd'])} shadow ({p['mode']} mode)")
    if p.get("startup_ms"):
        out.print(f"start-up {p['startup_ms'] / 1000:.1f} s loading models, booked apart (not in this query's latency)")


TABLE_ROWS = 20  # `rag report` without --last: totals over everything, the latest rows only


@app.command("report")
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
    from rag_app.config.settings import load_settings
    from rag_app.present.report_export import write_by, write_report
    from tracing.ledger import BY_DIMS, Ledger

    try:
        form = export_format(fmt, output)
        output_path("--out", output)  # else a missing folder is reported as the ledger unreachable
    except RagError as e:
        _fail(e)
    if prices not in ("original", "repriced"):
        _fail(ValueError(f"--prices must be original or repriced, not {prices!r}"))
    if last is not None and last < 1:
        _fail(ValueError(f"--last must be at least 1, not {last}"))
    if by is not None and by not in BY_DIMS:
        _fail(ValueError(f"--by must be one of {', '.join(BY_DIMS)}, not {by!r}"))
    if by is not None and prices != "original":
        _fail(ValueError("--by reports recorded prices only; drop --prices repriced"))
    settings = load_settings()
    currency = _report_currency(settings)
    try:
        ledger = Ledger.readable(settings.ledger)
    except RagError as e:
        _fail(e)
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
            _fail(e)
        except Exception as e:  # the ledger went away mid-report: one line, never a traceback
            from tracing.ledger import is_transient

            if not is_transient(e):
                raise
            _fail(RagError(f"ledger {settings.ledger} unreachable ({type(e).__name__}); try again shortly"))
    if output:
        err.print(f"wrote {output}")


@app.command("budgets")
def budgets_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Each budget of RAG_BUDGETS_FILE: its limit, spend this period (priced; unpriced calls counted
    apart, never as $0), and time to reset, per key, user or variant, from the ledger every replica writes."""
    from rag_app.config.settings import load_settings
    from rag_app.spend.budgets import Limits, budget_status, load_budgets, render_status
    from tracing.ledger import Ledger
    from tracing.pricing import PriceTable

    settings = load_settings()
    if settings.budgets_file is None:
        _fail_one_line(RagError("RAG_BUDGETS_FILE is not set; point it at a budgets file (docs/spend-control.md)"))
    try:
        budgets = load_budgets(settings.budgets_file)
        limits = Limits(PriceTable.load(settings.price_overrides).fx)
        limits.check(budgets, settings.budgets_file)
        with Ledger.readable(settings.ledger) as ledger:
            rows = budget_status(ledger, budgets, limits)
    except RagError as e:
        _fail_one_line(e)
    if as_json:
        print(json.dumps({"budgets": rows, "unpriced_policy": settings.budget_unpriced}, ensure_ascii=False, indent=2))
    else:
        print(render_status(rows))


def _report_currency(settings):
    """RAG_REPORT_CURRENCY: USD (the ledger's) or CNY at the price table's latest dated rate."""
    from tracing.fx import display_currency
    from tracing.pricing import PriceTable

    try:
        return display_currency(settings.report_currency, PriceTable.load(settings.price_overrides).fx)
    except (ValueError, RagError) as e:
        _fail(e)


def _print_report(rep) -> None:
    from rag_app.present.cost_render import report_tables

    out.print(report_tables(rep))


@app.command("prices")
def prices_cmd(model: Optional[str] = typer.Argument(None, help="a model name (default RAG_LLM_MODEL), or `check`"),
               as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
               at: Optional[str] = typer.Option(None, "--at", help="the price in force at this UTC time (default now)"),
               against: Optional[str] = typer.Option(None, "--against",
                                                     help="`check --against litellm`: compare with LiteLLM's map")):
    """The price in force for a model (source, version, dated history); `rag prices check` lists
    unpriced ledger models; `rag prices check --against litellm` lists where LiteLLM's map differs by >1%."""
    from rag_app.config.settings import load_settings
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
        _fail(e)
    raise typer.Exit(code)


@app.command("reprice")
def reprice_cmd(since: Optional[str] = typer.Option(None, help="only rows started at or after this UTC date/time"),
                model: Optional[str] = typer.Option(None, help="only this model")):
    """Recompute stored rows' dollars under today's price table; the original figures are kept."""
    from rag_app.config.settings import load_settings
    from rag_app.cli.prices import run_reprice

    try:
        run_reprice(load_settings(), since, model, out)
    except RagError as e:
        _fail(e)


@app.command("eval")
def eval_cmd(qa: Path = typer.Option(..., help="QA JSONL with gold[].doc/char_start/char_end"),
             corpus: Path = typer.Option(..., help="corpus folder the gold docs are relative to"),
             chunker: list[str] = typer.Option(["legal"], help="chunker(s) to compare; repeat the flag"),
             retriever: list[str] = typer.Option(
                 ["default"], help="default (what `rag ask` runs: RAG_RETRIEVER + RAG_RETRIEVAL_LEVERS) | dense | bm25 "
                                   "| hybrid, optionally +lever...; repeat the flag"),
             k: str = typer.Option("1,5,10", help="recall cut-offs"),
             limit: Optional[int] = typer.Option(None, help="only the first N questions"),
             force_dense: bool = typer.Option(False, help="keep the dense leg even if the model cannot read the corpus"),
             no_cite: bool = typer.Option(False, help="turn off citation-aware boosting"),
             output: Optional[Path] = typer.Option(None, "--out", help="write results (.json or .csv)"),
             runs: Optional[Path] = typer.Option(None, help="write raw rankings, one JSON line per question"),
             budgets: str = typer.Option("500,1000,2500", help="context-token budgets for recall within a budget"),
             split: Optional[str] = typer.Option(None, help="tune | validate: the fixed task-stratified half"),
             lever_param: list[str] = typer.Option([], help="lever setting NAME=VALUE (rag_app.query.levers.LeverParams); repeat"),
             scope: str = typer.Option("none", help="none | doc: search each question within its QA line's own `doc`"),
             llm: bool = typer.Option(False, "--llm", help="answer with RAG_LLM_MODEL (billed): cites-gold and "
                                                             "$ per correct answer for generated answers")):
    """Recall@k, recall within token budgets (95% CIs), MRR, nDCG, context tokens and $ per query for
    each chunker x retriever; every configuration after the first is compared with the first, paired."""
    from rag_app.chunking.registry import CHUNKERS
    from rag_app.evaluation.harness import EvalSpec, run_eval

    chunkers = [c for arg in chunker for c in arg.split(",")]
    if "all" in chunkers:
        chunkers = list(CHUNKERS)
    retrievers = [r for arg in retriever for r in arg.split(",")]
    from rag_app.query.levers import LEVERS, parse_retriever

    bad = ([r for r in retrievers if r != "default" and not parse_retriever(r)]
           + [c for c in chunkers if c not in CHUNKERS])
    if bad:
        _fail(ValueError(f"unknown chunker/retriever {bad}; chunkers: {', '.join(CHUNKERS)}; retrievers: default, dense, "
                         f"bm25, hybrid, optionally +lever ({', '.join(LEVERS)}), e.g. bm25+prf"))
    if split not in (None, "tune", "validate"):
        _fail(ValueError(f"--split must be tune or validate, not {split!r}"))
    if scope not in ("none", "doc"):
        _fail(ValueError(f"--scope must be none or doc, not {scope!r}"))
    try:  # before the work: an eval of minutes is not lost to a bad path at the end
        ks = positive_ints("--k", k)
        budget_list = positive_ints("--budgets", budgets, "500,1000,2500", allow_empty=True)
        at_least_one("--limit", limit)
        output_path("--out", output, (".json", ".csv"))
        output_path("--runs", runs)
    except RagError as e:
        _fail(e)
    spec = EvalSpec(qa=qa, corpus=corpus, chunkers=chunkers, retrievers=retrievers,
                    ks=ks, limit=limit, runs_path=runs, force_dense=force_dense,
                    cite=not no_cite, budgets=budget_list, split=split, lever_params=_lever_params(lever_param),
                    scope=scope, use_llm=llm)
    try:
        with _app() as rag, _progress_bars() as progress:
            result = run_eval(rag, spec, progress)
    except (RagError, FileNotFoundError) as e:
        _fail(e)
    _print_eval(result, spec.ks)
    from rag_app.evaluation.render import print_budgets

    print_budgets(result, out)
    if output:
        _write_eval(result, output)
        err.print(f"wrote {output}")


def _lever_params(pairs: list[str]) -> dict:
    from rag_app.query.levers import LeverParams

    fields = LeverParams.__dataclass_fields__
    out = {}
    for p in pairs:
        key, _, val = p.partition("=")
        if key not in fields or not val:
            _fail(ValueError(f"--lever-param {p!r}: use NAME=VALUE with NAME one of {', '.join(fields)}"))
        out[key] = type(fields[key].default)(val)  # type: ignore[misc]  # every LeverParams field has a default
    return out


@app.command("eval-compare")
def eval_compare(base: str = typer.Argument(..., help="runs file from `rag eval --runs`, optionally FILE:chunker/retriever"),
                 new: str = typer.Argument(..., help="the other runs file, same form"),
                 qa: Path = typer.Option(..., help="the QA JSONL both runs answered"),
                 split: Optional[str] = typer.Option(None, help="tune | validate"),
                 k: str = typer.Option("1,5,10", help="recall cut-offs"),
                 budgets: str = typer.Option("500,1000,2500", help="context-token budgets"),
                 output: Optional[Path] = typer.Option(None, "--out", help="write the comparison as JSON")):
    """Paired comparison of two saved runs on the same questions: new - base with bootstrap 95% CIs."""
    from rag_app.evaluation.compare_cli import run_compare

    try:
        ks = positive_ints("--k", k)
        budget_list = positive_ints("--budgets", budgets, "500,1000,2500", allow_empty=True)
        output_path("--out", output)
    except RagError as e:
        _fail(e)
    try:
        result = run_compare(base, new, qa, split, ks, budget_list)
    except (RagError, FileNotFoundError, ValueError) as e:
        _fail(e)
    from rag_app.evaluation.render import diff_table

    out.print(f"{result['base_run']} -> {result['new_run']} on {result['questions']} questions (split: {result['split']})")
    out.print(diff_table("difference", result["diff"], result["diff_by_task"]))
    if output:
        output.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
        err.print(f"wrote {output}")


def _print_eval(result: dict, ks: list[int]) -> None:
    """80-column tables (rag_app/evaluation/render.py), each configuration numbered, its chunker,
    retriever, legs and levers listed above them (too long for a column)."""
    from rag_app.evaluation.render import eval_tables

    out.print(f"retrieval on {result['questions']} questions ({result['qa']}); rerank: {result['reranker']}")
    for i, r in enumerate(result["results"], 1):
        what = f"skipped: {r['skipped']}" if r.get("skipped") else f"{r['legs']}; levers {r['levers']}"
        out.print(f"  {i}. {r['chunker']} / {r['retriever']} ({what})", markup=False)
    for table in eval_tables(result, ks):
        out.print(table)


def _write_eval(result: dict, path: Path) -> None:
    from rag_app.present.report_export import plain_row

    if path.suffix.lower() == ".csv":
        # a nested value (the per-budget recalls) as JSON, not Python's repr, so other tools can read it
        rows = [{k: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v for k, v in r.items()}
                for r in result["results"]]
        fields = list(dict.fromkeys(k for r in rows for k in r))
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(plain_row(r) for r in rows)
    else:
        path.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")


@app.command()
def serve(host: str = typer.Option("127.0.0.1", help="bind address"),
          port: int = typer.Option(8000, help="port"),
          allow_remote: bool = typer.Option(False, "--allow-remote",
                                            help="bind beyond loopback without RAG_API_TOKEN (anyone reaching it may ingest)")):
    """HTTP service: /v1/ask, /v1/ingest, /v1/queries, /v1/reports/summary, /v1/experiments/NAME, /docs."""
    from rag_app.service.startup import preflight

    try:  # cheap checks first: a bad setting fails in well under a second, before the heavy imports
        settings = preflight(host, allow_remote)
        from rag_app.service.app import create_app

        api = create_app(settings, bind_host=host)
    except RagError as e:
        _fail_one_line(e)
    import uvicorn

    uvicorn.run(api, host=host, port=port, log_level="warning")


def _fail_one_line(e: Exception) -> None:
    # Plain stderr, not rich: a long message must stay one line, never wrapped to the terminal.
    print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    raise typer.Exit(2)


experiment_app = typer.Typer(help="Gray-release experiments.", no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")


@experiment_app.command("compare")
def experiment_compare(name: str = typer.Argument(..., help="experiment name in RAG_EXPERIMENTS_FILE"),
                       as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Per-arm cost, latency and failure rates, anytime-valid intervals, SRM check and a verdict."""
    from rag_app.experiments.comparison import compare_live
    from rag_app.config.settings import load_settings
    from rag_app.present.cost_render import experiment_arm_tables, experiment_metrics_table, usd
    from rag_app.experiments.variants import ExperimentConfig
    from tracing.ledger import Ledger

    try:
        settings = load_settings()
        exp = ExperimentConfig.load(settings.experiments_file).experiments.get(name)
        if exp is None:
            raise RagError(f"no experiment {name!r} in {settings.experiments_file or 'RAG_EXPERIMENTS_FILE (unset)'}")
        with Ledger.readable(settings.ledger) as ledger:
            if "m005_ledger_durability" in ledger.pending:  # no origin column yet: live rows cannot be told apart
                raise RagError(f"ledger {settings.ledger} is read-only and needs migrations {', '.join(ledger.pending)}"
                               " before live traffic can be compared; make it writable and run any rag command")
            events = ledger.experiment_events(name) if exp.ramp else []
            if events:  # a ramp moved it: compare at the percentage it is served at now
                import dataclasses

                exp = dataclasses.replace(exp, rollout_pct=float(events[-1]["to_pct"]))
            res = compare_live(ledger, exp)
            if exp.ramp:
                res["ramp"] = {"steps": exp.ramp["steps"], "rollout_pct": exp.rollout_pct, "events": events}
    except RagError as e:
        _fail(e)
    if as_json:
        print(json.dumps(res, ensure_ascii=False, indent=2, default=str))
        return
    for table in experiment_arm_tables(name, res):
        out.print(table)
    d = res["differences"]["cost_per_query"]
    if d:
        out.print(f"cost difference (treatment - control): {usd(d['diff'])}, one-look 95% CI [{usd(d['ci95_low'])}, "
                  f"{usd(d['ci95_high'])}]")
    out.print(experiment_metrics_table(res))
    for ev in res.get("ramp", {}).get("events", []):
        out.print(f"ramp {ev['at'][:16]}: {ev['action']} {ev['from_pct']:g}% -> {ev['to_pct']:g}% ({ev['reason']})")
    if res["prices"] == "repriced":
        out.print(f"costs are re-priced figures ({res['repriced_rows']} stage rows changed by `rag reprice`); "
                  "recorded figures: `rag report`")
    if res["srm"]:
        p = res["srm"]["pvalue"]
        out.print(f"sample ratio check: p = {'n/a' if p is None else f'{p:.3g}'}, "
                  f"{'MISMATCH' if res['srm']['flagged'] else 'ok'}")
    out.print(f"[bold]verdict: {res['verdict']}[/bold] (decided by {res['decided_by']}) — {res['reason']}")


@experiment_app.command("replay")
def experiment_replay(name: str = typer.Argument(..., help="experiment name in RAG_EXPERIMENTS_FILE"),
                      qa: Path = typer.Option(..., help="labelled questions (QA JSONL with gold spans)"),
                      corpus: Path = typer.Option(..., help="corpus folder the gold docs are relative to"),
                      limit: Optional[int] = typer.Option(None, help="only the first N questions"),
                      k: int = typer.Option(5, help="recall cut-off"),
                      as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Same labelled questions through both arms: recall@k and cost with paired-bootstrap 95% CIs, verdict."""
    from rag_app.experiments.comparison import replay
    from rag_app.config.settings import check_data_dir, load_settings
    from rag_app.present.cost_render import usd
    from rag_app.evaluation.qa import load_qa
    from rag_app.service.pool import VariantPool

    try:
        at_least_one("--limit", limit)
        at_least_one("--k", k)
        settings = load_settings()
        check_data_dir(settings.data_dir)
        pool = VariantPool(settings)
        exp = pool.config.experiments.get(name)
        if exp is None:
            raise RagError(f"no experiment {name!r} in {settings.experiments_file or 'RAG_EXPERIMENTS_FILE (unset)'}")
        questions = load_qa(qa, limit)
        with _progress_bars() as progress:
            res = replay(pool, exp, questions, corpus, k=k, progress=progress)
        pool.close()
    except RagError as e:
        _fail(e)
    if as_json:
        print(json.dumps(res, ensure_ascii=False, indent=2))
        return
    for arm, a in res["arms"].items():
        cost = usd(a["cost_per_query"]) if a["cost_per_query"] is not None else f"unpriced ({a['unpriced_queries']} q)"
        grounded = "-" if a["groundedness"] is None else f"{a['groundedness']:.0%}"
        out.print(f"{arm:<10} {a['variant']:<16} recall@{k} {a[f'recall@{k}']:.3f}  MRR {a['mrr']:.3f}  grounded {grounded}")
        out.print(f"{'':<10} cost/query {cost} ({res['cost_metric']})")
    for key, d in res["differences"].items():
        if d:
            out.print(f"{key} difference {d['diff']:+.6g}, 95% CI [{d['ci95_low']:+.6g}, {d['ci95_high']:+.6g}] (paired bootstrap)")
    out.print(f"[bold]verdict: {res['verdict']}[/bold] — {res['reason']}")


chunks_app = typer.Typer(help="Inspect the chunks of a collection.", no_args_is_help=True)
app.add_typer(chunks_app, name="chunks")


@chunks_app.command("stats")
def chunks_stats(collection: Optional[str] = typer.Option(None, help="collection (default RAG_COLLECTION)"),
                 bins: int = typer.Option(20, help="histogram bins"),
                 png: Optional[Path] = typer.Option(None, help="also save the histogram as a PNG")):
    """Chunks per document type (statute / contract / other) and the chunk-length histogram (cl100k
    tokens) of a collection, as text and optionally as a PNG."""
    from rag_app.present.chunk_stats import by_doc_type, histogram, render_text, render_types, save_png
    from rag_app.config.settings import check_data_dir, load_settings
    from rag_app.store import open_store

    settings = load_settings(**({"collection": collection} if collection else {}))
    try:
        at_least_one("--bins", bins)
        output_path("--png", png)
        check_data_dir(settings.data_dir)
        with open_store(settings) as store:
            if store.info(settings.collection) is None:
                raise RagError(f"collection {settings.collection!r} does not exist; run `rag ingest` first")
            payloads = store.all_payloads(settings.collection)
    except RagError as e:
        _fail(e)
    tokens = [p["token_count"] for p in payloads]
    out.print(render_types(by_doc_type(payloads)), highlight=False)
    out.print(render_text(histogram(tokens, bins), tokens, settings), highlight=False)
    if png:
        save_png(tokens, bins, png, settings)
        err.print(f"wrote {png}")


@app.command()
def demo(corpus: Path = typer.Option(Path("../shared/data/legal_zh/corpus"), help="folder to ingest"),
         qa: Path = typer.Option(Path("../shared/data/legal_zh/qa_dev.jsonl"), help="questions (JSONL)"),
         n: int = typer.Option(3, help="how many questions to ask")):
    """Ingest a corpus, ask N questions from a QA file, print answers and cost tables."""
    questions = _demo_questions(qa, n)
    try:
        # the demo skips ingest's whole-corpus embedding pass (minutes here) and embeds only its questions'
        # candidates (RAG_RESCORE_VECTORS=query); `rag ingest` makes every vector once
        with _app(rescore_vectors="query") as rag:
            _ingest_with_progress(rag, [corpus], False)
            # as `rag ask` does: the first question's rows are its own, not the models' loading
            startup_ms = rag.warm_up()
            for i, q in enumerate(questions):
                out.rule()
                _print_answer({**_asked(rag, rag.ask(q)), "startup_ms": startup_ms if i == 0 else None})
    except RagError as e:
        _fail(e)
    out.rule()
    out.print("see every query's cost with: rag report")


def _demo_questions(qa: Path, n: int) -> list[str]:
    if not qa.exists():
        _fail(RagError(f"QA file {qa} not found; pass --qa FILE"))
    rows = [json.loads(line) for line in qa.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_task: dict[str, dict] = {}
    for r in rows:  # one question per task type, so the demo shows different kinds
        by_task.setdefault(r.get("task", ""), r)
    picked = list(by_task.values())[:n]
    return [r["question"] for r in picked] + [r["question"] for r in rows if r not in picked][: max(0, n - len(picked))]


if __name__ == "__main__":
    app()
