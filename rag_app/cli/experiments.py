"""`rag experiment compare` and `rag experiment replay`: the arms of a gray release, side by side."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from rag_app.cli.args import at_least_one
from rag_app.cli.common import fail, out, progress_bars
from rag_app.core import RagError


def experiment_compare(name: str = typer.Argument(..., help="experiment name in RAG_EXPERIMENTS_FILE"),
                       as_json: bool = typer.Option(False, "--json", help="print JSON"),
                       over_time: bool = typer.Option(False, "--over-time",
                                                      help="also the same comparison at the end of every hour or day"),
                       every: str = typer.Option("auto", help="--over-time's points: auto, hour or day")):
    """Per-arm cost, latency and failure rates, anytime-valid intervals, SRM check and a verdict."""
    from rag_app.experiments import compare_served
    from rag_app.config import load_settings
    from rag_app.present import experiment_arm_tables, experiment_metrics_table, timeline_table, usd
    from rag_app.experiments import ExperimentConfig
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
            res = compare_served(ledger, exp, over_time=every if over_time else None)
    except RagError as e:
        fail(e)
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
    if "over_time" in res:
        out.print(timeline_table(res))
    for ev in res.get("ramp", {}).get("events", []):
        out.print(f"ramp {ev['at'][:16].replace('T', ' ')}: {ev['action']} {ev['from_pct']:g}% -> {ev['to_pct']:g}% ({ev['reason']})")
    if res["prices"] == "repriced":
        out.print(f"costs are re-priced figures ({res['repriced_rows']} stage rows changed by `rag reprice`); "
                  "recorded figures: `rag report`")
    if res["srm"]:
        p = res["srm"]["pvalue"]
        out.print(f"sample ratio check: p = {'n/a' if p is None else f'{p:.3g}'}, "
                  f"{'MISMATCH' if res['srm']['flagged'] else 'ok'}")
    out.print(f"[bold]verdict: {res['verdict']}[/bold] (decided by {res['decided_by']}) — {res['reason']}")


def experiment_replay(name: str = typer.Argument(..., help="experiment name in RAG_EXPERIMENTS_FILE"),
                      qa: Path = typer.Option(..., help="labelled questions (QA JSONL with gold spans)"),
                      corpus: Path = typer.Option(..., help="corpus folder the gold docs are relative to"),
                      limit: Optional[int] = typer.Option(None, help="only the first N questions"),
                      k: int = typer.Option(5, help="recall cut-off"),
                      as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Same labelled questions through both arms: recall@k and cost with paired-bootstrap 95% CIs, verdict."""
    from rag_app.experiments import replay
    from rag_app.config import check_data_dir, load_settings
    from rag_app.present import usd
    from rag_app.evaluation import load_qa
    from rag_app.service import VariantPool

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
        with progress_bars() as progress:
            res = replay(pool, exp, questions, corpus, k=k, progress=progress)
        pool.close()
    except RagError as e:
        fail(e)
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
