"""A real small filesystem for fault tests: a tmpfs we can fill up, free, and remount read-only.

Needs mount rights (root, as in CI's container); tests skip with the reason otherwise."""
from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "4m"):
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(where: Path) -> Path:
    """Take every free byte of the filesystem; returns the filler to delete to free it."""
    filler = where / "filler.bin"
    # unbuffered: a buffered file's close() would flush the bytes the full disk refused, and raise
    with filler.open("wb", buffering=0) as f:
        for size in (65536, 4096, 1):  # then the last partial block
            with contextlib.suppress(OSError):
                while f.write(b"\0" * size):
                    pass
    return filler


def remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True, capture_output=True)


def free(filler: Path) -> None:
    os.remove(filler)
