"""`.env.example` and docs/settings.md, written from the settings' own declarations (each field's default,
description and example; each section's docstring), so neither can drift from what `Settings` reads.

    python -m rag_app.config.envfile --write   # `make settings-docs`: rewrite both after changing a setting
    python -m rag_app.config.envfile --check   # exit 1 naming the file that is out of step

tests/unit/config/test_settings_docs.py fails until both are rewritten."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from textwrap import wrap
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from rag_app.config.settings import Settings

REPO = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = REPO / ".env.example"
SETTINGS_DOC = REPO / "docs" / "settings.md"
COMMENT_AT = 38  # the column a setting's comment starts at in .env.example
WIDTH = 110  # section notes are wrapped to this many columns
SOURCES = "rag_app/config/settings.py and rag_app/query/knobs.py"


@dataclass(frozen=True)
class Section:
    heading: str
    note: str
    fields: tuple[str, ...]


def sections(model: type[BaseModel] = Settings) -> list[Section]:
    """The model's settings by section, in the order its bases are listed: a base's own fields under the first
    line of its docstring (the heading), the rest of the docstring being the section's note."""
    found: list[Section] = []
    for base in model.__bases__:
        if issubclass(base, BaseModel) and base not in (BaseModel, BaseSettings):
            found += sections(base)
    own = tuple(name for name in vars(model).get("__annotations__", {}) if name in model.model_fields)
    if own:
        heading, _, note = (model.__doc__ or "").strip().partition("\n")
        found.append(Section(heading.strip(), " ".join(note.split()), own))
    return found


def env_name(name: str, field: FieldInfo) -> str:
    """The variable a setting is read from: its first alias (the ecosystem's own name), else RAG_<NAME>."""
    choices = getattr(field.validation_alias, "choices", None)
    return str(choices[0]) if choices else f"RAG_{name.upper()}"


def shown(value: Any) -> str:
    """A value as a .env file writes it: 1/0 for booleans, floats without exponents, nothing for None."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return format(Decimal(repr(value)), "f")
    return str(value)


def example_line(name: str, field: FieldInfo) -> tuple[str, bool]:
    """(NAME=VALUE, whether it is commented out): a setting unset by default shows its example, commented."""
    example = field.examples[0] if field.examples else None
    unset = field.default is None or (field.default == "" and example is not None)
    return f"{env_name(name, field)}={shown(example if unset else field.default)}", unset


def described(name: str) -> FieldInfo:
    field = Settings.model_fields[name]
    if not field.description:
        raise ValueError(f"setting {name} has no description: add Field(description=...) where it is declared")
    return field


def env_example() -> str:
    lines = ["# Every setting, with its default. Environment variables beat this file; copy it to `.env` to use it.",
             f"# Written from {SOURCES} by `make settings-docs`: edit those, not this file.",
             "# The query path's settings (from `retrieval and rerank` to `Query rewrite`) may be set by an",
             "# experiment's variant too, by their names in lower case without RAG_ (docs/settings.md)."]
    for section in sections():
        lines += ["", f"# --- {section.heading} ---"] + [f"# {line}" for line in wrap(section.note, WIDTH - 2)]
        for name in section.fields:
            field = described(name)
            line, commented = example_line(name, field)
            line = f"# {line}" if commented else line
            lines.append(f"{line.ljust(COMMENT_AT)}# {field.description}" if len(line) < COMMENT_AT
                         else f"{line}  # {field.description}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_doc() -> str:
    intro = ["Every setting `rag` reads: from the environment, else from a `.env` file in the working directory, else "
             "the default. An empty value means unset. A bad value stops every command with one line naming the "
             "variable; a `RAG_*` name that is no setting is a warning naming the closest one.",
             f"This page and `.env.example` are written from {SOURCES} by `make settings-docs` (a test fails when "
             "they are out of step).",
             "The query path's settings (`QueryKnobs`: the sections from *retrieval and rerank* to *Query rewrite*) "
             "are also what a variant of `RAG_EXPERIMENTS_FILE` may set, by the name in lower case without `RAG_` "
             "(`{\"variants\": {\"wide\": {\"top_n\": 8, \"retrieval_levers\": \"rescore+wide\"}}}`, "
             "docs/operations.md), and the levers' settings are what `rag eval --lever-param NAME=VALUE` and "
             "`--retriever SPEC@NAME=VALUE` set for one run (docs/evaluation-and-levers.md)."]
    lines = ["# Settings"]
    for paragraph in intro:
        lines += [""] + wrap(paragraph, WIDTH, break_on_hyphens=False)
    for section in sections():
        lines += ["", f"## {section.heading}", ""]
        lines += [*wrap(section.note, WIDTH, break_on_hyphens=False), ""] if section.note else []
        lines += ["| Variable | Default | What it does |", "|---|---|---|"]
        for name in section.fields:
            field = described(name)
            default = f"`{shown(field.default)}`" if shown(field.default) else "unset"
            example = f" (e.g. `{field.examples[0]}`)" if field.examples else ""
            lines.append(f"| `{env_name(name, field)}` | {_cell(default)} | {_cell(field.description or '')}"
                         f"{_cell(example)} |")
    return "\n".join(lines) + "\n"


def generated() -> dict[Path, str]:
    return {ENV_EXAMPLE: env_example(), SETTINGS_DOC: settings_doc()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="rewrite .env.example and docs/settings.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when either differs from the settings")
    args = parser.parse_args(argv)
    stale = [path for path, text in generated().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args.write:
        for path in stale:
            path.write_text(generated()[path], encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    for path in stale:
        print(f"{path.relative_to(REPO)} is out of step with the settings: run `make settings-docs`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
