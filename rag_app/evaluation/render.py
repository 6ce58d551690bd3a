"""Tables for `rag eval` budgets and `rag eval-compare` (rich), kept out of cli.py."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table


def ci(m: dict | None) -> str:
    if not m or m.get("mean") is None:
        return "-"
    return f"{m['mean']:.3f} [{m['ci95_low']:.3f},{m['ci95_high']:.3f}]"


def diff(d: dict | None) -> str:
    if not d or d.get("diff") is None:
        return "-"
    mark = {"better": " +", "worse": " -"}.get(d["verdict"], "")
    return f"{d['diff']:+.3f} [{d['ci95_low']:+.3f},{d['ci95_high']:+.3f}]{mark}"


def budget_table(result: dict) -> Table:
    """Recall within each context-token budget, one row per (config, task, budget): 80 columns whatever
    the number of budgets."""
    budgets = result["budgets"]
    t = Table(title=f"recall within context-token budgets, 95% bootstrap CI ({result['split']}, "
                    f"{result['questions']} questions; crossing chunk cut to the tokens left)",
              pad_edge=False, collapse_padding=True)
    t.add_column("config", overflow="fold", max_width=22)
    t.add_column("task", overflow="fold", max_width=14)
    for c in ("n", "budget", "recall [95% CI]", "tokens"):
        t.add_column(c, justify="right", no_wrap=True)

    def rows(label, task, m):
        n = str(m["recall@5"]["n"]) if "recall@5" in m else "-"
        t.add_row(label, task, n, "top 5", ci(m.get("recall@5")), "")
        for b in budgets:
            t.add_row("", "", "", f"{b:,}", ci(m.get(f"recall_within_{b}")),
                      f"{m.get(f'context_tokens_within_{b}') or 0:,.0f}")

    for r in result["results"]:
        if r.get("budgets"):
            rows(f"{r['chunker']}/{r['retriever']}", "all", r["budgets"])
    for r in result["by_task"]:
        if r.get("budgets"):
            rows(f"{r['chunker']}/{r['retriever']}", r["task"], r["budgets"])
    return t


def diff_table(title: str, diffs: dict[str, dict], by_task: dict[str, dict[str, dict]]) -> Table:
    """new - base per metric and task, one row each (80 columns whatever the number of metrics)."""
    t = Table(title=title + " (new - base, paired bootstrap 95% CI; + / - when the CI excludes 0)",
              pad_edge=False, collapse_padding=True)
    t.add_column("task", overflow="fold", max_width=16)
    t.add_column("metric", overflow="fold", max_width=24)
    t.add_column("difference [95% CI]", justify="right", no_wrap=True)
    for task, d in (("all", diffs), *by_task.items()):
        for i, m in enumerate(diffs):
            t.add_row(task if i == 0 else "", m, diff(d.get(m)))
    return t


def print_budgets(result: dict, console: Console) -> None:
    console.print(budget_table(result))
    for c in result.get("paired_vs_first", []):
        console.print(diff_table(f"{c['new']} vs {c['base']}", c["diff"], c["diff_by_task"]))
