"""`rag` command line: the app, its start-up check, and which command lives where. Thin: each command
parses flags, calls RagApp and renders (documents.py, spend.py, evaluate.py, experiments.py, serving.py)."""
from __future__ import annotations

import logging
import os
import sys

import typer
from typer.core import TyperGroup

from rag_app.cli import documents, evaluate, experiments, keys, serving, spend
from rag_app.cli.common import fail_one_line
from rag_app.core import RagError


class _RagGroup(TyperGroup):
    """Notes whether the command line asks for a help screen before the callback below runs (click runs a
    group's callback before it parses the subcommand's arguments, where --help is seen)."""

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        before_dashes = rest[:rest.index("--")] if "--" in rest else rest
        ctx.meta["rag_help_asked"] = any(a in ctx.help_option_names for a in before_dashes)
        return name, cmd, rest


# `rag`, `rag --help` and `rag -h` are answered by rag_app/cli/entry.py from rag_app/data/cli_help.txt
# without importing this module: after changing a command or a help string, run `make cli-help`.
app = typer.Typer(help="Legal-document RAG that records what every answer costs.", no_args_is_help=True,
                  pretty_exceptions_enable=False, cls=_RagGroup,
                  context_settings={"help_option_names": ["-h", "--help"]})
def _setup() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s", stream=sys.stderr)
    for noisy in ("httpx", "jieba", "sentence_transformers", "FlagEmbedding", "unstructured"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


@app.callback()
def main(ctx: typer.Context) -> None:
    """Every command starts here: settings are validated once, before any work (one line, exit 2)."""
    if ctx.meta.get("rag_help_asked"):  # a help screen does no work: no settings, no pydantic (issue 20)
        return
    _setup()
    from rag_app.config import load_settings

    try:
        load_settings()
    except RagError as e:
        fail_one_line(e)





# the commands, in the order `rag --help` lists them; each group's module holds its commands' bodies
app.command()(documents.ingest)
app.command()(documents.ask)
app.command("report")(spend.report_cmd)
app.command("budgets")(spend.budgets_cmd)
app.command("prices")(spend.prices_cmd)
app.command("reprice")(spend.reprice_cmd)
app.command("eval")(evaluate.eval_cmd)
app.command("train-ranker")(evaluate.train_ranker_cmd)
app.command("train-adapter")(evaluate.train_adapter_cmd)
app.command("eval-compare")(evaluate.eval_compare)
app.command()(serving.serve)
app.command()(documents.demo)

experiment_app = typer.Typer(help="Gray-release experiments.", no_args_is_help=True)
experiment_app.command("compare")(experiments.experiment_compare)
experiment_app.command("replay")(experiments.experiment_replay)
app.add_typer(experiment_app, name="experiment")

keys_app = typer.Typer(help="Issued API keys: who may ask, with what limits.", no_args_is_help=True)
keys_app.command("create")(keys.create)
keys_app.command("list")(keys.list_keys)
keys_app.command("revoke")(keys.revoke)
keys_app.command("rotate")(keys.rotate)
keys_app.command("audit")(keys.audit)
app.add_typer(keys_app, name="keys")

chunks_app = typer.Typer(help="Inspect the chunks of a collection.", no_args_is_help=True)
chunks_app.command("stats")(documents.chunks_stats)
app.add_typer(chunks_app, name="chunks")


if __name__ == "__main__":
    app()
