"""`rag serve` as a real child process on a loopback port, for fault tests (kill -9, full disk)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fakes.reaper import Reaper


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_env(data_dir: Path, llm_url: str | None, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "QDRANT_"))}
    env.update({"RAG_DATA_DIR": str(data_dir), "RAG_RETRIEVER": "bm25", "RAG_RERANK_MODEL": "none",
                "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "RAG_LLM_MAX_RETRIES": "0"})
    if llm_url:
        env.update({"OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "sk-local", "RAG_LLM_TIMEOUT_S": "30"})
    env.update(extra)
    return env


class Serve:
    def __init__(self, env: dict, log: Path, module: str | None = None):
        """`module`: run `python -m module PORT` instead of `rag serve --port PORT` (a wrapper)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log.open("w")
        cmd = ([sys.executable, "-m", module, str(self.port)] if module else
               [sys.executable, "-m", "rag_app.cli.main", "serve", "--port", str(self.port)])
        # stdout/stderr to a pipe-free file only when no file-size limit will apply to the child
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL if module else self.log,
                                     stderr=subprocess.DEVNULL if module else subprocess.STDOUT,
                                     cwd=Path(__file__).resolve().parents[2])
        self._reaper = Reaper(["kill", "-9", str(self.proc.pid)])  # if this test process dies first

    def __enter__(self):
        deadline = time.time() + 90
        while True:
            assert self.proc.poll() is None, f"rag serve exited: {Path(self.log.name).read_text()[-3000:]}"
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, "rag serve did not start"
            time.sleep(0.2)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._reaper.cancel()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reaper.cancel()

    def __exit__(self, *exc):
        self.stop()
        self.log.close()
