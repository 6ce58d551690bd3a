"""An unreachable Qdrant server (QDRANT_URL) is one line naming QDRANT_URL, exit 2, where the store is first
opened; it was qdrant-client's 138-line traceback from the first call in `rag ask`, `ingest`, `chunks stats`."""
from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from rag_app.cli.main import app
from rag_app.core.errors import StoreError
from rag_app.store.client import ClientStore


@pytest.fixture
def dead_url():
    """A loopback port bound but never listening: connections are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def test_opening_the_store_names_qdrant_url(dead_url):
    with pytest.raises(StoreError, match=f"QDRANT_URL={dead_url}: Qdrant server unreachable"):
        ClientStore(url=dead_url)


def test_a_command_says_it_in_one_line(dead_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("QDRANT_URL", dead_url)
    result = CliRunner().invoke(app, ["chunks", "stats"])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: QDRANT_URL={dead_url}: ") and "unreachable" in lines[0]
