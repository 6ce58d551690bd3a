"""Every command that works in RAG_DATA_DIR checks it first, as `rag serve` does (config.check_data_dir): an
unusable one is one line naming RAG_DATA_DIR, exit 2; `ask`, `ingest`, `chunks stats` and `eval` were tracebacks."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rag_app.cli.main import app

COMMANDS = [["ask", "what?"], ["ingest", "."], ["chunks", "stats"], ["eval", "--qa", "qa.jsonl", "--corpus", "."],
            ["experiment", "replay", "x", "--qa", "qa.jsonl", "--corpus", "."], ["demo", "--qa", "qa.jsonl"]]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_an_unusable_data_dir_is_one_line(args, kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qa.jsonl").write_text('{"question": "q"}\n', encoding="utf-8")
    blocker = tmp_path / "blocker"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("RAG_DATA_DIR", str(blocker if kind == "a file" else blocker / "data"))
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {blocker}") and "RAG_DATA_DIR: " in lines[0]
