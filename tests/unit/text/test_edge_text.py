"""The edge's text rule (rag_app/text/edge_text.py): what no database can store is refused, naming where."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rag_app.text.edge_text import why_not_text
from tests.conftest import HANG_S


@pytest.mark.parametrize("value, says", [("工资\ud800", "U+D800) at character 2"), ("a\x00b", "NUL"),
                                         ("\udcff", "U+DCFF")])
def test_unstorable_text_is_named(value, says):
    assert says in why_not_text(value)


@pytest.mark.parametrize("value", ["工资被拖欠怎么办？", "", "tab\tnewline\n", "emoji 😀 𠀀"])
def test_text_is_text(value):
    assert why_not_text(value) is None


def test_rag_ask_refuses_an_undecodable_argument_in_one_line(tmp_path):
    """argv bytes that are not UTF-8 arrive as lone surrogates: one line naming the argument, exit 2."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(RAG_DATA_DIR=str(tmp_path / "data"), PYTHONUTF8="1")
    out = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "ask", b"\xe5\xb7\xa5\xff\xfe"],
                         env=env, capture_output=True, timeout=HANG_S)
    err = out.stderr.decode("utf-8", "replace").strip()
    assert out.returncode == 2 and len(err.splitlines()) == 1, err
    assert "QUESTION holds a lone surrogate" in err and "Traceback" not in err
