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
