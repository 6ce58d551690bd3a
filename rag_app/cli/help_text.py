"""The `rag` help text shipped with the package (rag_app/data/cli_help.txt, printed by rag_app/cli/entry.py
without importing typer): rendered here from the live typer app, 80 columns, no colours, trailing spaces
removed. `make cli-help` (python -m rag_app.cli.help_text) rewrites the file; tests/unit/cli/test_cli_help_shipped.py
fails when it differs from what this renders now (a command added, a help string edited)."""
from __future__ import annotations

from pathlib import Path

from rag_app.cli.entry import HELP_FILE

COLUMNS = 80


def render(args: tuple[str, ...] = ("--help",)) -> tuple[str, int]:
    """What `rag ARGS` prints through typer at COLUMNS columns without colour, and its exit code."""
    import typer.rich_utils as ru
    from typer.testing import CliRunner

    from rag_app.cli.main import app

    saved = ru.MAX_WIDTH, ru.COLOR_SYSTEM, ru.FORCE_TERMINAL
    ru.MAX_WIDTH, ru.COLOR_SYSTEM, ru.FORCE_TERMINAL = COLUMNS, None, False
    try:
        result = CliRunner().invoke(app, list(args), prog_name="rag", env={"NO_COLOR": "1", "FORCE_COLOR": None})
    finally:
        ru.MAX_WIDTH, ru.COLOR_SYSTEM, ru.FORCE_TERMINAL = saved
    # bare `rag` ends without the blank line --help prints: one text serves the three
    return "".join(line.rstrip() + "\n" for line in result.stdout.rstrip().splitlines()), result.exit_code


def shipped() -> str:
    return Path(HELP_FILE).read_text(encoding="utf-8")


def main() -> None:
    text, _ = render()
    Path(HELP_FILE).write_text(text, encoding="utf-8")
    print(f"wrote {HELP_FILE} ({len(text.splitlines())} lines, {COLUMNS} columns)")


if __name__ == "__main__":
    main()
