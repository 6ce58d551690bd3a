"""Checks of command-line values that typer's types cannot express, made before a command does any work:
each failure is a RagError of one line naming the flag and what it accepts (the CLI prints it, exit 2)."""
from __future__ import annotations

import os
from pathlib import Path

from rag_app.core import RagError


def output_path(flag: str, path: Path | None, suffixes: tuple[str, ...] = ()) -> Path | None:
    """A file a command will write (--out, --png, --runs): its folder must exist and be writable, and the path
    itself must not be a folder. Checked first, so an eval of minutes is not lost to a typo at the end.
    `suffixes`: the formats the command writes, told by the extension (`eval --out x.xlsx` wrote JSON)."""
    if path is None:
        return None
    if suffixes and path.suffix.lower() not in suffixes:
        raise RagError(f"{flag} {path}: name a {' or '.join(suffixes)} file (the extension picks the format)")
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise RagError(f"{flag} {path}: is a folder; name a file in it, e.g. {path / 'out'}")
    if not folder.is_dir():
        raise RagError(f"{flag} {path}: folder {folder} does not exist; create it or pick another path")
    if not os.access(folder, os.W_OK):
        raise RagError(f"{flag} {path}: folder {folder} is not writable; pick another path")
    return path


def existing(flag: str, path: Path, folder: bool = False) -> Path:
    """An input the command reads (--qa FILE, --corpus FOLDER): it must be there, and be a file or a folder."""
    if not path.exists():
        raise RagError(f"{flag} {path}: no such {'folder' if folder else 'file'}")
    if folder != path.is_dir():
        raise RagError(f"{flag} {path}: is {'a file' if folder else 'a folder'}; name the {'folder' if folder else 'file'}")
    return path


def positive_ints(flag: str, text: str, example: str = "1,5,10", allow_empty: bool = False) -> list[int]:
    """A comma-separated list of whole numbers >= 1 (recall cut-offs; token budgets, where none is allowed)."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = [0]
    if (not values and not allow_empty) or min(values, default=1) < 1:
        raise RagError(f"{flag} must be comma-separated whole numbers of at least 1 such as {example}, not {text!r}")
    return values


def at_least_one(flag: str, value: int | None) -> int | None:
    """A count such as --limit or --bins: unset, or at least 1."""
    if value is not None and value < 1:
        raise RagError(f"{flag} must be at least 1, not {value}")
    return value


def export_format(fmt: str | None, out: Path | None) -> str:
    """--format, or when it is not given the --out file's extension (.csv, .json), else a table: `--out
    spend.csv` used to write the box-drawn table into spend.csv."""
    if fmt is None:
        fmt = {".csv": "csv", ".json": "json"}.get(out.suffix.lower(), "table") if out is not None else "table"
    if fmt not in ("table", "csv", "json"):
        raise RagError(f"--format must be table, csv or json, not {fmt!r}")
    return fmt
