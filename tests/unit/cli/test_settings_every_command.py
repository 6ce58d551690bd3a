"""One settings loader for every command (rag_app/config/settings.py load_settings, called by the CLI's callback
before any command runs): a bad value is one line naming the variable and what it accepts, exit 2; an
unknown RAG_* name is a warning naming the closest real one. The commands are read from the CLI itself,
so a command added later is covered without editing this file."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from rag_app.cli.main import app
from rag_app.config.settings import unknown_setting_warnings
from tests.conftest import HANG_S, REPO


def command_paths(cmd=None, prefix=()) -> list[tuple[str, ...]]:
    """Every command a user can type (`ask`, `experiment compare`, ...), from the CLI's click tree."""
    cmd = cmd or typer.main.get_command(app)
    if not hasattr(cmd, "commands"):  # typer vendors click: a group is what has subcommands
        return [prefix]
    return [p for name, sub in sorted(cmd.commands.items()) for p in command_paths(sub, (*prefix, name))]


def test_the_commands_are_found():
    paths = command_paths()
    assert {("ask",), ("ingest",), ("report",), ("serve",), ("experiment", "compare"), ("chunks", "stats")} <= set(paths)


# (variable, bad value, what the line must say it accepts)
BAD = [("RAG_CONTEXT_TOKENS", "abc", "valid integer"),
       ("RAG_RRF_K", "-1", "greater than or equal to 0"),
       ("QDRANT_URL", "notaurl", "http(s) URL"),
       ("RAG_RETRIEVER", "sparse", "'hybrid', 'dense' or 'bm25'"),
       ("RAG_LLM_STREAM", "maybe", "valid boolean")]


@pytest.mark.parametrize("path", command_paths(), ids=" ".join)
@pytest.mark.parametrize("name,value,accepts", BAD, ids=[b[0] for b in BAD])
def test_a_bad_value_stops_every_command_in_one_line(path, name, value, accepts, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    monkeypatch.setenv(name, value)
    # The callback validates before the command parses its own arguments, so no arguments are needed:
    # the settings line comes first, whatever the command would have asked for.
    result = CliRunner().invoke(app, list(path))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: environment: {name}: ") and accepts in lines[0]
    assert value in lines[0] and not os.path.exists(tmp_path / ".rag")  # it stopped before any work


def test_an_unknown_name_in_dotenv_is_named_too(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("RAG_TOP_KK=5\nRAG_COLLECTION=legal\nRAG_ZZZZZZ=1\n", encoding="utf-8")
    assert unknown_setting_warnings({}, env_file) == [
        "RAG_TOP_KK is not a setting and is ignored; did you mean RAG_TOP_K?",
        "RAG_ZZZZZZ is not a setting and is ignored; see .env.example for the settings"]


def test_a_command_warns_about_an_unknown_name_once_and_still_runs(tmp_path):
    """As a user sees it: a real process (the warning goes through logging set up by the CLI)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "QDRANT_"))}
    env.update({"PYTHONPATH": str(REPO), "RAG_CONTEXT_TOKEN": "800"})
    proc = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "prices", "gpt-4o-mini", "--json"], cwd=tmp_path,
                          env=env, capture_output=True, check=False, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    warning = "warning: RAG_CONTEXT_TOKEN is not a setting and is ignored; did you mean RAG_CONTEXT_TOKENS?"
    assert proc.stderr.splitlines().count(warning) == 1, proc.stderr
