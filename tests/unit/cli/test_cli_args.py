"""Flags typer's types cannot check (rag_app/cli/args.py): a bad one is one line naming the flag, exit 2, before
any work. Each row once was a traceback, a wrong answer (r@0 1.000) or silent (--limit -1, --since notadate)."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_app.cli.main import app
from rag_app.cli.args import export_format, output_path, positive_ints
from rag_app.core.errors import RagError

EVAL = ["eval", "--qa", "qa.jsonl", "--corpus", "."]
COMPARE = ["eval-compare", "a.jsonl", "b.jsonl", "--qa", "qa.jsonl"]

# (command line, what the one line must start with after "error: ")
CASES = [
    ([*EVAL, "--k", "abc"], "--k must be comma-separated whole numbers"),
    ([*EVAL, "--k", "0"], "--k must be"),
    ([*EVAL, "--limit", "-1"], "--limit must be at least 1"),
    ([*EVAL, "--limit", "0"], "--limit must be at least 1"),
    ([*EVAL, "--out", "missing/dir/e.csv"], "--out missing/dir/e.csv: folder missing/dir does not exist"),
    ([*EVAL, "--runs", "missing/r.jsonl"], "--runs missing/r.jsonl: folder missing does not exist"),
    ([*EVAL, "--out", "e.xlsx"], "--out e.xlsx: name a .json or .csv file"),  # it wrote JSON into e.xlsx
    ([*COMPARE, "--out", "missing/x.json"], "--out missing/x.json: folder missing does not exist"),
    ([*COMPARE, "--k", "abc"], "--k must be"),
    (["chunks", "stats", "--bins", "0"], "--bins must be at least 1"),
    (["chunks", "stats", "--bins", "-3"], "--bins must be at least 1"),
    (["chunks", "stats", "--png", "missing/x.png"], "--png missing/x.png: folder missing does not exist"),
    (["reprice", "--since", "notadate"], "--since 'notadate' is not a date/time"),
    (["report", "--format", "csv", "--out", "missing/dir/x.csv"], "--out missing/dir/x.csv: folder"),
    (["report", "--format", "csv", "--out", "."], "--out .: is a folder"),
    (["experiment", "replay", "x", "--qa", "qa.jsonl", "--corpus", ".", "--limit", "0"], "--limit must be at least 1"),
]


@pytest.mark.parametrize("args,says", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_bad_flag_is_one_line_before_any_work(args, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "qa.jsonl").write_text('{"question": "q", "gold": []}\n', encoding="utf-8")
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {says}"), lines[0]
    assert not (tmp_path / "data").exists()  # nothing was opened, ingested or evaluated first


@pytest.mark.parametrize("text,want", [("1,5,10", [1, 5, 10]), (" 3 ", [3]), ("5,", [5])])
def test_positive_ints_reads_lists(text, want):
    assert positive_ints("--k", text) == want


@pytest.mark.parametrize("text", ["", "abc", "0", "1,-2", "1.5"])
def test_positive_ints_refuses(text):
    with pytest.raises(RagError, match="^--k must be"):
        positive_ints("--k", text)


def test_an_empty_budget_list_stays_allowed():
    assert positive_ints("--budgets", "", allow_empty=True) == []


def test_output_path_accepts_a_new_file_in_an_existing_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert output_path("--out", Path("e.csv")) == Path("e.csv")
    assert output_path("--out", tmp_path / "e.csv") == tmp_path / "e.csv"
    assert output_path("--out", None) is None


@pytest.mark.parametrize("fmt,out,want", [
    (None, None, "table"), (None, "spend.csv", "csv"), (None, "spend.JSON", "json"), (None, "spend.txt", "table"),
    ("table", "spend.csv", "table"),  # asked for: kept
])
def test_the_export_format_follows_the_out_extension_unless_given(fmt, out, want):
    assert export_format(fmt, Path(out) if out else None) == want


def test_report_out_csv_writes_csv_not_a_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    from tracing.ledger import Ledger

    (tmp_path / "data").mkdir()
    Ledger.open(tmp_path / "data" / "ledger.sqlite").close()
    result = CliRunner().invoke(app, ["report", "--out", "spend.csv"])
    assert result.exit_code == 0, result.output
    assert "│" not in (tmp_path / "spend.csv").read_text(encoding="utf-8")  # no box-drawn table in a .csv


def test_the_eval_csv_writes_nested_cells_as_json(tmp_path):
    import csv
    import json

    from rag_app.cli.evaluate import _write_eval

    path = tmp_path / "e.csv"
    _write_eval({"results": [{"chunker": "legal", "recall@1": 0.64, "budgets": {"recall@1": {"mean": 0.71}}}]}, path)
    [row] = list(csv.DictReader(path.open(encoding="utf-8")))
    assert json.loads(row["budgets"]) == {"recall@1": {"mean": 0.71}}  # Python's repr had single quotes
