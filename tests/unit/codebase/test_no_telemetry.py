"""onnxruntime telemetry is off in every process this package starts (the parse worker included).

onnxruntime's 1DS telemetry writes a persistent device id and an event database under
$HOME/.cache/Microsoft/DeveloperTools/.onnxruntime the first time a session is created, unless
ORT_DISABLE_TELEMETRY=1 is set before it initialises. The probe creates a real session (a one-node
ONNX model) in the parent and in a forkserver child, with HOME pointed at an empty folder.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import HANG_S, REPO

SCRIPT = """
import multiprocessing as mp, os
import rag_app

def session():
    import onnxruntime as ort
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    ort.InferenceSession(helper.make_model(graph).SerializeToString())

def child(q):
    session()
    q.put(os.environ.get("ORT_DISABLE_TELEMETRY"))

if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    in_child = q.get(timeout=600)  # a hang guard (tests/conftest.py HANG_S)
    p.join()
    session()
    print(os.environ.get("ORT_DISABLE_TELEMETRY"), in_child)
"""


def test_onnxruntime_telemetry_is_off_after_importing_the_package(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    (tmp_path / "probe.py").write_text(SCRIPT)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env.update(PYTHONPATH=str(REPO), HOME=str(home))
    out = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, capture_output=True, text=True,
                         timeout=HANG_S, cwd=tmp_path)
    assert out.stdout.split() == ["1", "1"], out.stderr
    written = [str(p.relative_to(home)) for p in home.rglob("*")]
    assert not any(".onnxruntime" in p for p in written), written  # no device id, no event database
