"""Spill files: rows the ledger could not take in time, kept on disk for the next writer to replay.

Where: RAG_LEDGER_SPILL_DIR, else `<RAG_DATA_DIR>/spill` (never the shared system temp dir, where any
local user could plant a file). The folder is made 0700 and must be a real folder owned by us; files
are created 0600 and opened without following a link (O_NOFOLLOW), so a link planted in their place
fails the open instead of redirecting the rows.

What: one JSON object per line, `{"v": <schema version>, "table": ..., "row": {...}}`. A replay reads
each line into the same typed insert the writer uses (columns come from the schema's Table objects,
never from the file): a line from a newer schema, for an unknown table, or with a key that is not a
column of its table, is quarantined whole with the reason. Nothing in a spill file becomes SQL text.

Whose: each writer appends to its own file, `ledger-<ledger key>-<writer id>.spill.jsonl`, so replicas
sharing a ledger (and even a spill folder) never share a file or a replay position. An append holds an
exclusive lock on the file and checks, once locked, that the name still points at the file it opened:
a claim that renamed it meanwhile sends the append to a fresh file instead of one being replayed.

Replay is resumable: a file is claimed by renaming it to a name of its own, `<name>.<claim id>.replaying`,
and holding an exclusive lock on it (a dead claimer's lock is gone with it). Each chunk of lines is
written in one transaction that also moves the file's replay position (ledger_state `spill:<claimed
name>`) from where the chunk started to where it ended, on condition that it still reads the start:
two processes replaying one file (a lock lost on a network folder) cannot both commit a chunk, so a
process killed in the middle of a replay is resumed exactly where its last transaction committed and
every row is present once. A claimed name is never reused, so neither is its position.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import uuid
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
    # A folder others may write is made ours alone, unless it is sticky (a shared drop folder like
    # /tmp): there others cannot rename or remove our files, which are 0600 and never followed
    # through a link, and chmod'ing it would lock every other user out of it.
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        os.chmod(folder, 0o700)
    return folder


def append(path: Path, lines: list[str]) -> None:
    """Append and fsync; the file is created 0600 and never followed through a link. A write that fails
    part-way (disk full) is cut back to where it began, so the file never ends in a torn line that
    would hide the lines appended after it."""
    ensure_dir(path.parent)
    data = "".join(lines).encode("utf-8")
    for attempt in range(100):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:  # a claim renames the file, then holds this lock while it replays it
                fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if attempt < 99 else 0))
            except BlockingIOError:  # claimed: the name is free again, so the next open makes a fresh file
                continue
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(path))
            except FileNotFoundError:
                same = False
            if not same:  # claimed (renamed) between our open and our lock: append to a fresh file
                continue
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except BaseException:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
                raise
            return
        finally:
            os.close(fd)
    raise OSError(f"spill file {path} was claimed under every append attempt")


def encode(table: str, row: dict, version: int) -> str:
    """One spill line. Text UTF-8 cannot hold (a lone surrogate) is kept as a JSON escape instead: the
    line is always writable, and the replay hands the row to the ledger's salvage path."""
    rec = {"v": version, "table": table, "row": row}
    line = json.dumps(rec, ensure_ascii=False, default=repr)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(rec, ensure_ascii=True, default=repr)
    return line + "\n"


@dataclass
class Claim:
    """A spill file being replayed by this process: its lock is held until `release()`."""

    path: Path  # the *.replaying file
    name: str  # the claimed name less `.replaying` (the progress key: never reused)
    handle: IO[str] = field(repr=False)
    pos: int = 0  # bytes replayed so far, as far as this process knows

    @property
    def unreplayed(self) -> int:
        try:
            return max(0, self.path.stat().st_size - self.pos)
        except OSError:
            return 0

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
    """Spill files of this ledger (names starting with `prefix`) that no live process is replaying or
    appending to: new ones are renamed to a claimed name of their own first, so rows spilled from now
    on go to a fresh file."""
    try:
        ensure_dir(folder)
    except OSError as e:
        log.warning("spill folder %s unusable: %s", folder, e)
        return []
    claims = []
    for p in sorted(folder.iterdir()):
        claimed = _claimed_name(p, prefix)
        locked = _locked(claimed) if claimed is not None else None
        if locked is not None:
            claims.append(locked)
    return claims


def _claimed_name(p: Path, prefix: str) -> Path | None:
    """`p` under a claimed name of this process's (a new spill file renamed to one, a dead process's claim
    as it is), or None: not this ledger's spill file, a link, or another claimer renamed it first."""
    if not p.name.startswith(prefix) or p.is_symlink():
        return None
    if p.name.endswith(SUFFIX):
        target = p.with_name(f"{p.name}.{uuid.uuid4().hex[:12]}{CLAIMED}")
        try:
            p.rename(target)  # atomic: of two claimers, one renames it, the other finds it gone
        except OSError:
            return None
        return target
    if p.name.endswith(CLAIMED) and SUFFIX in p.name:  # a claim a dead process left
        return p
    return None


def _locked(p: Path) -> Claim | None:
    """A claim on `p` holding its lock, or None: it cannot be opened, or someone alive replays it."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        log.warning("cannot open spill file %s: %s", p, e)
        return None
    handle = os.fdopen(fd, "r", encoding="utf-8", errors="replace")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # someone alive replays it: leave it
    except OSError:
        handle.close()
        return None
    return Claim(p, p.name.removesuffix(CLAIMED), handle)


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
