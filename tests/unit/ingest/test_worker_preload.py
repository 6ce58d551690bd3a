"""The parse workers' forkserver preloads what every file's child would otherwise load again."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_forkserver_preload_holds_jiebas_dictionary_and_the_cl100k_table():
    code = ("import rag_app.ingest.worker_preload, rag_app.text.tokens as t, rag_app.text.sparse as s, jieba; "
            "print(t.encoding.cache_info().currsize, jieba.dt.initialized)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["1", "True"]
