"""Start-up CPU (user + sys) of `rag --help` and of the imports under it, beside a bare interpreter's
start, interleaved, median of --n runs each (issue 20 item 6: `rag --help` <= 2x a bare interpreter).

    .venv/bin/python bench/startup_cpu.py [--n 15] [--against OTHER_CHECKOUT]

`--against` adds `rag --help` run from another checkout (e.g. a worktree of main), in the same rounds.

Where the time goes, import by import: `python -X importtime -m rag_app.cli --help`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARMS = {
    "bare interpreter": ["-c", "pass"],
    "import typer": ["-c", "import typer"],
    "import typer, rich.console": ["-c", "import typer, rich.console"],
    "import typer, rich.console, typer.rich_utils": ["-c", "import typer, rich.console, typer.rich_utils"],
    "rag --help": ["-m", "rag_app.cli", "--help"],
    "rag ask --help": ["-m", "rag_app.cli", "ask", "--help"],
}


def cpu_of(args: list[str], root: Path = ROOT) -> float:
    proc = subprocess.Popen([sys.executable, *args], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, used = os.wait4(proc.pid, 0)
    return used.ru_utime + used.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=15)
    ap.add_argument("--against", type=Path, default=None)
    opts = ap.parse_args()
    arms = {name: (args, ROOT) for name, args in ARMS.items()}
    if opts.against is not None:
        arms[f"rag --help ({opts.against})"] = (ARMS["rag --help"], opts.against.resolve())
    runs: dict[str, list[float]] = {k: [] for k in arms}
    for _ in range(opts.n):
        for name, (args, root) in arms.items():
            runs[name].append(cpu_of(args, root))
    bare = statistics.median(runs["bare interpreter"])
    for name, xs in runs.items():
        med = statistics.median(xs)
        print(f"{name:46s} {med * 1000:7.0f} ms CPU  {med / bare:5.1f}x bare")


if __name__ == "__main__":
    main()
