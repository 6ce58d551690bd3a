"""Servers the tests start do not outlive a test process killed without its clean-up (an xdist worker
taken by the OOM killer left three `rag serve` children and its PostgreSQL clusters running)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, REQUIRE_POSTGRES, wait_until
from tests.fakes.pg_cluster import binaries_missing
from tests.fakes.reaper import Reaper


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()  # a zombie has exited too
    except FileNotFoundError:
        return False


def _owner(code: str) -> tuple[subprocess.Popen, str]:
    """A python process running `code`, and the first line it prints."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True,
                            cwd=REPO, start_new_session=True)
    return proc, proc.stdout.readline().strip()


def test_the_watcher_acts_when_its_owner_is_killed_and_never_once_cancelled(tmp_path):
    victims = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(2)]
    try:
        owner, _ = _owner(f"""
            import time
            from tests.fakes.reaper import Reaper
            Reaper(["kill", "-9", "{victims[0].pid}"])
            Reaper(["kill", "-9", "{victims[1].pid}"]).cancel()
            print("ready", flush=True)
            time.sleep(600)
        """)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        wait_until(lambda: victims[0].poll() is not None, "the watched process killed after its owner")
        assert victims[0].returncode == -signal.SIGKILL
        assert victims[1].poll() is None  # cancelled: left alone
    finally:
        for v in victims:
            v.kill()
            v.wait(10)


def test_a_cancelled_watcher_is_gone():
    r = Reaper(["true"])
    r.cancel()
    assert r.proc.poll() is not None


def test_a_killed_test_process_leaves_no_rag_serve_behind(tmp_path):
    owner, pid = _owner(f"""
        import time
        from pathlib import Path
        from tests.fakes.serve_proc import Serve, serve_env
        srv = Serve(serve_env(Path({str(tmp_path)!r}), None), Path({str(tmp_path / "serve.log")!r}))
        print(srv.proc.pid, flush=True)
        time.sleep(600)
    """)
    serve = int(pid)
    assert _alive(serve)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(10)
    wait_until(lambda: not _alive(serve), "the orphaned rag serve killed")


@pytest.mark.postgres
def test_a_killed_test_process_leaves_no_postgres_behind():
    why = binaries_missing()
    if why:
        pytest.fail(why) if REQUIRE_POSTGRES else pytest.skip(why)
    owner, where = _owner("""
        import time
        from tests.fakes.pg_cluster import PgCluster
        print(PgCluster().start().dir, flush=True)
        time.sleep(600)
    """)
    cluster = Path(where)
    postmaster = int((cluster / "data" / "postmaster.pid").read_text().split()[0])
    assert _alive(postmaster)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(10)
    wait_until(lambda: not _alive(postmaster) and not cluster.exists(), "the orphaned cluster stopped and removed")
