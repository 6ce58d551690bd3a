"""What a newcomer meets first: `make demo` on a fresh clone without the shared data runs on the sample
shipped in the repository (tests/fixtures/laws and tests/fixtures/laws_qa.jsonl), and `rag serve` says
where it answers once it does."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import httpx

from tests.conftest import HANG_S, LAWS, REPO, wait_until
from tests.fakes.serve_proc import Serve, serve_env

SAMPLE_QA = REPO / "tests" / "fixtures" / "laws_qa.jsonl"


def make_demo_command(**variables: str) -> tuple[list[str], str]:
    """The commands `make demo` would run (install taken as done), with these make variables."""
    env = {k: v for k, v in os.environ.items() if k != "RAG_SHARED_DIR"}
    proc = subprocess.run(["make", "-n", "-o", "install", "demo", *(f"{k}={v}" for k, v in variables.items())],
                          cwd=REPO, env=env, capture_output=True, text=True, check=True, timeout=HANG_S)
    [line] = [ln for ln in proc.stdout.splitlines() if " demo --corpus " in ln]
    return shlex.split(line), proc.stdout


def test_make_demo_without_shared_data_runs_on_the_sample(tmp_path):
    argv, printed = make_demo_command(SHARED=str(tmp_path / "no-shared"))
    assert argv[1:] == ["demo", "--corpus", "tests/fixtures/laws", "--qa", "tests/fixtures/laws_qa.jsonl"]
    assert "the demo runs on the sample" in printed
    shared = tmp_path / "shared" / "data" / "legal_zh" / "corpus"
    shared.mkdir(parents=True)  # with the shared data beside the clone, that is what it runs on
    assert make_demo_command(SHARED=str(tmp_path / "shared"))[0][3:] == [
        str(shared), "--qa", str(tmp_path / "shared" / "data" / "legal_zh" / "qa_dev.jsonl")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "QDRANT_"))}
    env.update({"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "COLUMNS": "80", "RAG_DATA_DIR": str(tmp_path / "rag"),
                "RAG_EMBED_MODEL": "sentence-transformers/all-MiniLM-L6-v2"})
    proc = subprocess.run([sys.executable, "-m", "rag_app.cli.main", *argv[1:]], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 written, 0 unchanged, 0 failed" in " ".join(proc.stdout.split())
    assert proc.stdout.count("cost of query") == 3 and (tmp_path / "rag" / "ledger.sqlite").exists()


def test_the_sample_is_small_and_its_questions_are_answered_by_its_laws():
    rows = [json.loads(line) for line in SAMPLE_QA.read_text(encoding="utf-8").splitlines()]
    size = SAMPLE_QA.stat().st_size + sum(p.stat().st_size for p in LAWS.rglob("*") if p.is_file())
    assert 10 <= len(rows) <= 20 and size < 300_000
    assert len({r["task"] for r in rows}) == 3  # the demo asks one of each kind
    for r in rows:
        for gold in r["gold"]:
            span = (LAWS / gold["doc"]).read_text(encoding="utf-8")[gold["char_start"]:gold["char_end"]]
            assert "".join(gold["text"].split()) in "".join(span.split()), r["id"]  # its paragraphs, its offsets


def test_rag_serve_prints_its_urls_once_ready(tmp_path):
    with Serve(serve_env(tmp_path / "data", None), tmp_path / "serve.log") as s:
        log = tmp_path / "serve.log"
        wait_until(lambda: "/healthz" in log.read_text(), "the ready lines")
        text = log.read_text()
        for path in ("/dashboard", "/docs", "/healthz"):
            assert re.search(rf"^\s+\S.*\s{re.escape(s.url + path)}$", text, flags=re.MULTILINE), text
            assert httpx.get(s.url + path, timeout=HANG_S).status_code == 200, path
        assert f"rag serve: ready at {s.url}\n" in text


def test_the_ready_lines_name_a_reachable_address():
    from rag_app.cli.serving import ready_banner

    assert ready_banner("0.0.0.0", 8001, False).splitlines()[:2] == [
        "rag serve: ready at http://127.0.0.1:8001 (listening on 0.0.0.0)",
        "  dashboard  http://127.0.0.1:8001/dashboard"]
    assert "http://[::1]:80/docs" in ready_banner("::", 80, False)
    assert "http://[fe80::1]:80/docs" in ready_banner("fe80::1", 80, False)
    assert ready_banner("127.0.0.1", 80, True).splitlines()[-1] == (
        "  API calls need the header Authorization: Bearer <key>")
