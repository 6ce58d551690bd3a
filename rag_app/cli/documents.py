"""`rag ingest`, `rag ask`, `rag chunks stats` and `rag demo`: documents in, answers and what they cost out."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from rag_app.cli.args import at_least_one, output_path
from rag_app.cli.common import REFUSED, err, fail, fail_one_line, open_app, out, progress_bars
from rag_app.core import RagError


def ingest(paths: list[Path] = typer.Argument(..., help="files or folders (PDF, DOCX, HTML, Markdown, text)"),
           rebuild: bool = typer.Option(False, help="drop the collection first and rebuild it"),
           collection: Optional[str] = typer.Option(None, help="Qdrant collection (default RAG_COLLECTION)"),
           doc_type: list[str] = typer.Option([], "--doc-type", help="statute | contract | other for every file, "
                                              "or GLOB=TYPE for the files it matches; repeat (the last match wins)")):
    """Parse, chunk, embed and index documents; prints one outcome per file (with its document type)."""
    from rag_app.chunking import parse_override

    try:
        overrides = tuple(parse_override(d) for d in doc_type)
    except ValueError as e:
        fail(e)
    try:
        with open_app(**({"collection": collection} if collection else {})) as rag:
            report = _ingest_with_progress(rag, paths, rebuild, overrides)
    except RagError as e:
        fail(e)
    if not any(o.status in ("written", "unchanged") for o in report.outcomes):
        err.print(f"error: nothing ingestible in {', '.join(str(p) for p in paths)}: no file was written or "
                  "found unchanged (see the lines above); pass PDF, DOCX, HTML, Markdown or text files")
        raise typer.Exit(1)
    if report.errors:
        raise typer.Exit(1)


def _asked(rag, answer) -> dict:
    """The answer and what it cost, from the usages it carries (the same values its ledger rows hold)."""
    from rag_app.present import answer_payload
    from tracing.ledger import usage_json

    if rag.writer.failing:  # the rows wait in memory / a spill file; the figures shown are still exact
        err.print(f"warning: ledger not writable ({rag.writer.failing}); rows kept in memory / spill file")
    return answer_payload(answer, stage_view=usage_json)


def _ingest_with_progress(rag, paths, rebuild, doc_types=()):
    with progress_bars({"parse": "parse + chunk", "index": "embed + index",
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


def ask(question: str = typer.Argument(..., help="the question"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
        variant: Optional[str] = typer.Option(None, help="variant label recorded on ledger rows"),
        doc: list[str] = typer.Option([], "--doc", help="search only this document (file name, title or id); repeat"),
        law: list[str] = typer.Option([], "--law", help="search only this law (title or short name); repeat"),
        user: Optional[str] = typer.Option(None, "--user", help="who asks, for the ledger and budgets (default: "
                                           "your OS user); the API key is `cli`")):
    """Answer a question with citations and a per-stage cost table.

    Admitted like a request to `rag serve` (rag_app/service/shell.py): RAG_BUDGETS_FILE's budgets on the key
    `cli`, on the user and on the variant bind it; a refusal is one line naming the budget, exit 3."""
    from rag_app.text import why_not_text
    from rag_app.query import Scope

    for name, text in [("QUESTION", question), *(("--doc", d) for d in doc), *(("--law", x) for x in law),
                       *((("--user", user),) if user is not None else ())]:
        if why_not_text(text):  # undecodable bytes in an argument arrive as lone surrogates
            fail(ValueError(f"{name} {why_not_text(text)}"))
    if not question.strip() or (user is not None and not user.strip()):
        fail(ValueError(f"{'QUESTION' if not question.strip() else '--user'} is empty; pass its text"))
    try:
        payload = _admitted_answer(question, user, variant, Scope(tuple(doc), tuple(law)) or None)
    except (RagError, ValueError) as e:
        fail(e)
    if as_json:
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    _print_answer(payload)


def _admitted_answer(question: str, user: str | None, variant: str | None, scope) -> dict:
    """The question through the query service `rag serve` uses; a refusal by admission is one line, exit 3."""
    from rag_app.access import RateLimited
    from rag_app.access import Forbidden
    from rag_app.service import shell_request, shell_service
    from rag_app.spend import LedgerDown, OverBudget

    request = shell_request(question, user, variant, scope)
    startup: list[float | None] = []
    try:
        with open_app() as rag, shell_service(rag) as service:
            # the models load once the question may spend (booked apart from its latency): a refused ask
            # loads nothing, a cache hit needs nothing
            result = service.answer(request, admitted=lambda query_id, variant: startup.append(rag.warm_up()))
            if rag.writer.failing:  # the rows wait in memory / a spill file; the figures shown are still exact
                err.print(f"warning: ledger not writable ({rag.writer.failing}); rows kept in memory / spill file")
    except (OverBudget, RateLimited, Forbidden, LedgerDown) as e:
        fail_one_line(e, code=REFUSED)
    return {**result.answer, "startup_ms": startup[0] if startup else None}


def _print_answer(p: dict) -> None:
    from rag_app.present import stage_table, usd
    from rag_app.present import citation_label

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
        if q.get("refusal"):
            grounded = "- (a refusal: says the passages do not answer)"
        bad = q["invalid_citations"]
        out.print(f"quality: grounded {grounded}, {len(bad)} invalid citation{'s' * (len(bad) != 1)}"
                  + "".join(f" ({b['citation']}: {b['why']})" for b in bad[:3])
                  + f", retrieval confidence {q['retrieval_confidence']:.2f}", markup=False, soft_wrap=True)
        for c in [c for c in q.get("claims") or [] if c["supported"] is False][:5]:  # what a reader should check
            out.print(f"  unsupported: {c['text'][:60]}{'…' if len(c['text']) > 60 else ''} — {c['why']}",
                      markup=False, soft_wrap=True)
    out.print(stage_table(p["stages"], title=f"cost of query {p['query_id']}"))
    def total(known, priced) -> str:  # an unknown total shows what is priced and that the rest is not
        rows = p["unpriced_rows"]
        return usd(known) if known is not None else f"{usd(priced)} + {rows} unpriced row{'s' * (rows != 1)}"

    out.print(f"total {total(p['total_cost_usd'], p['priced_cost_usd'])} billed, "
              f"{total(p['total_shadow_cost_usd'], p['priced_shadow_cost_usd'])} shadow ({p['mode']} mode)")
    if p.get("startup_ms"):
        out.print(f"start-up {p['startup_ms'] / 1000:.1f} s loading models, booked apart (not in this query's latency)")


def chunks_stats(collection: Optional[str] = typer.Option(None, help="collection (default RAG_COLLECTION)"),
                 bins: int = typer.Option(20, help="histogram bins"),
                 png: Optional[Path] = typer.Option(None, help="also save the histogram as a PNG")):
    """Chunks per document type (statute / contract / other) and the chunk-length histogram (cl100k
    tokens) of a collection, as text and optionally as a PNG."""
    from rag_app.present import by_doc_type, histogram, render_text, render_types, save_png
    from rag_app.config import check_data_dir, load_settings
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
        fail(e)
    tokens = [p["token_count"] for p in payloads]
    out.print(render_types(by_doc_type(payloads)), highlight=False)
    out.print(render_text(histogram(tokens, bins), tokens, settings), highlight=False)
    if png:
        save_png(tokens, bins, png, settings)
        err.print(f"wrote {png}")


def demo(corpus: Path = typer.Option(Path("../shared/data/legal_zh/corpus"), help="folder to ingest"),
         qa: Path = typer.Option(Path("../shared/data/legal_zh/qa_dev.jsonl"), help="questions (JSONL)"),
         n: int = typer.Option(3, help="how many questions to ask")):
    """Ingest a corpus, ask N questions from a QA file, print answers and cost tables."""
    questions = _demo_questions(qa, n)
    try:
        # the demo skips ingest's whole-corpus embedding pass (minutes here) and embeds only its questions'
        # candidates (RAG_RESCORE_VECTORS=query); `rag ingest` makes every vector once
        with open_app(rescore_vectors="query") as rag:
            _ingest_with_progress(rag, [corpus], False)
            # as `rag ask` does: the first question's rows are its own, not the models' loading
            startup_ms = rag.warm_up()
            for i, q in enumerate(questions):
                out.rule()
                _print_answer({**_asked(rag, rag.ask(q)), "startup_ms": startup_ms if i == 0 else None})
    except RagError as e:
        fail(e)
    out.rule()
    out.print("see every query's cost with: rag report")


def _demo_questions(qa: Path, n: int) -> list[str]:
    if not qa.exists():
        fail(RagError(f"QA file {qa} not found; pass --qa FILE"))
    rows = [json.loads(line) for line in qa.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_task: dict[str, dict] = {}
    for r in rows:  # one question per task type, so the demo shows different kinds
        by_task.setdefault(r.get("task", ""), r)
    picked = list(by_task.values())[:n]
    return [r["question"] for r in picked] + [r["question"] for r in rows if r not in picked][: max(0, n - len(picked))]
