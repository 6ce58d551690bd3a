"""The `rag` command line: the console script that answers `rag --help` without importing typer
(`entry`), the app and which command lives where (`main`), the commands by resource, each parsing flags,
calling RagApp and rendering (`documents`: ingest, ask, chunks, demo; `spend`: report, budgets, prices;
`evaluate`: eval and training; `experiments`; `keys`; `serving`: serve), what they share (`common`:
consoles, opening the app, one-line failures, progress bars), checks of flag values typer cannot express
(`args`), the price commands' bodies (`prices`) and the shipped help text (`help_text`).

Kept free of imports: `rag --help` imports this package before anything else. Nothing imports the CLI
but its console script (`rag = "rag_app.cli.entry:main"`), so its face exports nothing."""

__all__: list[str] = []
