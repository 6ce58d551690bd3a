"""`rag eval-compare`: two saved runs, the same questions, paired differences."""
from __future__ import annotations

from pathlib import Path

from rag_app.evaluation.qa import load_qa
from rag_app.evaluation.scoring import compare_runs, pick_run
from rag_app.evaluation.split import SPLIT_RULE, select_split


def _parse(arg: str) -> tuple[Path, str | None]:
    path, _, name = arg.partition(":")
    return Path(path), name or None


def run_compare(base: str, new: str, qa: Path, split: str | None, ks: list[int], budgets: list[int]) -> dict:
    questions = select_split(load_qa(qa), split)
    bname, brun = pick_run(*_parse(base))
    nname, nrun = pick_run(*_parse(new))
    result = compare_runs(questions, brun, nrun, ks, budgets)
    return {"base_run": f"{base.partition(':')[0]}:{bname}", "new_run": f"{new.partition(':')[0]}:{nname}",
            "split": split or "all", "split_rule": SPLIT_RULE, **result}
