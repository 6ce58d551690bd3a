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
    budgets = result["budgets"]
    t = Table(title=f"recall within context-token budgets, 95% bootstrap CI (split: {result['split']}, "
                    f"{result['questions']} questions; crossing chunk cut to the tokens left)")
    for c in ("config", "task", "n", "recall@5", *[f"within {b}" for b in budgets], *[f"tok {b}" for b in budgets]):
        t.add_column(c)

    def row(label, task, m):
        n = m["recall@5"]["n"] if "recall@5" in m else "-"
        t.add_row(label, task, str(n), ci(m.get("recall@5")), *[ci(m.get(f"recall_within_{b}")) for b in budgets],
                  *[f"{m.get(f'context_tokens_within_{b}') or 0:.0f}" for b in budgets])

    for r in result["results"]:
        if r.get("budgets"):
            row(f"{r['chunker']}/{r['retriever']}", "all", r["budgets"])
    for r in result["by_task"]:
        if r.get("budgets"):
            row(f"{r['chunker']}/{r['retriever']}", r["task"], r["budgets"])
    return t


def diff_table(title: str, diffs: dict[str, dict], by_task: dict[str, dict[str, dict]]) -> Table:
    metrics = list(diffs)
    t = Table(title=title + " (new - base, paired bootstrap 95% CI; + / - when the CI excludes 0)")
    t.add_column("task")
    for m in metrics:
        t.add_column(m)
    t.add_row("all", *[diff(diffs[m]) for m in metrics])
    for task, d in by_task.items():
        t.add_row(task, *[diff(d.get(m)) for m in metrics])
    return t


def print_budgets(result: dict, console: Console) -> None:
    wide = Console(width=max(console.width, 200))
    wide.print(budget_table(result))
    for c in result.get("paired_vs_first", []):
        wide.print(diff_table(f"{c['new']} vs {c['base']}", c["diff"], c["diff_by_task"]))
