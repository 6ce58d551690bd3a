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
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            f.flush()
    return filler


def remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True, capture_output=True)


def free(filler: Path) -> None:
    os.remove(filler)
