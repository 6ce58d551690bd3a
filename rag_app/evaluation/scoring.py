"""Recall at rank cut-offs and within context-token budgets, overall and per task, with 95%
bootstrap intervals; paired differences between two configurations on the same questions.

Works on plain rankings (lists of hits.Ranked), so a saved runs file (`rag eval --runs`) can be
re-scored or compared later without re-running retrieval (`rag eval-compare`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from rag_app.core import ConfigError
from rag_app.evaluation.budget import recall_at, recall_within, tokens_within
from rag_app.evaluation.hits import Ranked
from rag_app.evaluation.qa import Question
from rag_app.evaluation.stats import mean_ci, paired_diff_ci

DEFAULT_BUDGETS = (500, 1000, 2500)


def per_question(questions: Sequence[Question], rankings: Sequence[Sequence[Ranked]], ks: Sequence[int],
                 budgets: Sequence[int]) -> dict[str, list[float]]:
    """{metric name: one value per question}: recall@k, recall_within_B, context_tokens_within_B."""
    out: dict[str, list[float]] = defaultdict(list)
    for q, ranking in zip(questions, rankings):
        for k in ks:
            out[f"recall@{k}"].append(recall_at(q, ranking, k))
        for b in budgets:
            out[f"recall_within_{b}"].append(recall_within(q, ranking, b))
            out[f"context_tokens_within_{b}"].append(tokens_within(ranking, b))
        out["top5_context_tokens"].append(sum(r.tokens for r in ranking[:5]))
    return dict(out)


def summarize(values: dict[str, list[float]]) -> dict:
    """recall metrics as {mean, ci95_low, ci95_high, n}; token metrics as plain means."""
    out: dict[str, object] = {}
    for name, xs in values.items():
        if name.startswith("recall"):
            out[name] = mean_ci(xs)
        else:
            out[name] = round(sum(xs) / len(xs), 1) if xs else None
    return out


def budget_report(questions: Sequence[Question], rankings: Sequence[Sequence[Ranked]], ks: Sequence[int],
                  budgets: Sequence[int]) -> tuple[dict, dict[str, dict], dict[str, list[float]]]:
    """(overall summary, {task: summary}, per-question values for paired comparisons)."""
    values = per_question(questions, rankings, ks, budgets)
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(questions):
        by_task[q.task].append(i)
    tasks = {t: summarize({m: [xs[i] for i in idx] for m, xs in values.items()}) for t, idx in sorted(by_task.items())}
    return summarize(values), tasks, values


def paired(questions: Sequence[Question], base: dict[str, list[float]], new: dict[str, list[float]],
           task: str | None = None) -> dict[str, dict]:
    """new - base for every recall metric, optionally restricted to one task."""
    idx = [i for i, q in enumerate(questions) if task is None or q.task == task]
    return {m: paired_diff_ci([base[m][i] for i in idx], [new[m][i] for i in idx])
            for m in base if m.startswith("recall") and m in new}


def load_runs(path: Path) -> dict[str, dict[str, list[Ranked]]]:
    """{"chunker/retriever": {qid: ranking}} from a `rag eval --runs` file."""
    runs: dict[str, dict[str, list[Ranked]]] = defaultdict(dict)
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            runs[f"{r['chunker']}/{r['retriever']}"][r["qid"]] = [
                Ranked(x["doc"], int(x["char_start"]), int(x["char_end"]), int(x["tokens"]), float(x["score"]),
                       x.get("text"))
                for x in r["ranking"]]
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path}:{n}: not a runs line ({e!r}); write one with `rag eval --runs FILE`") from e
    return dict(runs)


def pick_run(path: Path, name: str | None) -> tuple[str, dict[str, list[Ranked]]]:
    runs = load_runs(path)
    if not runs:
        raise ConfigError(f"{path}: no runs")
    if name is None:
        if len(runs) > 1:
            raise ConfigError(f"{path} holds {len(runs)} runs ({', '.join(runs)}); pick one with FILE:chunker/retriever")
        name = next(iter(runs))
    if name not in runs:
        raise ConfigError(f"{path}: no run {name!r}; it holds {', '.join(runs)}")
    return name, runs[name]


def compare_runs(questions: Sequence[Question], base: dict[str, list[Ranked]], new: dict[str, list[Ranked]],
                 ks: Sequence[int], budgets: Sequence[int]) -> dict:
    """Both runs scored on the questions both answered; paired differences overall and per task."""
    qs = [q for q in questions if q.id in base and q.id in new]
    if not qs:
        raise ConfigError("the two runs share no question of this QA file/split")
    bvals = per_question(qs, [base[q.id] for q in qs], ks, budgets)
    nvals = per_question(qs, [new[q.id] for q in qs], ks, budgets)
    tasks = sorted({q.task for q in qs})

    def by_task(vals):
        return {t: summarize({m: [x for q, x in zip(qs, xs) if q.task == t] for m, xs in vals.items()}) for t in tasks}

    return {"questions": len(qs), "base": summarize(bvals), "new": summarize(nvals),
            "base_by_task": by_task(bvals), "new_by_task": by_task(nvals),
            "diff": paired(qs, bvals, nvals),
            "diff_by_task": {t: paired(qs, bvals, nvals, t) for t in tasks}}
