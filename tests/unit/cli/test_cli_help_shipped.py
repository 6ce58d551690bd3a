"""The help text `rag --help` prints without typer (rag_app/data/cli_help.txt) is what the live typer app
renders at 80 columns without colour: a command added or a help string changed without `make cli-help`
fails here."""
from __future__ import annotations

from rag_app.cli.entry import FAST
from rag_app.cli.help_text import render, shipped


def test_the_shipped_help_is_the_live_one():
    text, code = render(("--help",))
    assert text == shipped(), "the commands changed: run `make cli-help` and commit rag_app/data/cli_help.txt"
    assert code == FAST[("--help",)]


def test_h_and_bare_rag_render_the_same_text_with_typers_exit_codes():
    for args in (("-h",), ()):
        text, code = render(args)
        assert text == shipped() and code == FAST[args]
