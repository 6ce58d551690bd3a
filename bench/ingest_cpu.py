"""CPU time (user + sys) of `rag ingest` of the whole legal_zh corpus into a fresh data dir, counting
every process it starts: the parse workers are children of multiprocessing's forkserver, which the
CLI never waits for, so `/usr/bin/time` (RUSAGE_CHILDREN of the CLI alone) misses them. This script
makes itself the "child subreaper" (Linux prctl), so the orphaned forkserver is reparented here and
waited for; then RUSAGE_CHILDREN holds the whole tree. A bare interpreter's start is timed beside it
as the anchor (the machine is shared: compare ratios across runs).

    .venv/bin/python bench/ingest_cpu.py [--rescore-vectors query] [-- extra ingest args]

The default `--rescore-vectors query` leaves out ingest's embedding pass (issue 20 item 4 counts
parsing and BM25 separately from it).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, machine_line  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _reap_all() -> None:
    """Wait for every descendant reparented here (the forkserver outlives the CLI by a moment)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def tree_cpu(cmd: list[str], env: dict[str, str], cwd: str | None = None) -> tuple[float, float, int]:
    """(CPU of the whole tree, CPU of the command's own process and the children it waited for, exit code)."""
    before = _children_cpu()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, own = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    _reap_all()
    return _children_cpu() - before, own.ru_utime + own.ru_stime, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rescore-vectors", default="query")
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    print(machine_line())
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: this measurement needs Linux")
    root = str(Path(__file__).resolve().parents[1])
    bare, _, _ = tree_cpu([sys.executable, "-c", "pass"], dict(os.environ))
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "PYTHONPATH": root, "RAG_DATA_DIR": d, "RAG_RESCORE_VECTORS": args.rescore_vectors}
        cpu, own, rc = tree_cpu([sys.executable, "-m", "rag_app.cli.main", "ingest", str(CORPUS_ZH), *args.extra], env,
                                cwd=root)  # `python -m` puts the working directory first on sys.path
    print(f"ingest {CORPUS_ZH.parent.name}: {cpu:.2f} s CPU (user+sys, whole process tree; the CLI's process "
          f"{own:.2f} s, the parse workers and their forkserver {cpu - own:.2f} s), exit {rc}; "
          f"bare interpreter {bare:.3f} s; ratio {cpu / bare:.0f}x")


if __name__ == "__main__":
    main()
