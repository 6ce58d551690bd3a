"""Free space before a write: a full disk is a refusal of one line, never a crash.

The embedded store (Qdrant Edge) keeps its write-ahead log and segments in sparse, memory-mapped files,
so a full disk is not an error the engine can return: a page first written through the map on a full
disk kills the process with SIGBUS (0.7.0: an upload with 300 KB free killed `rag serve` in 1.5 s,
without a log line). Measured (`du --apparent-size` against `du`, one 25 KB law into a fresh folder,
then the 2 MB legal_zh corpus):

    wal/open-N          32 MiB apparent each; the next one is created, sparse, ahead of need
    shard, one law      167 MB apparent, 0.6 MB real on ext4; on tmpfs 8.9 MB after the ingest and
                        30 MB once reopened (the payload indexes' 4 MiB pages and 1 MiB trackers are
                        filled whole when a shard opens: opening a store on a full tmpfs is SIGBUS too)
    growth per document 9.6x its bytes (a 76 KB law), 19x for the whole corpus (the optimizer pass
                        rewrites the segment as an indexed one)

So: STORE_RESERVE_BYTES (a WAL segment + the pages an open fills, 56 MiB) to start any command that
opens the store, and that plus 24 bytes per document byte for a write (`rag ingest`, `/v1/ingest`:
refused before the first byte, HTTP 507).
"""
from __future__ import annotations

import os
from pathlib import Path

from rag_app.core import RagError

MiB = 2**20
WAL_SEGMENT_BYTES = 32 * MiB  # the engine's WAL segment (wal/open-N), mapped whole
SHARD_MAPPED_BYTES = 24 * MiB  # measured: 21 MB filled on tmpfs by reopening a one-law shard
STORE_RESERVE_BYTES = WAL_SEGMENT_BYTES + SHARD_MAPPED_BYTES
BYTES_PER_DOCUMENT_BYTE = 24  # measured up to 19x (the corpus, optimizer pass included), plus a quarter
MIN_START_BYTES = STORE_RESERVE_BYTES


class DiskFull(RagError):
    """Not enough free space for a write; nothing was written. The service answers 507."""

    def __init__(self, path: Path, free: int, need: int, what: str):
        self.path, self.free, self.need = path, free, need
        super().__init__(f"{path}: {what} needs {_size(need)} free and the disk has {_size(free)}; "
                         "free space on that disk or point RAG_DATA_DIR elsewhere")


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system holding `path` (or its nearest
    existing parent)."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


def write_need(document_bytes: int) -> int:
    """What writing documents of `document_bytes` into the embedded store may take."""
    return STORE_RESERVE_BYTES + BYTES_PER_DOCUMENT_BYTE * max(0, document_bytes)


def require_free(path: Path, need: int, what: str) -> None:
    free = free_bytes(path)
    if free < need:
        raise DiskFull(Path(path), free, need, what)


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / 1024:.0f} KiB"
