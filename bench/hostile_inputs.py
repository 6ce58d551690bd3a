"""What the largest upload and the worst pathological files cost a running `rag serve`.

Each case gets a fresh server (real CLI subprocess, real socket); a sampler thread polls the RSS of
the server and of its parse workers every 0.1 s. Prints one row per case: HTTP status, wall time,
CPU seconds the server process itself spent (its parse workers not counted), peak RSS of the
server, peak RSS of any parse worker, and the per-file outcome.

    python -m bench.hostile_inputs [--mb 20] [--line-mb MB] [--only TEXT] [--parse-timeout S] [--code DIR]

`--code DIR` serves from another checkout (e.g. `git worktree add /tmp/old COMMIT`) for a
before/after comparison on the same machine.
"""
from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from tests.fakes.hostile import law_text, many_paragraphs_docx, whitespace_bomb_docx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Peak(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root, self.server, self.worker, self.stop = psutil.Process(pid), 0, 0, False

    def run(self):
        while not self.stop:
            try:
                self.server = max(self.server, self.root.memory_info().rss)
                for child in self.root.children(recursive=True):
                    try:
                        self.worker = max(self.worker, child.memory_info().rss)
                    except psutil.Error:
                        pass
            except psutil.Error:
                return
            time.sleep(0.1)


def run_case(name: str, send, env: dict, code: Path = REPO) -> dict:
    with tempfile.TemporaryDirectory() as data:
        port = free_port()
        full = {**os.environ, "PYTHONPATH": str(code), "RAG_DATA_DIR": data, **env}
        # cwd too: `python -m` puts the working directory ahead of PYTHONPATH
        proc = subprocess.Popen([sys.executable, "-m", "rag_app.cli.main", "serve", "--port", str(port)], env=full,
                                cwd=code)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    httpx.get(f"{url}/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            peak = Peak(proc.pid)
            peak.start()
            cpu_before = sum(psutil.Process(proc.pid).cpu_times()[:2])
            t = time.perf_counter()
            r = send(url)
            elapsed = time.perf_counter() - t
            cpu = sum(psutil.Process(proc.pid).cpu_times()[:2]) - cpu_before
            peak.stop = True
            peak.join()
            files = r.json().get("files", [{}]) if r.headers.get("content-type", "").startswith("application/json") else [{}]
            outcome = files[0].get("status") or r.json().get("detail", "")[:60]
            error = (files[0].get("error") or "")[:90]
            return {"case": name, "status": r.status_code, "s": elapsed, "cpu": cpu, "server_mb": peak.server / 2**20,
                    "worker_mb": peak.worker / 2**20, "outcome": outcome, "error": error}
        finally:
            proc.terminate()
            proc.wait(30)


def upload(path: Path):
    def send(url):
        with path.open("rb") as f:
            return httpx.post(f"{url}/v1/ingest", files=[("files", (path.name, f))], timeout=3600)
    return send


def streamed_body(mb: int):
    def send(url):
        def body():
            part = b'--b\r\nContent-Disposition: form-data; name="files"; filename="huge.md"\r\n\r\n'
            yield part
            for _ in range(mb):
                yield b"x" * 2**20
        try:
            return httpx.post(f"{url}/v1/ingest", content=body(), timeout=600,
                              headers={"Content-Type": "multipart/form-data; boundary=b"})
        except httpx.HTTPError as e:  # the server may close while we still send
            return httpx.Response(499, json={"detail": f"connection closed by server ({type(e).__name__})"})
    return send


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20, help="upload size (RAG_MAX_UPLOAD_MB)")
    ap.add_argument("--line-mb", type=float, default=None, help="size of the one-line file (default: --mb)")
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--parse-timeout", type=float, default=120, help="RAG_PARSE_TIMEOUT_S (default: its default)")
    ap.add_argument("--code", type=Path, default=REPO, help="serve from this checkout (before/after runs)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    target = int(args.mb * 2**20) - 1024
    law = law_text(200)
    laws = (law * (target // len(law.encode()) + 1)).encode()[:target]
    (work / "largest.md").write_bytes(laws[: laws.rfind(b"\n") + 1])
    rng = random.Random(0)
    line_bytes = int((args.line_mb or args.mb) * 2**20) - 1024
    line = "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(line_bytes // 3))
    (work / "one_line.md").write_text(line, encoding="utf-8")
    many_paragraphs_docx(work / "paras.docx", 1_000_000)
    whitespace_bomb_docx(work / "bomb.docx", 1024)
    env = {"RAG_MAX_UPLOAD_MB": str(args.mb), "RAG_MAX_REQUEST_MB": str(args.mb * 5),
           "RAG_PARSE_TIMEOUT_S": str(args.parse_timeout)}
    line_mb = args.line_mb or args.mb
    cases = [("largest .md (law text)", upload(work / "largest.md")),
             (f"{line_mb:g} MB line of never-seen CJK", upload(work / "one_line.md")),
             ("DOCX, 1M paragraphs (98 KB)", upload(work / "paras.docx")),
             ("DOCX, 1 GB whitespace XML (1 MB)", upload(work / "bomb.docx")),
             ("300 MB streamed body", streamed_body(300))]
    print(f"{'case':34} {'HTTP':>4} {'s':>7} {'srv CPU s':>9} {'server MB':>9} {'worker MB':>9}  outcome")
    for name, send in [c for c in cases if args.only in c[0]]:
        r = run_case(name, send, env, args.code)
        print(f"{r['case']:34} {r['status']:>4} {r['s']:7.1f} {r['cpu']:9.1f} {r['server_mb']:9.0f} {r['worker_mb']:9.0f}  "
              f"{r['outcome']} {r['error']}", flush=True)


if __name__ == "__main__":
    main()
