"""A missing, deleted or damaged store: one line naming the file and how to rebuild, on `rag ask`
and over HTTP (a 409, never a 500 or an empty answer). Real Edge store built from the fixture laws."""
from __future__ import annotations

import json
import shutil

import httpx
import pytest
from typer.testing import CliRunner

from rag_app.app import RagApp
from rag_app.cli.main import app as cli
from tests.conftest import LAWS, make_settings
from tests.integration.test_service import Server

LAW = LAWS / "社会法/劳动法(2018-12-29).md"
REBUILD = "`rag ingest --rebuild PATH`"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    with RagApp(make_settings(root)) as app:
        assert app.ingest([LAW]).outcomes[0].status == "written"
    return root / "data"


def _rewrite(path, edit):
    meta = json.loads(path.read_text(encoding="utf-8"))
    edit(meta)
    path.write_text(json.dumps(meta), encoding="utf-8")


# damage -> (what to do to RAG_DATA_DIR, the file the error must name, the fix it must give)
DAMAGE = {
    "store deleted": (lambda d: shutil.rmtree(d / "edge"), "edge/legal/collection.json", "`rag ingest PATH`"),
    "shard deleted": (lambda d: shutil.rmtree(d / "edge/legal/shard"), "edge/legal/shard", REBUILD),
    "segments deleted": (lambda d: shutil.rmtree(d / "edge/legal/shard/segments"), "edge/legal/shard", REBUILD),
    "shard config junk": (lambda d: (d / "edge/legal/shard/edge_config.json").write_text("junk"),
                          "edge/legal/shard", REBUILD),
    "metadata not JSON": (lambda d: (d / "edge/legal/collection.json").write_text("garbage{"),
                          "edge/legal/collection.json", REBUILD),
    "metadata a list": (lambda d: (d / "edge/legal/collection.json").write_text("[1, 2]"),
                        "edge/legal/collection.json", REBUILD),
    "metadata empty object": (lambda d: (d / "edge/legal/collection.json").write_text("{}"),
                              "edge/legal/collection.json", REBUILD),
    "metadata wrong types": (lambda d: _rewrite(d / "edge/legal/collection.json",
                                                lambda m: m.update(dense_enabled="false")),
                             "edge/legal/collection.json", REBUILD),
}


@pytest.fixture(params=list(DAMAGE))
def damaged(request, built, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(built, data)
    damage, names, fix = DAMAGE[request.param]
    damage(data)
    return data, names, fix


def test_rag_ask_on_a_damaged_store_says_which_file_and_how_to_rebuild(damaged):
    data, names, fix = damaged
    result = CliRunner().invoke(cli, ["ask", "劳动合同的期限"],
                                env={"RAG_DATA_DIR": str(data), "RAG_RERANK_MODEL": "none"})
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2, result.output
    error = " ".join(ln for ln in lines if not ln.startswith("warning"))
    assert error.startswith("error: ") and "Traceback" not in result.output
    assert str(data / names) in error and fix in error


def test_the_service_answers_a_damaged_store_with_a_409_naming_the_file(damaged):
    data, names, fix = damaged
    with Server(make_settings(data.parent, rerank_model=None)) as url:
        r = httpx.post(f"{url}/v1/ask", json={"question": "劳动合同的期限"}, timeout=120)
    assert r.status_code == 409, r.text
    detail = r.json()["detail"]
    assert f"RAG_DATA_DIR/{names}" in detail and fix in detail
    assert str(data) not in detail  # never the server's layout


def test_the_rebuild_the_error_names_brings_the_answers_back(built, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(built, data)
    (data / "edge/legal/collection.json").write_text("garbage{")
    with RagApp(make_settings(tmp_path)) as app:
        assert app.ingest([LAW], rebuild=True).outcomes[0].status == "written"
        answer = app.ask("劳动合同的期限")
    assert answer.citations
