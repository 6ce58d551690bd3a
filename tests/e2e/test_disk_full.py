"""A full disk is an error, not a crash: `rag serve` with its data dir on a small real file system.

0.7.0: an upload with 300 KB free killed the service with SIGBUS in 1.5 s (the embedded store maps its
write-ahead log and segments as sparse files, and a page written through the map on a full disk cannot
be refused any other way), and a start on a full disk was a 56-59 line traceback."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from tests.conftest import HANG_S, LAWS
from tests.fakes.serve_proc import Serve, serve_env
from tests.fakes.small_fs import fill, free, small_tmpfs

LAW = LAWS / "行政法规/仲裁委员会仲裁收费办法(1995-07-28).md"


def copy_sparse(src, dst):
    """The store's files as they are: 32 MiB maps holding a few KiB each (shutil would write them whole)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)


def fill_leaving(fs, keep_bytes):
    """Take all the free space but `keep_bytes`."""
    filler = fill(fs)
    os.truncate(filler, max(0, filler.stat().st_size - keep_bytes))
    return filler


def upload(url, name="仲裁收费办法.md"):
    return httpx.post(f"{url}/v1/ingest", files=[("files", (name, LAW.read_bytes(), "text/markdown"))],
                      timeout=HANG_S)


def test_an_upload_on_a_nearly_full_disk_is_a_507_and_the_service_lives(tmp_path, company_law_edge):
    with small_tmpfs(tmp_path / "fs", "192m") as fs:
        data = fs / "data"
        copy_sparse(company_law_edge, data / "edge")
        with Serve(serve_env(data, None), tmp_path / "serve.log") as srv:
            filler = fill_leaving(fs, 300 * 1024)
            t0 = time.monotonic()
            r = upload(srv.url)
            took = time.monotonic() - t0
            assert r.status_code == 507, r.text
            body = r.json()
            assert body["type"] == "DiskFull" and "MiB free" in body["detail"] or "KiB" in body["detail"]
            assert "RAG_DATA_DIR" in body["detail"] and "\n" not in body["detail"]
            assert srv.proc.poll() is None and httpx.get(f"{srv.url}/healthz").status_code == 200
            assert not list((data / "uploads").glob("*.md"))  # nothing written, no half an upload
            free(filler)  # space again: the same upload goes in
            r = upload(srv.url)
            assert r.status_code == 200 and r.json()["files"][0]["status"] == "written", r.text
            assert srv.proc.poll() is None
    print(f"\n[disk full] upload with 300 KiB free: 507 in {took * 1000:.0f} ms, service up")


def test_start_on_a_full_disk_is_one_line(tmp_path):
    with small_tmpfs(tmp_path / "fs", "4m") as fs:
        data = fs / "data"
        data.mkdir()
        filler = fill(fs)
        for cmd in (["serve", "--port", "1"], ["ingest", str(LAW)], ["ask", "仲裁费用？"]):
            out = subprocess.run([sys.executable, "-m", "rag_app.cli.main", *cmd], env=serve_env(data, None),
                                 capture_output=True, text=True, timeout=HANG_S)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1, (cmd, out.stderr[-2000:])
            assert "RAG_DATA_DIR" in lines[0] and ("disk is full" in lines[0] or "No space" in lines[0]), lines
        free(filler)


def test_rag_ingest_that_cannot_fit_is_refused_before_the_store_is_touched(tmp_path, company_law_edge):
    with small_tmpfs(tmp_path / "fs", "128m") as fs:
        data = fs / "data"
        copy_sparse(company_law_edge, data / "edge")
        before = sorted(p.name for p in (data / "edge").rglob("*"))
        filler = fill_leaving(fs, 56 * 2**20 + 200 * 1024)  # starts (56 MiB), but cannot take the law too
        out = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "ingest", str(LAW)], env=serve_env(data, None),
                             capture_output=True, text=True, timeout=HANG_S)
        assert out.returncode == 2 and "needs" in out.stderr and "free" in out.stderr, out.stderr[-2000:]
        assert len(out.stderr.strip().splitlines()) == 1
        assert sorted(p.name for p in (data / "edge").rglob("*")) == before
        free(filler)
