"""Money and cost tables for people: sensible precision, 80 columns, "unpriced" never shown as $0.

JSON and CSV keep full nano-dollar precision (rag_app.core.money.usd_json); only what a person reads is
rounded here: three significant digits ($0.000129), never scientific notation, never "$0.00…".
"""
from __future__ import annotations

import math

from collections.abc import Callable, Iterable

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

WIDTH = 80  # every table `rag` prints fits this many columns (tests/e2e/test_tables_fit_80.py)


def fmt(v: float | None, unit: str, signed: bool = True) -> str:
    """A metric's difference or bound for people: dollars, milliseconds, percentage points or a score."""
    if v is None or not math.isfinite(v):
        return "-"
    signed = signed and v != 0  # "0 ms", not "+0 ms"
    if unit == "usd":
        s = usd(v)
        return f"+{s}" if signed and v > 0 else s
    if unit == "ms":
        return f"{v:+.0f} ms" if signed else f"{v:.0f} ms"
    if unit == "score":  # feedback, -1 (wrong) .. 1 (right)
        return f"{v:+.3f}" if signed else f"{v:.3f}"
    return f"{v * 100:+.2f} pts" if signed else f"{v * 100:.2f} pts"


def usd(v: float | None, *, sig: int = 3) -> str:
    """$12.35, $0.0432, $0.000129, $0.0000004; None -> "unpriced"."""
    if v is None:
        return "unpriced"
    if v == 0:
        return "$0"
    a = abs(v)
    decimals = 2 if a >= 1 else min(max(2, sig - 1 - math.floor(math.log10(a))), 10)
    text = f"{a:.{decimals}f}"
    if "." in text and a < 1:
        text = text.rstrip("0").rstrip(".")
    return f"{'-' if v < 0 else ''}${text}"


def money(v: float | None, cur=None, at: str | None = None) -> str:
    """USD as `usd()` shows it, or converted to the report currency (a tracing.pricing.fx.DisplayCurrency):
    a figure of one moment (`at`, a query's start) at the rate in force then, else at the latest rate."""
    if cur is None or cur.rate is None:
        return usd(v)
    text = usd(cur.convert(v, at))
    return text.replace("$", cur.symbol, 1) if text.lstrip("-").startswith("$") else text


def per_1k(v: float | None, cur=None) -> str:
    """Cost per query shown as $ per 1,000 queries, the unit budgets are made in."""
    return "unpriced" if v is None else f"{money(v * 1000, cur)}/1k q"


def table_width(table: Table) -> int:
    """The columns `table` takes when nothing in it wraps."""
    return Console(width=10_000).measure(table).maximum


def keyed_labels(names: Iterable[str | None], build: Callable[[dict], Table], prefix: str,
                 width: int = WIDTH) -> tuple[Table, list[Text]]:
    """A table whose name column (models, users, variants, ...) never wraps or cuts a name: each name as it is
    while the table fits `width` columns; else the longest names, one at a time, as short keys (M1, M2, ... in
    the order the names come), each spelled out in a legend line below the table. `build(labels)` makes the
    table with {name: label}."""
    order = list(dict.fromkeys(n for n in names if n))
    keyed: set[str] = set()
    while True:
        labels = {n: n for n in order}
        labels.update({n: f"{prefix}{i}" for i, n in enumerate((n for n in order if n in keyed), 1)})
        table = build(labels)
        left = [n for n in sorted(order, key=len, reverse=True) if n not in keyed and len(n) > len(prefix) + 1]
        if table_width(table) <= width or not left:
            return table, [Text(f"{labels[n]} = {n}", overflow="fold") for n in order if n in keyed]
        keyed.add(left[0])


def stage_table(stages: list[dict], title: str) -> Group:
    """`rag ask`'s per-stage cost table in 80 columns: a model name too long for it is a key (M1) spelled out
    below the table, never wrapped; money never truncates."""
    def build(labels: dict) -> Table:
        t = Table(title=title, pad_edge=False, collapse_padding=True)
        t.add_column("stage", no_wrap=True)
        t.add_column("#", justify="right", no_wrap=True)
        t.add_column("status", no_wrap=True)
        t.add_column("model", no_wrap=True)
        for col in ("in", "out", "cost", "shadow", "ms"):
            t.add_column(col, justify="right", no_wrap=True)
        for s in stages:
            mark = "*" if (s.get("usage_source") or "").startswith("estimated:") else ""
            t.add_row(s["stage"], str(s["attempt"]), s["status"], labels.get(s["model"], "-"), str(s["input_tokens"]),
                      f"{s['output_tokens']}{mark}", usd(s["cost_usd"]),
                      "-" if s["shadow_cost_usd"] is None else usd(s["shadow_cost_usd"]), f"{s['latency_ms']:.0f}")
        return t
    t, legend = keyed_labels((s["model"] for s in stages), build, "M")
    notes = []
    for s in stages:
        source = s.get("usage_source") or ""
        mark = "*" if source.startswith("estimated:") else ""
        if mark:
            notes.append(f"* {s['stage']}: {source}" + (f" ({s['estimate_note']})" if s.get("estimate_note") else ""))
        if s.get("price_warning"):
            notes.append(f"! {s['stage']} price: {s['price_warning']}")
        if s.get("native_cost") is not None and s.get("price_currency") not in (None, "USD"):
            # billed in the provider's currency: its own amount, exact, and the dated rate it was converted at
            notes.append(f"{s['stage']} #{s['attempt']}: {s['native_cost']} {s['price_currency']} at {s['fx_rate']}")
        if s.get("output_at_risk_tokens"):
            risk = f", {usd(s['output_at_risk_usd'])} at its output rate" if s.get("output_at_risk_usd") else ""
            notes.append(f"! {s['stage']} attempt {s['attempt']}: up to {s['output_at_risk_tokens']} more output "
                         f"tokens may be billed (timed out{risk})")
    return Group(t, *legend, *(Text(n, overflow="fold") for n in notes))


def report_tables(rep, cur=None) -> Group:
    """`rag report`: per-query rows, per-stage totals and a summary, each within 80 columns; money in
    USD, or in `cur` (RAG_REPORT_CURRENCY) at the dated rate the summary names."""
    def usd(v, at=None):  # noqa: F811 - the report's currency, USD unless asked
        return money(v, cur, at)
    total = rep.totals.get("queries", len(rep.queries))
    of = f" of {total:,}" if total > len(rep.queries) else ""  # `rag report` lists the latest; totals cover all
    q = Table(title=f"last {len(rep.queries)}{of} queries", pad_edge=False, collapse_padding=True)
    q.add_column("started", no_wrap=True)
    q.add_column("question", overflow="fold", max_width=18)
    q.add_column("status", no_wrap=True)
    for col in ("tokens", "cost", "shadow", "ms"):
        q.add_column(col, justify="right", no_wrap=True)
    stages = list(rep.totals.get("stages") or ())
    for r in rep.queries:
        tokens = sum(r.get(f"{s}_tokens", 0) for s in stages or ("embed_query", "retrieve", "rerank", "generate"))
        at = r["started_at"]  # a query's money at the rate of its own day, as its CSV and JSON rows
        cost = usd(r["cost_usd"], at) if r["cost_usd"] is not None else f"unpriced ({r['unpriced_rows']})"
        q.add_row((r["started_at"] or "")[:16].replace("T", " "), (r["question"] or "")[:16],  # with the year
                  f"{r['status']}/{r['mode'] or '-'}", str(tokens), cost, usd(r["shadow_cost_usd"], at),
                  f"{r['latency_ms'] or 0:.0f}")
    tot = rep.totals
    s = Table(title="per stage", pad_edge=False, collapse_padding=True)
    for col in ("stage", "rows", "in tok", "out tok", "cost", "shadow", "unpriced"):
        s.add_column(col, justify="left" if col == "stage" else "right", no_wrap=True)
    for name, v in tot["stages"].items():
        s.add_row(name, str(v["rows"]), str(v["input_tokens"]), str(v["output_tokens"]), usd(v["cost_usd"]),
                  usd(v["shadow_cost_usd"]), str(v["unpriced_rows"]))
    return Group(q, s, *(Text(line, overflow="fold") for line in summary_lines(tot, cur)))


def summary_lines(tot: dict, cur=None) -> list[str]:
    def usd(v):  # noqa: F811
        return money(v, cur)
    hit = tot["embedding_cache_hit_rate"]
    known = usd(tot["cost_usd"])
    lines = [f"{tot['queries']} queries ({tot.get('prices', 'original')} prices): cost {known}"
             + (" + unpriced" if tot.get("cost_is_lower_bound") else "") + f", shadow {usd(tot['shadow_cost_usd'])}",
             f"per query: p50 {usd(tot['cost_per_query_p50_usd'])}, p95 {usd(tot['cost_per_query_p95_usd'])}, "
             f"mean {per_1k(None if tot.get('cost_per_1k_queries_usd') is None else tot['cost_per_1k_queries_usd'] / 1000, cur)}"
             + (f"\n  (over the {tot['priced_queries']:,} priced queries; {tot['unpriced_queries']:,} unpriced left out)"
                if tot.get("unpriced_queries") else ""),
             f"shadow per query: p50 {usd(tot['shadow_cost_per_query_p50_usd'])}, "
             f"p95 {usd(tot['shadow_cost_per_query_p95_usd'])}",
             f"retry/timeout waste {usd(tot['retry_timeout_waste_usd'])} ({tot['retry_timeout_waste_pct']}%; "
             f"{tot['retries']} retries, {tot['timeouts']} timeouts)"]
    if tot.get("output_at_risk_tokens") or tot.get("unknown_attempts"):
        lines.append(f"at risk (may still be billed): {usd(tot.get('at_risk_usd'))} = "
                     f"{usd(tot.get('at_risk_output_usd'))} for {tot.get('output_at_risk_tokens', 0)} output tokens "
                     f"of cut replies + {usd(tot.get('at_risk_unknown_attempts_usd'))} for "
                     f"{tot.get('unknown_attempts', 0)} attempts of unknown outcome")
    lines.append(f"unpriced: {tot['unpriced_rows']} rows in {tot.get('unpriced_queries', 0)} queries "
                 "(see `rag prices check`)" if tot["unpriced_rows"] else "unpriced: 0 rows")
    if tot.get("context_tokens_mean") is not None:
        budgets = "/".join(f"{b:,}" for b in tot.get("context_budget_tokens") or []) or "?"
        lines.append(f"context: {tot['context_tokens_mean']:,.0f} tokens per query on average "
                     f"(budget {budgets}, RAG_CONTEXT_TOKENS)")
    lines.append(f"estimated token counts: {tot.get('estimated_rows', 0)} rows; embedding cache hit rate "
                 f"{'n/a' if hit is None else f'{hit:.1%}'}")
    if cur is not None and cur.note():
        lines.append(cur.note())
    return lines


def experiment_arm_tables(name: str, res: dict) -> tuple:
    """`rag experiment compare`'s arms in three 80-column tables: what a query costs (a variant name too long
    for it keyed V1, spelled out below), how it ran, and how good its answers were."""
    metric = "shadow_cost_per_query" if res["cost_metric"] == "shadow_cost_usd" else "cost_per_query"
    pct = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    ms = lambda v: "-" if v is None else f"{v:,.0f} ms"  # noqa: E731

    def build(labels: dict) -> Table:
        cost = Table(title=f"experiment {name} ({res['mode']}, {res['rollout_pct']:g}% treatment), "
                          f"{res['cost_metric']} per query", pad_edge=False, collapse_padding=True)
        cost.add_column("arm")
        cost.add_column("variant", no_wrap=True)
        for c in ("queries", "mean", "p50", "p95"):
            cost.add_column(c, justify="right", no_wrap=True)
        for arm, a in res["arms"].items():
            m = a[metric]
            unknown = f"unpriced ({a['unpriced_queries']} q)" if a.get("unpriced_queries") else "-"
            money = lambda v: unknown if v is None else usd(v)  # noqa: E731
            cost.add_row(arm, labels[a["variant"]], f"{a['queries']:,}", money(m["mean"]), money(m["p50"]), money(m["p95"]))
        return cost
    cost, legend = keyed_labels((a["variant"] for a in res["arms"].values()), build, "V")
    ran = Table(title="latency and failures", pad_edge=False, collapse_padding=True)
    ran.add_column("arm")
    for c in ("latency p50", "p95", "error", "timeout", "retry", "retry waste"):
        ran.add_column(c, justify="right", no_wrap=True)
    for arm, a in res["arms"].items():
        lat = a["latency_ms"]
        ran.add_row(arm, ms(lat["p50"]), ms(lat["p95"]), pct(a["error_rate"]), pct(a["timeout_rate"]),
                    pct(a["retry_rate"]), usd(a["retry_waste_usd"]))
    return Group(cost, *legend), ran, quality_arm_table(res)


def quality_arm_table(res: dict) -> Table:
    """Each arm's answer quality: answers scored, mean groundedness, share with an invalid citation, share
    that refused, users' mean feedback (-1..1), the judge's mean score and faithfulness; "-" where there is
    no data."""
    t = Table(title="answer quality", pad_edge=False, collapse_padding=True)
    t.add_column("arm")
    for c in ("scored", "grounded", "bad cites", "refused", "feedback", "judge", "faithful"):
        t.add_column(c, justify="right", no_wrap=True)
    pct = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    for arm, a in res["arms"].items():
        q = a.get("quality") or {}
        fb = q.get("feedback_score")
        t.add_row(arm, f"{q.get('scored', 0):,}", pct(q.get("groundedness")), pct(q.get("invalid_citation_rate")),
                  pct(q.get("refusal_rate")), "-" if fb is None else f"{fb:+.2f}", pct(q.get("judge_score")),
                  pct(q.get("judge_faithfulness")))
    return t


def experiment_metrics_table(res: dict) -> Table:
    """`rag experiment compare`'s primary metric and guardrails: treatment - control (t - c), its interval,
    the metric's share of alpha, status (80 columns)."""
    a = res["analysis"]
    kind = {"sequential": "anytime-valid", "hybrid": "hybrid", "fixed": "fixed-horizon"}[a["method"]]
    t = Table(title=f"{a['method']} ({kind}; now {a['phase']}), alpha {a['alpha']:g}, "
                    f"N_tune {a['expected_queries']:,}", pad_edge=False, collapse_padding=True)
    for c in ("metric", "role", "alpha", "t - c", "interval", "status"):
        t.add_column(c, justify="left" if c in ("metric", "role", "status") else "right", no_wrap=c == "metric")
    short = {"no difference established": "unclear", "not enough data": "too few", "cost unknown (unpriced queries)": "unpriced"}
    for name, m in res["metrics"].items():
        u = m["unit"]
        interval = "-" if m["low"] is None else f"[{fmt(m['low'], u)}, {fmt(m['high'], u)}]"
        t.add_row(name, m["role"], f"{m['alpha']:.3g}", "-" if m["diff"] is None else fmt(m["diff"], u), interval,
                  short.get(m["status"], m["status"]))
    return t


def audit_line(a: dict) -> str:
    """The ledger's own state in one line under a report: orphans, unknown attempts, losses."""
    line = (f"ledger: {a['orphan_stage_rows']} stage rows without a query row ({a['orphan_queries']} queries, "
            f"{usd(a['orphan_cost_usd'])}); {a['unknown_attempts']} LLM attempts unknown (possibly billed, "
            f"{usd(a['unknown_attempts_cost_usd'])} at input estimate); {a['quarantined_rows']} rows quarantined, "
            f"{a['spilled_rows']} spilled ({a['replayed_rows']} replayed), {a['lost_rows']} lost")
    if a.get("totals_backlog_queries"):
        line += f"; totals catching up ({a['totals_backlog_queries']:,} queries to fold in)"
    if a.get("totals_refolding"):  # a migration asked for every query to be folded again
        line += ("; totals being recomputed after an upgrade, reports partial until a writer (`rag serve`, "
                 "`rag ask`) finishes: `rag report --rebuild-totals` does it now")
    if a.get("totals_stale"):
        line += f"; totals may be behind ({a['totals_stale']}): run `rag report --rebuild-totals`"
    return line


def timeline_table(res: dict) -> Table:
    """`rag experiment compare --over-time`: the primary metric at the end of each hour or day, cumulative
    (80 columns): queries so far, treatment - control, its interval, the verdict then."""
    s, primary = res["over_time"], res["analysis"]["primary_metric"]
    unit = res["metrics"][primary]["unit"]
    t = Table(title=f"{primary} over time (by {s['every']}, cumulative)", pad_edge=False, collapse_padding=True)
    t.add_column(s["every"] + " (UTC)", no_wrap=True)
    for c in ("queries", "t - c", "interval", "verdict"):
        t.add_column(c, justify="left" if c == "verdict" else "right", no_wrap=c != "interval")
    m = s["metrics"][primary]
    for i, at in enumerate(s["at"]):
        when = at[5:13].replace("T", " ") + ":00" if s["every"] == "hour" else at[:10]
        n = s["queries"]["control"][i] + s["queries"]["treatment"][i]
        interval = "-" if m["low"][i] is None else f"[{fmt(m['low'][i], unit)}, {fmt(m['high'][i], unit)}]"
        t.add_row(when, f"{n:,}", "-" if m["diff"][i] is None else fmt(m["diff"][i], unit), interval, s["verdict"][i])
    return t
