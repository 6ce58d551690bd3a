"""`rag serve` refuses bad setups with ONE line `error: <file>: <field>: <what> — <fix>`, fast,
before it binds a port (real CLI in a subprocess)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rag_app.app import RagApp
from tests.conftest import HANG_S, REPO, make_settings


def serve(tmp_path, env: dict, *args: str) -> tuple[int, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    full.update({"PYTHONPATH": str(REPO), "RAG_DATA_DIR": str(tmp_path / "data"), **env})
    p = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "serve", "--port", "1", *args], cwd=tmp_path,
                       env=full, capture_output=True, text=True, timeout=HANG_S)
    return p.returncode, p.stderr.strip()


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize("exp,field", [
    ({"variants": {"b": {}}, "experiments": {"e": {"control": "default", "treatment": "b", "rollout_pct": 5,
                                                   "seed": 42}}}, "experiments.e.seed"),
    ({"variants": {"b": {"top_n": "five"}}}, "variants.b.top_n"),
])
def test_bad_experiments_file(tmp_path, exp, field):
    f = tmp_path / "exp.json"
    f.write_text(json.dumps(exp))
    code, err = serve(tmp_path, {"RAG_EXPERIMENTS_FILE": str(f)})
    assert code == 2 and f"error: {f}: {field}: " in one_line(err)


@pytest.mark.parametrize("name,value", [("RAG_TOP_N", "five"), ("RAG_PARSE_TIMEOUT_S", "-1"),
                                        ("RAG_MAX_UPLOAD_MB", "0"), ("RAG_PARSE_MAX_MB", "8")])
def test_bad_setting_names_the_variable(tmp_path, name, value):
    code, err = serve(tmp_path, {name: value})
    assert code == 2 and name in one_line(err) and value in err


def test_read_only_data_dir(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        code, err = serve(tmp_path, {"RAG_DATA_DIR": str(ro / "data")})
    finally:
        ro.chmod(0o700)
    assert code == 2 and "RAG_DATA_DIR" in one_line(err) and "not writable" in err


def test_read_only_data_dir_as_a_file(tmp_path):
    (tmp_path / "blocker").write_text("a file where the data dir should be")
    code, err = serve(tmp_path, {"RAG_DATA_DIR": str(tmp_path / "blocker" / "data")})
    assert code == 2 and "RAG_DATA_DIR" in one_line(err) and "not writable" in err


def test_store_locked_by_another_process(tmp_path):
    with RagApp(make_settings(tmp_path)):
        code, err = serve(tmp_path, {})
    assert code == 2 and "is in use by process" in one_line(err)  # names the holder


def test_non_loopback_bind_without_a_token_needs_the_flag(tmp_path):
    code, err = serve(tmp_path, {}, "--host", "0.0.0.0")
    assert code == 2 and "--allow-remote" in one_line(err) and "RAG_API_TOKEN" in err
