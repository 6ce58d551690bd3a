"""What cutting the crossing chunk (instead of dropping it) buys: one `rag eval --runs` file scored
twice on the same rankings, with its chunk texts (the rule since 0.3.0: the chunk that would cross the
budget counts for its first tokens, as the context packer cuts it) and without them (the old rule:
dropped), paired bootstrap 95% CIs as `rag eval-compare` prints them.

    .venv/bin/python bench/budget_rule_gain.py runs_tune.jsonl:legal/bm25+rescore \
        --qa ../shared/data/legal_zh/qa_dev.jsonl --split tune
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_app.evaluation.qa import load_qa  # noqa: E402
from rag_app.evaluation.scoring import paired, per_question, pick_run  # noqa: E402
from rag_app.evaluation.split import select_split  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", help="FILE or FILE:chunker/retriever from `rag eval --runs` (0.3.0 or later)")
    ap.add_argument("--qa", type=Path, required=True)
    ap.add_argument("--split", default=None, help="tune | validate")
    ap.add_argument("--budgets", default="500,1000,2500")
    a = ap.parse_args()
    path, _, name = a.runs.partition(":")
    _, run = pick_run(Path(path), name or None)
    if not any(r.text for rk in run.values() for r in rk):
        sys.exit(f"{path}: no chunk texts in it (written before 0.3.0); re-run `rag eval --runs`")
    qs = [q for q in select_split(load_qa(a.qa), a.split) if q.id in run]
    budgets = [int(b) for b in a.budgets.split(",")]
    cut = [run[q.id] for q in qs]
    dropped = [[replace(r, text=None) for r in rk] for rk in cut]
    old, new = per_question(qs, dropped, [5], budgets), per_question(qs, cut, [5], budgets)
    print(f"{path}:{name or ''} on {len(qs)} questions (split: {a.split or 'all'}); cut - dropped, paired 95% CI")
    for task in (None, *sorted({q.task for q in qs})):
        d = paired(qs, old, new, task)
        cells = [f"{b}: {d[f'recall_within_{b}']['diff']:+.3f} [{d[f'recall_within_{b}']['ci95_low']:+.3f}, "
                 f"{d[f'recall_within_{b}']['ci95_high']:+.3f}]" for b in budgets]
        print(f"  {task or 'all':<26} " + "  ".join(cells))
    print("  mean recall within: " + "  ".join(
        f"{b}: {sum(old[f'recall_within_{b}']) / len(qs):.3f} -> {sum(new[f'recall_within_{b}']) / len(qs):.3f}"
        for b in budgets))


if __name__ == "__main__":
    main()
