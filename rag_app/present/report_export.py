"""`rag report` output: an 80-column table, or CSV / JSON written row by row as the ledger is read,
so exporting a million queries holds one page of rows in memory, not the ledger."""
from __future__ import annotations

import csv
import json
import math
from decimal import Decimal
from typing import TextIO

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from rag_app.present.cost_render import audit_line, keyed_labels, money, report_tables

BY_TABLE_ROWS = 50  # a person reads the top spenders; CSV/JSON carry every one


def with_currency(row: dict, cur) -> dict:
    """A report row with a `<name>_<cur>` twin beside every `<name>_usd` figure (RAG_REPORT_CURRENCY): a
    query's at the rate in force when it started, a group's at the latest rate."""
    if cur is None or cur.rate is None:
        return row
    out = {}
    at = row.get("started_at")
    for k, v in row.items():
        out[k] = v
        if k.endswith("_usd") and (v is None or isinstance(v, (int, float))):
            out[f"{k[:-4]}_{cur.code.lower()}"] = cur.convert(v, at)
    return out


def write_report(ledger, fmt: str, stream: TextIO, console: Console, *, last: int | None, variant: str | None,
                 prices: str, table_rows: int, currency=None) -> None:
    """`ledger`: a tracing.ledger.Ledger."""
    ledger_audit = {**ledger.audit(), "migrations_pending": ledger.pending}
    if fmt == "table":
        rep = ledger.report(last=last, variant=variant, prices=prices, rows=table_rows if last is None else None)
        target = console if stream is None or stream is console.file else Console(file=stream, width=80)
        target.print(report_tables(rep, currency))
        target.print(audit_line(ledger_audit))
        evaluation = rep.totals.get("evaluation_spend")
        if evaluation and (evaluation["judge_calls"] or evaluation["failed_runs"]):
            target.print(evaluation_line(evaluation, currency), markup=False, soft_wrap=True)
        quality = _quality(ledger, variant)
        if quality is not None and quality["scored_answers"]:
            target.print(quality_line(quality), markup=False)
        return
    if prices == "original":
        totals = ledger.report_totals(last=last, variant=variant)
        rows = ledger.iter_query_rows(variant=variant, last=last)
    else:  # re-priced figures have no rollups: the full computation (memory grows with the ledger)
        rep = ledger.report_full(last=last, variant=variant, prices=prices)
        totals, rows = rep.totals, iter(rep.queries)
    if currency is not None and currency.rate is not None:
        rows = (with_currency(r, currency) for r in rows)
        totals = {**with_currency(totals, currency), "currency": currency.json()}
    if fmt == "csv":
        writer = None
        for row in rows:
            if writer is None:
                writer = csv.DictWriter(stream, fieldnames=list(row))
                writer.writeheader()
            writer.writerow(plain_row(row))
        return
    stream.write('{"queries": [')
    for i, row in enumerate(rows):
        stream.write(("," if i else "") + "\n  " + json.dumps(row, ensure_ascii=False))
    stream.write("\n],\n" + f'"totals": {json.dumps(totals, ensure_ascii=False)},\n'
                 f'"quality": {json.dumps(_quality(ledger, variant), ensure_ascii=False)},\n'
                 f'"ledger": {json.dumps(ledger_audit, ensure_ascii=False)}}}\n')


def plain_number(v: float) -> str:
    """A float as a spreadsheet and a finance person read it: 0.000084242, never 8.4242e-05 (the
    shortest text that reads back as the same float, without an exponent)."""
    if not math.isfinite(v):
        return str(v)
    text = format(Decimal(repr(v)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def plain_row(row: dict) -> dict:
    return {k: plain_number(v) if isinstance(v, float) else v for k, v in row.items()}


def _quality(ledger, variant: str | None) -> dict | None:
    """Answer quality and feedback (all queries of the variant); None on a ledger that predates them."""
    if {"m013_answer_quality", "m014_query_feedback"} & set(ledger.pending or ()):
        return None
    return ledger.quality_summary(variant)


def quality_line(q: dict) -> str:
    """The quality lines under `rag report`: groundedness and citations, refusals (not in groundedness),
    users' feedback, and the judge's agreement with users where both graded an answer."""
    f = q["feedback"]
    grounded = "-" if q["mean_groundedness"] is None else f"{q['mean_groundedness']:.0%}"
    lines = [f"quality: {q['scored_answers']:,} answers scored, groundedness {grounded}, "
             f"{q['invalid_citation_rate']:.1%} cite what was not sent"]
    if q.get("refusal_rate") is not None:
        lines.append(f"refusals: {q['refusals']:,} ({q['refusal_rate']:.1%}), not counted in groundedness")
    lines.append(f"feedback: {f['right']:,} right, {f['unsure']:,} unsure, {f['wrong']:,} wrong")
    a = q.get("judge_agreement")
    if a:
        kappa = "-" if a["kappa"] is None else f"{a['kappa']:.2f}"
        lines.append(f"judge and users agree on {a['agreeing']:,} of {a['answers']:,} answers "
                     f"({a['share_agreeing']:.0%}), Cohen's kappa {kappa}")
    return "\n".join(lines)


def evaluation_line(e: dict, cur=None) -> str:
    """The judge's spend, apart: it is in no query's cost, cost per query or arm."""
    cost = money(e["cost_usd"], cur) + ("+" if e["cost_is_lower_bound"] else "")
    failed = f", {e['failed_runs']:,} failed" if e["failed_runs"] else ""
    calls, judged = e["judge_calls"], e["judged_answers"]
    return (f"evaluation spend: {cost} ({calls:,} judge call{'s' * (calls != 1)}, {judged:,} answer"
            f"{'s' * (judged != 1)} judged{failed}), not in cost per query")


def write_by(ledger, dim: str, fmt: str, stream: TextIO, console: Console, *, variant: str | None,
             currency=None) -> None:
    rows = ledger.by(dim, variant=variant)
    converted = currency is not None and currency.rate is not None
    if converted:  # RAG_REPORT_CURRENCY, as `rag report` without --by: a twin beside each USD figure
        rows = [with_currency(r, currency) for r in rows]
    if fmt == "json":
        extra = {"currency": currency.json()} if converted else {}
        stream.write(json.dumps({"by": dim, "variant": variant, "rows": rows, **extra}, ensure_ascii=False,
                                indent=2) + "\n")
        return
    if fmt == "csv":
        if rows:
            w = csv.DictWriter(stream, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(plain_row(r) for r in rows)
        return
    target = console if stream is console.file else Console(file=stream, width=80)
    target.print(by_table(dim, rows, currency))
    if converted:
        target.print(currency.note())
    quality = quality_by_table(dim, rows)
    if quality is not None:
        target.print(quality)


KEY_PREFIX = {"model": "M", "user": "U", "key": "K", "variant": "V"}  # a name too long for 80 columns: M1 = ...


def _group(r: dict, dim: str) -> str:
    return str(r[dim] if r[dim] is not None else "(none)")


def by_table(dim: str, rows: list[dict], cur=None) -> Group:
    """Spend per user/key/variant/model/day/stage in 80 columns; unpriced never shown as $0; a name too long
    for the table is a key (M1) spelled out below it, never wrapped."""
    def usd(v):  # the report's currency, USD unless asked
        return money(v, cur)

    shown = rows[:BY_TABLE_ROWS]
    more = f" (top {len(shown)} of {len(rows)} by cost; --format csv for all)" if len(rows) > len(shown) else ""
    # a model's queries are those that called it: its $ per query is over them, not every query
    over = " (per 1k q: over the queries that called it)" if dim == "model" else ""

    def build(labels: dict, tokens: bool = True) -> Table:
        t = Table(title=f"spend by {dim}{over}{more}", pad_edge=False, collapse_padding=True)
        t.add_column(dim, no_wrap=True)
        for col in ("queries", "cost", "eval", "per 1k q", "shadow", *(["tokens"] if tokens else []), "unpriced"):
            t.add_column(col, justify="right", no_wrap=True)
        for r in shown:
            cost = ("unpriced" if r["cost_is_lower_bound"] and not r["cost_usd"]  # nothing of it is priced: not $0+
                    else usd(r["cost_usd"]) + ("+" if r["cost_is_lower_bound"] else ""))
            mean = ("-" if not r["queries"]  # named by skipped rows only: never called, no per query
                    else "unpriced" if r["cost_per_1k_queries_usd"] is None else usd(r["cost_per_1k_queries_usd"]))
            if r["cost_per_1k_queries_usd"] is not None and r.get("unpriced_queries"):
                mean += "*"  # a mean over the priced queries alone: the unpriced ones are left out, not $0
            evaluation = ("-" if not r.get("evaluation_runs") else "unpriced" if r["evaluation_cost_usd"] is None
                          else usd(r["evaluation_cost_usd"]) + ("+" if r.get("evaluation_cost_is_lower_bound") else ""))
            t.add_row(Text(labels[_group(r, dim)]), f"{r['queries']:,}", cost, evaluation, mean,
                      usd(r["shadow_cost_usd"]), *([f"{r['input_tokens'] + r['output_tokens']:,}"] if tokens else []),
                      f"{r['unpriced_rows']:,} rows" if r["unpriced_rows"] else "-")
        t.caption = ("cost = the answers' spend, eval = grading them (the judge), apart: together every billed row; "
                     "cost+ = known part; unpriced rows (no price for the model) are not counted as $0")
        if any(r.get("unpriced_queries") and r["cost_per_1k_queries_usd"] is not None for r in shown):
            t.caption += "; per 1k q* = over the priced queries only"
        if not tokens:
            t.caption += "; tokens: --format csv or json"
        return t
    names = [_group(r, dim) for r in shown]
    table, legend = keyed_labels(names, build, KEY_PREFIX.get(dim, "#"))
    if legend:  # a day, a stage or a short name whole beats the tokens column: CSV and JSON carry them
        narrow, keyed = keyed_labels(names, lambda labels: build(labels, tokens=False), KEY_PREFIX.get(dim, "#"))
        if not keyed:
            table, legend = narrow, keyed
    return Group(table, *legend)


def _share(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def quality_by_table(dim: str, rows: list[dict]) -> Group | None:
    """The answers' quality and feedback per group, a second 80-column table in the spend table's row
    order (long names keyed as in the spend table); None when no group has a scored answer or a word of
    feedback (or the ledger keeps none)."""
    shown = rows[:BY_TABLE_ROWS]
    if not any(r.get("scored") or r.get("feedback_count") for r in shown):
        return None

    def build(labels: dict) -> Table:
        t = Table(title=f"answer quality by {dim}", pad_edge=False, collapse_padding=True)
        t.add_column(dim, no_wrap=True)
        for col in ("queries", "scored", "grounded", "bad cites", "refused", "right", "wrong", "said"):
            t.add_column(col, justify="right", no_wrap=True)
        for r in shown:
            t.add_row(Text(labels[_group(r, dim)]), f"{r['queries']:,}",
                      f"{r['scored']:,}", _share(r["groundedness"]), _share(r["invalid_citation_rate"]),
                      _share(r.get("refusal_rate")), f"{r['feedback_up']:,}", f"{r['feedback_down']:,}",
                      f"{r['feedback_count']:,}")
        t.caption = ("grounded = mean groundedness of the scored answers (refusals have none); bad cites = share "
                     "citing what was not sent; refused = share that said the passages do not answer; said = "
                     "feedback in all (unsure too); - = nothing scored")
        if dim == "model":
            t.caption += "; an answer is booked to the model that generated it"
        return t
    table, legend = keyed_labels((_group(r, dim) for r in shown), build, KEY_PREFIX.get(dim, "#"))
    return Group(table, *legend)
