"""A loss record: how many ledger rows a writer could keep nowhere, kept on a disk that may be full.

At start each writer preallocates a small file of its own beside its spill files (SIZE bytes, really
written, so its blocks exist) and holds a lock on it while it lives. Rows lost when no spill file
could be written either (a full disk at shutdown) are counted into it by overwriting those blocks in
place: no new block is needed, so the count survives the full disk that lost the rows. The next writer
on this ledger folds every record no live writer holds into `ledger_losses` (once: the fold notes the
record's name in the same transaction) and removes it; `rag report`, the summary and `/healthz` read
the losses from there. A writer that closes with nothing to report removes its own record.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
SIZE = 4096
PREFIX = "losses-"
KINDS = ("spilled", "lost")


class LossRecord:
    """This writer's record, open and locked until `close()`; `write()` never needs a new disk block."""

    def __init__(self, folder: Path, ledger_key: str, writer_id: str):
        self.path = folder / f"{PREFIX}{ledger_key}-{writer_id[:12]}.json"
        self._fd: int | None = None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            log.warning("no loss record at %s (%s): a loss on a full disk would be a log line only", self.path, e)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, b" " * SIZE)
            os.fsync(fd)
        except OSError as e:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            log.warning("no loss record at %s (%s): a loss on a full disk would be a log line only", self.path, e)
            return
        self._fd = fd

    @property
    def usable(self) -> bool:
        return self._fd is not None

    def write(self, events: list[dict]) -> bool:
        """Overwrite the record with these loss events (summed per kind if they do not fit)."""
        if self._fd is None:
            return False
        data = _encode(events)
        try:
            os.pwrite(self._fd, data.ljust(SIZE), 0)
            os.fsync(self._fd)
            return True
        except OSError as e:
            log.critical("loss record %s not writable (%s)", self.path, e)
            return False

    def close(self, *, keep: bool) -> None:
        if self._fd is None:
            return
        if not keep:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


def _encode(events: list[dict]) -> bytes:
    keep = [{k: e.get(k) for k in ("kind", "rows", "reason", "spill_path", "recorded_at")} for e in events]
    data = json.dumps({"events": keep}, ensure_ascii=True).encode()
    if len(data) <= SIZE:
        return data
    summed: dict[str, int] = {}
    for e in keep:
        summed[str(e["kind"])] = summed.get(str(e["kind"]), 0) + int(e["rows"] or 0)
    last = keep[-1]
    keep = [{"kind": k, "rows": n, "reason": str(last.get("reason"))[:300], "spill_path": None,
             "recorded_at": last.get("recorded_at")} for k, n in summed.items()]
    return json.dumps({"events": keep}, ensure_ascii=True).encode()[:SIZE]


@dataclass
class Found:
    """Another writer's record that no live process holds: its events, and the lock we now hold."""

    path: Path
    events: list[dict]
    fd: int

    @property
    def key(self) -> str:
        return f"lossrec:{self.path.name}"

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        os.close(self.fd)


def left_behind(folders: list[Path], ledger_key: str, own: Path | None) -> list[Found]:
    """Records of this ledger's writers that ended (no lock held), each with the loss events it holds."""
    found = []
    for folder in folders:
        try:
            names = sorted(folder.glob(f"{PREFIX}{ledger_key}-*.json"))
        except OSError:
            continue
        for p in names:
            if p == own or p.is_symlink():
                continue
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                events = _decode(os.pread(fd, SIZE + 1, 0))
            except OSError:  # alive (locked) or unreadable: leave it
                os.close(fd)
                continue
            found.append(Found(p, events, fd))
    return found


def _decode(data: bytes) -> list[dict]:
    """Well-formed loss events only: a record is text of ours, but it sits in a folder and is checked."""
    try:
        rec = json.loads(data.decode("utf-8", "replace").strip() or "{}")
    except ValueError:
        return []
    out = []
    for e in rec.get("events", []) if isinstance(rec, dict) else []:
        if isinstance(e, dict) and e.get("kind") in KINDS and isinstance(e.get("rows"), int) and e["rows"] > 0:
            out.append({"kind": e["kind"], "rows": e["rows"], "reason": str(e.get("reason") or "")[:500],
                        "spill_path": None if e.get("spill_path") is None else str(e["spill_path"])[:300],
                        "recorded_at": str(e.get("recorded_at") or "")[:40]})
    return out
