"""One process owns an embedded store: an advisory lock on `<store>/.lock`, with the owner's pid
written inside so that a second process can say who holds it. The kernel drops the lock when the
holder exits, however it exits, so a stale pid file never blocks anyone."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from rag_app.core import StoreInUse


class ProcessLock:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> "ProcessLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreInUse(f"store {self.path.parent} is in use by process {holder}{_cmdline(holder)}; "
                             "stop it, or point RAG_DATA_DIR elsewhere, or share a Qdrant server (QDRANT_URL)"
                             ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _cmdline(pid: str) -> str:
    try:
        raw = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError):
        return ""
    cmd = " ".join(" ".join(a.decode(errors="replace").split()) for a in raw.split(b"\0") if a)
    return f" ({cmd[:80]})" if cmd else ""  # whitespace collapsed: the error stays one line
