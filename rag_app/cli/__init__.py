"""The `rag` command line: the console script that answers `rag --help` without importing typer
(`entry`), the commands (`main`: parse flags, call RagApp, render), checks of flag values typer cannot
express (`args`), the price commands (`prices`) and the shipped help text (`help_text`).

Kept free of imports: `rag --help` imports this package before anything else."""

__all__ = ["args", "entry", "help_text", "main", "prices"]
