"""What every `rag` command shares: the consoles, opening the app, failing in one line, progress bars."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console

# Exit codes: 2, an error (a bad flag, setting or file; a failure the message names); 3, refused by
# admission (a hard budget spent, the budgets unreadable under RAG_BUDGET_LEDGER_DOWN=closed): HTTP's 429/503
REFUSED = 3
out = Console()
err = Console(stderr=True)


def open_app(**overrides):
    from rag_app.app import RagApp
    from rag_app.config import check_data_dir, load_settings

    settings = load_settings(**overrides)
    check_data_dir(settings.data_dir)
    return RagApp(settings)


def fail(e: Exception) -> None:
    err.print(f"[red]error:[/red] {e}", soft_wrap=True)  # one line, however narrow the terminal
    raise typer.Exit(2)


def fail_one_line(e: Exception, code: int = 2) -> None:
    # Plain stderr, not rich: a long message must stay one line, never wrapped to the terminal.
    print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    raise typer.Exit(code)


@contextmanager
def progress_bars(labels: dict[str, str] | None = None):
    """A rich progress display; yields the (phase, done, total) callback the domain code accepts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err) as bar:
        tasks: dict[str, Any] = {}  # phase -> rich's TaskID

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task((labels or {}).get(phase, phase), total=total)
            bar.update(tasks[phase], completed=done)

        yield progress
