"""Every table `rag` prints fits 80 columns and never wraps or cuts a model, stage, variant, user or key name: a
name too long for its table is a short key (M1, V1, ...) spelled out in a legend below it. Each command runs
as a user runs it (a process, COLUMNS=80) on one ledger holding long names everywhere."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_S, LAWS
from tests.fakes.openai_server import FakeOpenAI

LONG_MODEL = "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"  # 38 characters: wrapped over three lines before
VARIANT = "cheaper-rerank-variant"
STAGES = ("embed_query", "retrieve", "rerank", "generate")


def rag(args: list[str], env: dict) -> str:
    proc = subprocess.run([sys.executable, "-m", "rag_app.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode in (0, 1), f"rag {args}: {proc.stderr[-2000:]}"  # `prices check` exits 1 on unpriced
    return proc.stdout


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> dict[str, str]:
    """What each command prints, on a ledger with an LLM answer from a long-named model, an extractive one,
    a split experiment whose treatment has a long name, a key and a budget with long names."""
    from tests.unit.experiments.test_timeline import write_experiment

    root = tmp_path_factory.mktemp("tables")
    (root / "exp.json").write_text(json.dumps({"variants": {VARIANT: {"top_n": 3}}, "experiments": {
        "rerank-cost-cut": {"control": "default", "treatment": VARIANT, "rollout_pct": 50, "seed": "s"}}}))
    (root / "budgets.json").write_text(json.dumps({"budgets": [{"variant": VARIANT, "period": "month", "limit_usd": 100}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "QDRANT_"))}
    env.update({"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "HF_HUB_OFFLINE": "1", "COLUMNS": "80",
                "RAG_DATA_DIR": str(root / "data"), "RAG_EMBED_MODEL": EMBEDDER,
                "RAG_EXPERIMENTS_FILE": str(root / "exp.json"), "RAG_BUDGETS_FILE": str(root / "budgets.json")})
    out = {}
    rag(["ingest", str(LAWS)], env)
    out["ask extractive"] = rag(["ask", "一人有限责任公司是什么？"], env)
    with FakeOpenAI() as llm:
        out["ask llm"] = rag(["ask", "董事会由几人组成？"], {**env, "OPENAI_BASE_URL": llm.base_url,
                                                              "OPENAI_API_KEY": "sk-local", "RAG_LLM_MODEL": LONG_MODEL})
    write_experiment(root / "data" / "ledger.sqlite", exp="rerank-cost-cut", variants=("default", VARIANT), hours=12,
                     ctrl_cost=150_000, treat_cost=100_000, refusals=True)  # refused and faithful columns filled
    judge_run(root / "data" / "ledger.sqlite")  # the eval column holds money
    rag(["keys", "create", "--name", "analytics-team-readonly-key", "--user", "a-rather-long-user-name"], env)
    for args in (["report"], ["report", "--last", "3"], *(["report", "--by", d] for d in
                                                          ("user", "key", "variant", "model", "day", "stage")),
                 ["budgets"], ["prices", LONG_MODEL], ["prices", "gpt-4o-mini"], ["prices", "check"],
                 ["experiment", "compare", "rerank-cost-cut"], ["experiment", "compare", "rerank-cost-cut", "--over-time"],
                 ["keys", "list"], ["keys", "audit"], ["chunks", "stats"]):
        out[" ".join(args)] = rag(args, env)
    return out


def judge_run(path) -> None:
    """A judge run grading the experiment's first answer, through the real writer, with a rewrite stage on
    that answer: evaluation spend beside the answers' and a stage no fixed list names."""
    from rag_app.core.usage import judge_run_id
    from tracing.ledger import LedgerWriter

    w = LedgerWriter(path)
    at = "2026-03-01T00:00:30.000+00:00"
    w.put("queries", {"query_id": judge_run_id("rerank-cost-cut-q00001"), "kind": "judge", "status": "ok",
                      "started_at": at, "variant": "default", "experiment": "rerank-cost-cut"})
    for qid, stage, cost in ((judge_run_id("rerank-cost-cut-q00001"), "judge", 1_234_567),
                             ("rerank-cost-cut-q00001", "rewrite", 27_000)):
        w.put("stage_calls", {"query_id": qid, "stage": stage, "status": "ok", "model": LONG_MODEL, "input_tokens": 900,
                              "output_tokens": 30, "cost_nano_usd": cost, "price_source": "override", "started_at": at})
    assert w.flush(30)
    w.close()


def cut_names(text: str, names: list[str]) -> list[tuple[str, str]]:
    """(name, line) where a line holds the start of a name but not all of it, at the end of a table cell or
    of the line (the name went on on the next line, or was cut with an ellipsis)."""
    found = []
    for line in text.splitlines():
        for name in names:
            if name in line:
                continue
            for k in range(max(5, len(name) // 3), len(name)):
                if re.search(re.escape(name[:k]) + r"…?\s*(│|┃|$)", line):
                    found.append((name, line))
                    break
    return found


BOX = re.compile(r"[│┃┏┓┗┛┡┩└┘━─]")
BOXLESS = ("budgets", "keys list", "keys audit")  # plain columns, no borders


def table_lines(command: str, text: str) -> list[str]:
    """The lines of the tables a command prints and their legends (a message line of prose, kept on one line
    on purpose so it can be searched, is not a table)."""
    return [line for line in text.splitlines()
            if command in BOXLESS or BOX.search(line) or re.match(r"^[A-Z]\d+ = ", line)]


NAMES = [LONG_MODEL, EMBEDDER, "BAAI/bge-reranker-base", "qdrant:bm25+rescore(e5-onnx)", "gpt-4o-mini", VARIANT,
         "analytics-team-readonly-key", "a-rather-long-user-name", f"variant={VARIANT} month", *STAGES]


def test_every_table_fits_80_columns_without_wrapping_a_name(printed):
    assert len(printed) == 19
    for command, text in printed.items():
        assert text.strip(), command
        wide = [line for line in table_lines(command, text) if len(line) > 80]
        assert not wide, f"rag {command}:\n" + "\n".join(wide)
        assert not cut_names(text, NAMES), f"rag {command}: {cut_names(text, NAMES)}\n{text}"
        # every key a table uses is spelled out below it, whole
        for key in set(re.findall(r"[│ ]([MVNBWCUK]\d{1,2})[ │]", text)):
            assert re.search(rf"^{key} = \S", text, flags=re.MULTILINE), f"rag {command}: {key} has no legend\n{text}"


def test_the_long_names_are_keyed_and_spelled_out(printed):
    ask = printed["ask llm"]
    assert f"= {LONG_MODEL}" in ask and f"= {EMBEDDER}" in ask  # both too long for the stage table
    assert "gpt-4o-mini" not in ask or "= gpt-4o-mini" not in ask  # a short name stays in its column
    for stage in STAGES:  # stage names are never keyed
        assert re.search(rf"^│{stage}\s", ask, flags=re.MULTILINE), stage
    assert f"= {LONG_MODEL}" in printed["report --by model"]
    assert re.search(rf"│treatment │{VARIANT} ", printed["experiment compare rerank-cost-cut"])  # fits: whole, in place
    assert "= analytics-team-readonly-key" in printed["keys list"] and f"= variant={VARIANT} month" in printed["budgets"]
    assert f"{LONG_MODEL}" in printed["prices check"]


def test_the_wider_tables_still_fit_with_their_evaluation_stage_and_quality_columns(printed):
    """Evaluation spend (its own column), a stage added later and the answers' refusals and the judge's
    faithfulness (their own columns and guardrails) are in the tables that fit 80 columns above."""
    for dim in ("day", "variant", "model"):
        assert "$0.00123" in printed[f"report --by {dim}"], dim  # the judge run's cost, in the eval column
    assert re.search(r"^│(rewrite|judge)\s", printed["report --by stage"], flags=re.MULTILINE)  # whole, never keyed
    compare = printed["experiment compare rerank-cost-cut"]
    assert "refused" in compare and "faithful" in compare
    assert "refusal_rate" in compare and "judge_faithfulness" in compare  # guardrails, in the metrics table
