"""Free space before a write: a full disk is a refusal of one line, never a crash.

The embedded store (Qdrant Edge) keeps its write-ahead log and segments in sparse, memory-mapped files:
`wal/open-N` are 32 MiB each and two exist at once, a segment's vector store is a 32 MiB page file,
each payload index a 4 MiB page file (measured: `du --apparent-size` against `du` on a fresh
`rag ingest`). Their blocks are taken when a page is first written through the map, so a full disk
is not an error the engine can return: the kernel kills the process with SIGBUS (0.7.0: an upload with
300 KB free killed `rag serve` in 1.5 s, without a log line). So every write is checked first:

    need = one WAL segment (the engine opens the next one as the current fills)
         + 4 x the new documents' bytes (chunk payloads, sparse vectors, the WAL's copy, the index)
         + what the collection takes now (the optimizer rewrites a segment whole after an ingest)

An upload or `rag ingest` that cannot fit is refused before the first byte is written (HTTP 507).
Start-up checks MIN_START_BYTES: the ledger's migration and the store's lock need a little.
"""
from __future__ import annotations

import os
from pathlib import Path

from rag_app.errors import RagError

MiB = 2**20
WAL_SEGMENT_BYTES = 32 * MiB
DATA_FACTOR = 4
MIN_START_BYTES = 1 * MiB


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


def used_bytes(folder: Path) -> int:
    """Blocks taken by the files under `folder` (not their sparse apparent size)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def write_need(new_bytes: int, collection_dir: Path | None) -> int:
    current = used_bytes(collection_dir) if collection_dir is not None and collection_dir.exists() else 0
    return WAL_SEGMENT_BYTES + DATA_FACTOR * new_bytes + current


def require_free(path: Path, need: int, what: str) -> None:
    free = free_bytes(path)
    if free < need:
        raise DiskFull(Path(path), free, need, what)


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / 1024:.0f} KiB"
