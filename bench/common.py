"""Shared bits of the benchmarks: the corpus location and a stable timer."""
from __future__ import annotations

import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RAG_SHARED_DIR", REPO.parent / "shared"))
CORPUS_ZH = SHARED / "data" / "legal_zh" / "corpus"
QA_ZH = SHARED / "data" / "legal_zh" / "qa_dev.jsonl"


def best_of(fn, repeat: int = 3) -> float:
    """Fastest of `repeat` runs: the least disturbed by other work on a shared machine."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


# the instruction sets int8 GEMMs run on: onnxruntime's e5-onnx pass ran ~2x the tokens per CPU second on
# a CPU with AVX-512 VNNI as on an AVX2-only EPYC (docs/evaluation-and-levers.md), so a figure without
# its CPU cannot be compared with one from another machine; ratios measured in one run can
INT8_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def machine_line(cpuinfo: str | None = None) -> str:
    """One line naming the machine a bench ran on: CPU model, the int8 instruction sets it has, the cores
    this process may use and the load average. `cpuinfo`: /proc/cpuinfo's text (read when None)."""
    import platform

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    flags = set(fields.get("flags", "").split())
    int8 = ",".join(f for f in INT8_FLAGS if f in flags) or "none of " + "/".join(INT8_FLAGS)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"machine: {model}; int8: {int8}; {cores} cores; load {load:.1f}"


def paired_report(questions, default, ranked, budget: int, title: str, label: str = "new",
                  unseen: set[str] | None = None) -> dict:
    """Recall within `budget` and recall@5 of `ranked` against `default` (the same questions), paired with
    bootstrap intervals, overall and by task; with `unseen` (question ids), also split into the questions
    whose first gold is / is not among them, overall and for layperson questions. Printed and returned."""
    from collections import defaultdict

    from rag_app.evaluation.budget import recall_at, recall_within
    from rag_app.evaluation.stats import mean_ci, paired_diff_ci

    base = [recall_within(q, r, budget) for q, r in zip(questions, default)]
    new = [recall_within(q, r, budget) for q, r in zip(questions, ranked)]
    d = paired_diff_ci(base, new)
    r5b = [recall_at(q, r, 5) for q, r in zip(questions, default)]
    r5n = [recall_at(q, r, 5) for q, r in zip(questions, ranked)]
    r5 = paired_diff_ci(r5b, r5n)
    print(f"\n{title}: within {budget} default {mean_ci(base)['mean']:.3f} {label} {mean_ci(new)['mean']:.3f}, "
          f"paired {d['diff']:+.3f} [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]; recall@5 "
          f"{sum(r5b) / len(r5b):.3f} -> {sum(r5n) / len(r5n):.3f}, {r5['diff']:+.3f} [{r5['ci95_low']:+.3f}, "
          f"{r5['ci95_high']:+.3f}]")
    groups = defaultdict(list)
    for i, q in enumerate(questions):
        groups[q.task].append(i)
        if unseen is not None:
            side = "unseen" if q.id in unseen else "seen"
            groups[f"(first gold {side}) all"].append(i)
            if q.task == "layperson_consultation":
                groups[f"(first gold {side}) layperson"].append(i)
    rows = {}
    for task, idx in sorted(groups.items()):
        dt = paired_diff_ci([base[i] for i in idx], [new[i] for i in idx])
        rows[task] = dt
        print(f"  {task[:30]:30} n={len(idx):>3} default {sum(base[i] for i in idx) / len(idx):.3f} "
              f"{label} {sum(new[i] for i in idx) / len(idx):.3f}  {dt['diff']:+.3f} [{dt['ci95_low']:+.3f}, "
              f"{dt['ci95_high']:+.3f}]")
    return {"within": mean_ci(new), "paired": d, "by_task": rows, "recall@5": r5,
            "per_question": {"default": base, label: new}}  # for pooling splits (bench/adapter_cv.py)


def cv_arguments(description: str):
    """The arguments every cross-validation bench takes (the QA file and corpus, the split it chooses on,
    the context budget and the number of folds); the bench adds its own."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--qa", type=Path, default=QA_ZH)
    ap.add_argument("--corpus", type=Path, default=CORPUS_ZH)
    ap.add_argument("--split", default="tune")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--folds", type=int, default=5)
    return ap
