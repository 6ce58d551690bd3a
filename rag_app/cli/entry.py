"""The `rag` console script ([project.scripts] in pyproject.toml).

`rag`, `rag --help` and `rag -h` print the help text shipped in rag_app/data/cli_help.txt without importing
typer or rich: typer alone costs 2.3x a bare interpreter's start-up, and a help screen 6x (issue 20 item 6).
That text is rendered from the live typer app by `make cli-help` (rag_app/cli/help_text.py), and
tests/unit/cli/test_cli_help_shipped.py renders it again and compares, so it cannot drift from the commands.
Every other command line goes to the typer app in rag_app/cli/main.py, as before.
"""
from __future__ import annotations

import os
import sys

HELP_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "cli_help.txt")
# typer's own exit codes: `rag --help` 0; bare `rag` shows the help as a usage error (no_args_is_help), 2.
FAST = {(): 2, ("--help",): 0, ("-h",): 0}


def main() -> int | None:
    code = FAST.get(tuple(sys.argv[1:]))
    if code is not None and _print_shipped_help():
        return code
    from rag_app.cli.main import app

    return app()


def _print_shipped_help() -> bool:
    """True once the shipped text is printed; False (typer renders it) when it cannot be read or encoded."""
    try:
        with open(HELP_FILE, encoding="utf-8") as f:
            text = f.read()
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, UnicodeError):  # a stripped install, or a terminal that cannot show the box lines
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
