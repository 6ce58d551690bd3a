"""Start-up CPU (user + sys) of `rag --help` and of the imports under it, beside a bare interpreter's
start, interleaved, median of --n runs each (issue 20 item 6: `rag --help` <= 2x a bare interpreter).

    .venv/bin/python bench/startup_cpu.py [--n 15] [--against OTHER_CHECKOUT]

`rag ...` is run as the console script runs it (`from rag_app.cli.entry import main; main()`): `rag --help`
prints the shipped help without typer; `rag ask --help` goes through typer. `--against` adds
`python -m rag_app.cli.main --help` (typer's help, the entry point before 0.5) run from another checkout (e.g. a
worktree of main), in the same rounds.

Where the time goes, import by import: `python -X importtime -c "$ENTRY" ask --help` with ENTRY below.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from rag_app.cli.entry import main; sys.exit(main())"  # what [project.scripts] runs
ARMS = {
    "bare interpreter": ["-c", "pass"],
    "import typer": ["-c", "import typer"],
    "import typer, rich.console": ["-c", "import typer, rich.console"],
    "import typer, rich.console, typer.rich_utils": ["-c", "import typer, rich.console, typer.rich_utils"],
    "rag --help": ["-c", ENTRY, "--help"],
    "rag (typer's --help)": ["-m", "rag_app.cli.main", "--help"],
    "rag ask --help": ["-c", ENTRY, "ask", "--help"],
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
        arms[f"rag --help ({opts.against})"] = (ARMS["rag (typer's --help)"], opts.against.resolve())
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
