"""Spill files: rows the ledger could not take in time, kept on disk for the next writer to replay.

Where: RAG_LEDGER_SPILL_DIR, else `<RAG_DATA_DIR>/spill` (never the shared system temp dir, where any
local user could plant a file). The folder is made 0700 and must be a real folder owned by us; files
are created 0600 and opened without following a link (O_NOFOLLOW), so a link planted in their place
fails the open instead of redirecting the rows.

What: one JSON object per line, `{"v": <schema version>, "table": ..., "row": {...}}`. A replay reads
each line into the same typed insert the writer uses (columns come from the schema's Table objects,
never from the file): a line from a newer schema, for an unknown table, or with a key that is not a
column of its table, is quarantined whole with the reason. Nothing in a spill file becomes SQL text.

Replay is resumable: a file is claimed by renaming it to `*.replaying` and holding an exclusive lock
on it (a dead claimer's lock is gone with it); each chunk of lines is written in one transaction that
also records how far the file was replayed (ledger_state `spill:<name>`), so a process killed in the
middle of a replay is resumed by the next one exactly where its last transaction committed: every row
present once.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)
SUFFIX = ".spill.jsonl"
CLAIMED = ".replaying"


class UnsafeSpillDir(OSError):
    """The spill folder is a link, not ours, or writable by others: nothing is written or read there."""


def ensure_dir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeSpillDir(f"spill folder {folder} is not a plain folder")
    if st.st_uid != os.getuid():
        raise UnsafeSpillDir(f"spill folder {folder} belongs to uid {st.st_uid}, not to this process")
    if st.st_mode & 0o022:
        os.chmod(folder, 0o700)
    return folder


def append(path: Path, lines: list[str]) -> None:
    """Append and fsync; the file is created 0600 and never followed through a link."""
    ensure_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            fd = -1
            f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())
    finally:
        if fd >= 0:
            os.close(fd)


def encode(table: str, row: dict, version: int) -> str:
    return json.dumps({"v": version, "table": table, "row": row}, ensure_ascii=False, default=repr) + "\n"


@dataclass
class Claim:
    """A spill file being replayed by this process: its lock is held until `release()`."""

    path: Path  # the *.replaying file
    name: str  # the original file name (the progress key)
    handle: IO[str] = field(repr=False)

    @property
    def key(self) -> str:
        return f"spill:{self.name}"

    def lines_from(self, offset: int, limit: int) -> tuple[list[str], int]:
        """Up to `limit` whole lines from byte `offset`, and the offset after them."""
        self.handle.seek(offset)
        out, pos = [], offset
        for _ in range(limit):
            line = self.handle.readline()
            if not line or not line.endswith("\n"):  # a torn last line (the writer died mid-append): stop
                break
            out.append(line)
            pos += len(line.encode("utf-8"))
        return out, pos

    def done(self) -> None:
        self.path.unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        try:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
        finally:
            self.handle.close()


def claim(folder: Path, prefix: str) -> list[Claim]:
    """Spill files of this ledger (names starting with `prefix`) that no live process is replaying:
    new ones are renamed to *.replaying first, so rows spilled from now on go to a fresh file."""
    try:
        ensure_dir(folder)
    except OSError as e:
        log.warning("spill folder %s unusable: %s", folder, e)
        return []
    claims = []
    for p in sorted(folder.iterdir()):
        if not p.name.startswith(prefix) or p.is_symlink():
            continue
        if p.name.endswith(SUFFIX):
            target = p.with_name(p.name + CLAIMED)
            if target.exists():  # an unfinished replay of the same name: finish it first, this one next time
                continue
            try:
                p.rename(target)
            except OSError:
                continue
            p = target
        elif not p.name.endswith(SUFFIX + CLAIMED):
            continue
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as e:
            log.warning("cannot open spill file %s: %s", p, e)
            continue
        handle = os.fdopen(fd, "r", encoding="utf-8", errors="replace")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # someone alive replays it: leave it
        except OSError:
            handle.close()
            continue
        claims.append(Claim(p, p.name.removesuffix(CLAIMED), handle))
    return claims


def decode(line: str, version: int, writable: dict[str, frozenset[str]]) -> tuple[str, dict] | str:
    """(table, row) for a line the writer may insert, or the reason it must be quarantined."""
    try:
        rec = json.loads(line)
    except ValueError as e:
        return f"not JSON ({e})"
    if not isinstance(rec, dict) or not isinstance(rec.get("row"), dict):
        return "not a spill record ({v, table, row})"
    v = rec.get("v")
    if not isinstance(v, int) or v > version:
        return f"written by a newer ledger schema (v={v!r}; this version knows up to {version})"
    table = rec.get("table")
    if table not in writable:
        return f"unknown table {str(table)[:60]!r}"
    unknown = [k for k in rec["row"] if k not in writable[table]]
    if unknown:
        return f"keys that are not columns of {table}: {', '.join(repr(k)[:80] for k in unknown[:5])}"
    return table, rec["row"]
