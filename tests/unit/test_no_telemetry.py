"""onnxruntime telemetry is off in every process this package starts (the parse worker included)."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import multiprocessing as mp, os
import rag_app

def child(q):
    q.put(os.environ.get("ORT_DISABLE_TELEMETRY"))

if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    print(os.environ.get("ORT_DISABLE_TELEMETRY"), q.get(timeout=60))
    p.join()
"""


def test_onnxruntime_telemetry_is_off_after_importing_the_package(tmp_path):
    (tmp_path / "probe.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.stdout.split() == ["1", "1"], out.stderr
