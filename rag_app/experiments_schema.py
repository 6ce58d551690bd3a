"""The experiments file as pydantic models: every key typed, ranged and known, checked at startup.

Before, `"seed": 42` made every ask a 500 and `top_n: "five"` every treatment ask; `rollout_pct:
true`, an unknown retriever and `top_n > top_k` were accepted. Now each is one line naming the
file, the field and the fix.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError, model_validator

from rag_app.errors import ConfigError

PROMPTS = Path(__file__).resolve().parents[1] / "prompts" / "answer"
RETRIEVERS = ("hybrid", "dense", "bm25")


def known_chunkers() -> tuple[str, ...]:
    from rag_app.chunking.registry import CHUNKERS

    return CHUNKERS


def known_prompts() -> list[str]:
    return sorted(p.stem for p in PROMPTS.glob("*.md"))


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chunker: StrictStr | None = None
    collection: StrictStr | None = Field(None, min_length=1, max_length=200)
    prompt_version: StrictStr | None = None
    llm_model: StrictStr | None = Field(None, min_length=1)
    top_k: StrictInt | None = Field(None, ge=1, le=1000)
    top_n: StrictInt | None = Field(None, ge=1, le=100)
    rerank_model: StrictStr | None = None
    retriever: Literal[RETRIEVERS] | None = None  # type: ignore[valid-type]
    attach_refs: StrictInt | None = Field(None, ge=0, le=20)
    table_weight: StrictFloat | StrictInt | None = Field(None, gt=0, le=100)

    @model_validator(mode="after")
    def _known(self) -> "Variant":
        if self.chunker is not None and self.chunker not in known_chunkers():
            raise ValueError(f"chunker {self.chunker!r} is unknown; use one of {', '.join(known_chunkers())}")
        if self.prompt_version is not None and self.prompt_version not in known_prompts():
            raise ValueError(f"prompt_version {self.prompt_version!r} has no file in prompts/answer/; "
                             f"use one of {', '.join(known_prompts())}")
        # One of the two alone is checked against the live settings when the service starts (pool.py).
        if self.top_n is not None and self.top_k is not None and self.top_n > self.top_k:
            raise ValueError(f"top_n ({self.top_n}) must not exceed top_k ({self.top_k}); lower top_n or raise top_k")
        return self


class ExperimentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    control: StrictStr
    treatment: StrictStr
    rollout_pct: StrictInt | StrictFloat = Field(ge=0, le=100)  # strict: `true` is not 100
    seed: StrictStr = Field(min_length=1)
    mode: Literal["split", "shadow"] = "split"
    guardrails: dict = {}


class ExperimentsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variants: dict[str, Variant] = {}
    experiments: dict[str, ExperimentSpec] = {}

    @model_validator(mode="after")
    def _arms_exist(self) -> "ExperimentsFile":
        for name, e in self.experiments.items():
            for arm in (e.control, e.treatment):
                if arm != "default" and arm not in self.variants:
                    raise ValueError(f"experiments.{name}: names unknown variant {arm!r}; "
                                     f"define it under variants (have: default, {', '.join(self.variants)})")
        return self


_HINTS = {
    "string_type": "write it in double quotes",
    "int_type": "write a whole number without quotes",
    "float_type": "write a number without quotes",
    "extra_forbidden": "remove it (or check its spelling)",
}
_ALLOWED = {"variants": "variants, experiments", "experiments": "variants, experiments"}


def parse_config(text: str, path: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """(variants, experiments) as plain dicts of the keys set, or ConfigError `path: field: what + fix`."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from None
    try:
        parsed = ExperimentsFile.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_one_line(path, e)) from None
    variants = {n: v.model_dump(exclude_unset=True) for n, v in parsed.variants.items()}
    experiments = {n: x.model_dump() for n, x in parsed.experiments.items()}
    return variants, experiments


def _one_line(path: str, e: ValidationError) -> str:
    err = e.errors()[0]
    loc = [str(x) for x in err["loc"] if not str(x).startswith(("function-", "constrained-"))]
    # StrictInt | StrictFloat reports one error per member: name the field, not the member
    loc = [x for x in loc if x not in ("int", "float", "str", "literal[...]")]
    field = ".".join(loc)
    msg = err["msg"].removeprefix("Value error, ")
    hint = _HINTS.get(err["type"], "")
    if err["type"] == "extra_forbidden":
        hint = f"{hint}; allowed here: {_allowed_keys(loc)}"
    if isinstance(err.get("input"), bool) and err["type"] in ("int_type", "float_type"):
        msg, hint, more = "a number 0..100 is needed, not true/false", "write e.g. 100 for everyone", ""
        return f"{path}: {field}: {msg} — {hint}"
    if "input" in err and err["type"] not in ("extra_forbidden", "missing"):
        msg = f"{msg} (got {json.dumps(err['input'], ensure_ascii=False)[:60]})"
    more = f" (+{e.error_count() - 1} more)" if e.error_count() > 1 else ""
    where = f"{path}: {field}: " if field else f"{path}: "
    return where + msg + (f" — {hint}" if hint else "") + more


def _allowed_keys(loc: list[str]) -> str:
    if len(loc) == 1:
        return "variants, experiments"
    model = Variant if loc[0] == "variants" else ExperimentSpec
    return ", ".join(model.model_fields)
