"""The experiments file as pydantic models: every key typed, ranged and known, checked at startup.

Before, `"seed": 42` made every ask a 500 and `top_n: "five"` every treatment ask; `rollout_pct:
true`, an unknown retriever and `top_n > top_k` were accepted. Now each is one line naming the
file, the field and the fix.
"""
from __future__ import annotations

import difflib
import json
from datetime import date
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError, model_validator

from rag_app.core import ConfigError
from rag_app.query import QueryKnobs

PROMPTS = Path(__file__).resolve().parents[2] / "prompts" / "answer"
# what `rag experiment compare` can judge an experiment by (rag_app/experiments/verdict.py METRICS, with
# each one's direction): cost, latency, failure rates, then answer quality
METRICS = ("cost_per_query", "latency_ms", "error_rate", "timeout_rate", "retry_rate",
           "groundedness", "invalid_citation_rate", "refusal_rate", "feedback_score", "judge_score",
           "judge_faithfulness")


def known_chunkers() -> tuple[str, ...]:
    from rag_app.chunking import CHUNKERS

    return CHUNKERS


def known_prompts() -> list[str]:
    return sorted(p.stem for p in PROMPTS.glob("*.md"))


class Variant(QueryKnobs):
    """A variant: any setting of the query path (rag_app/query/knobs.py, under its own name: `top_n`,
    `retrieval_levers`, `query_rewrite`, `rescore_unit`, ...) and which collection it reads, made by which
    chunker. Only the keys set override the live settings. Strict: `"top_n": "8"` is refused, not read as 8.
    What depends on the live settings (top_n against RAG_TOP_K, the rewrite lever's LLM, an adapter's file)
    is checked when the service starts (rag_app/service/pool.py)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    # an arm of a gray release is held to a narrower range than the environment (where RAG_TOP_K=5000 may
    # serve an evaluation): in a variant file a value past these is a typo, refused at start-up as it always was
    ARM_BOUNDS: ClassVar[dict[str, int]] = {"top_k": 1000, "top_n": 100, "table_weight": 100, "attach_refs": 20}

    chunker: StrictStr | None = None
    collection: StrictStr | None = Field(None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _known(self) -> "Variant":
        given = self.model_fields_set
        for name, most in self.ARM_BOUNDS.items():
            if name in given and getattr(self, name) > most:
                raise ValueError(f"{name} ({getattr(self, name)}) must be at most {most} in a variant")
        if self.chunker is not None and self.chunker not in known_chunkers():
            raise ValueError(f"chunker {self.chunker!r} is unknown; use one of {', '.join(known_chunkers())}")
        if "prompt_version" in given and self.prompt_version not in known_prompts():
            raise ValueError(f"prompt_version {self.prompt_version!r} has no file in prompts/answer/; "
                             f"use one of {', '.join(known_prompts())}")
        if {"top_n", "top_k"} <= given and self.top_n > self.top_k:
            raise ValueError(f"top_n ({self.top_n}) must not exceed top_k ({self.top_k}); lower top_n or raise top_k")
        if "retrieval_levers" in given:
            from rag_app.query.levers import levers_refusal

            why = levers_refusal(self.retrieval_levers)
            if why:
                raise ValueError(f"retrieval_levers {self.retrieval_levers!r}: {why}")
        return self

    def overrides(self) -> dict[str, Any]:
        """The keys the file set, as the settings hold them (`"rerank_model": "none"` is None, no reranker)."""
        return self.model_dump(exclude_unset=True)


class Analysis(BaseModel):
    """How an experiment is read (issue 24; the maths in rag_app/experiments/sequential.py, the verdict in
    rag_app/experiments/verdict.py). Every key is optional; the defaults are GrowthBook's."""
    model_config = ConfigDict(extra="forbid")

    # None: hybrid when a planned end is set, else sequential
    method: Literal["sequential", "hybrid", "fixed"] | None = None
    alpha: StrictFloat = Field(0.05, gt=0, le=0.2)  # the whole experiment's: primary + guardrails
    expected_queries: StrictInt = Field(5000, ge=10, le=10 ** 9)  # N_tune: both arms, where the interval is tightest
    planned_queries: StrictInt | None = Field(None, ge=2)  # hybrid: the fixed-horizon read, at this many queries (both arms)
    planned_end: StrictStr | None = None  # hybrid: ... or from this UTC day on (YYYY-MM-DD)
    primary_metric: Literal[METRICS] = "cost_per_query"  # type: ignore[valid-type]
    guardrail_metrics: list[Literal[METRICS]] | None = None  # type: ignore[valid-type]  # None: every other metric
    primary_alpha_share: StrictFloat = Field(0.8, gt=0, lt=1)  # preferential Bonferroni; guardrails share the rest

    @model_validator(mode="after")
    def _consistent(self) -> "Analysis":
        if self.planned_end is not None:
            try:
                date.fromisoformat(self.planned_end)
            except ValueError:
                raise ValueError(f"planned_end {self.planned_end!r} is not a date; write it as YYYY-MM-DD") from None
        if self.method == "hybrid" and self.planned_queries is None and self.planned_end is None:
            raise ValueError("method hybrid switches to a fixed-horizon interval at the planned end; "
                             "set planned_queries or planned_end (or use method sequential)")
        if self.guardrail_metrics is not None:
            if self.primary_metric in self.guardrail_metrics:
                raise ValueError(f"{self.primary_metric} is the primary metric; remove it from guardrail_metrics")
            if len(set(self.guardrail_metrics)) != len(self.guardrail_metrics):
                raise ValueError("guardrail_metrics names a metric twice; list each once")
        return self


class Ramp(BaseModel):
    """Rollout steps in percent (e.g. [1, 10, 50, 100]) and the queries each arm needs at a step
    before the next (rag_app/experiments/rollout.py)."""
    model_config = ConfigDict(extra="forbid")

    steps: list[StrictInt | StrictFloat] = Field(min_length=1)
    min_queries_per_step: StrictInt = Field(1000, ge=1)  # a doubled error rate (2% -> 4%) is caught ~97% of the time (bench)

    @model_validator(mode="after")
    def _increasing(self) -> "Ramp":
        if any(not 0 < s <= 100 for s in self.steps):
            raise ValueError(f"steps {self.steps} must be percentages above 0 and at most 100")
        if any(b <= a for a, b in zip(self.steps, self.steps[1:])):
            raise ValueError(f"steps {self.steps} must increase, e.g. [1, 10, 50, 100]")
        return self


class Guardrails(BaseModel):
    """Thresholds of the verdict (defaults in rag_app/experiments/verdict.py). Typed here so that a mistyped value
    stops `rag serve` at start-up, never a 500 at the first comparison."""
    model_config = ConfigDict(extra="forbid")

    min_cost_drop_pct: StrictInt | StrictFloat = Field(10.0, ge=0, le=100)  # promote only on a drop this large
    max_error_rate_increase: StrictInt | StrictFloat = Field(0.01, ge=0, le=1)  # as a share: 0.01 = 1 point
    srm_p: StrictFloat = Field(0.001, gt=0, lt=1)  # a split whose sizes disagree below this p is never promoted
    max_recall_drop: StrictInt | StrictFloat = Field(0.01, ge=0, le=1)  # `rag experiment replay`
    # never promote worse answers: mean groundedness may fall, invalid-citation share rise, by this much
    max_quality_drop: StrictInt | StrictFloat = Field(0.05, ge=0, le=1)
    # the refusal rate's own margin: an arm that refuses honestly a little more often is not worse by the
    # groundedness margin's yardstick
    max_refusal_rate_increase: StrictInt | StrictFloat = Field(0.05, ge=0, le=1)


class ExperimentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    control: StrictStr
    treatment: StrictStr
    rollout_pct: StrictInt | StrictFloat = Field(ge=0, le=100)  # strict: `true` is not 100
    seed: StrictStr = Field(min_length=1)
    mode: Literal["split", "shadow"] = "split"
    guardrails: Guardrails | None = None
    analysis: Analysis | None = None
    ramp: Ramp | None = None

    @model_validator(mode="after")
    def _ramp_fits(self) -> "ExperimentSpec":
        if self.ramp is not None:
            if self.mode != "split":
                raise ValueError("ramp: a shadow experiment answers everyone from control; ramps need mode split")
            if self.rollout_pct != 0 and self.rollout_pct not in self.ramp.steps:
                raise ValueError(f"rollout_pct {self.rollout_pct} is not a step of the ramp {self.ramp.steps}; "
                                 "set it to one of them (or 0 after a rollback)")
        return self


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
    variants = {n: v.overrides() for n, v in parsed.variants.items()}
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
        hint = f"{hint}; {_allowed_keys(loc)}"
    if isinstance(err.get("input"), bool) and err["type"] in ("int_type", "float_type"):
        msg, hint, more = "a number 0..100 is needed, not true/false", "write e.g. 100 for everyone", ""
        return f"{path}: {field}: {msg} — {hint}"
    # a whole object as input (a model-level check) would only repeat the file; its message names the keys
    if "input" in err and err["type"] not in ("extra_forbidden", "missing") and not isinstance(err["input"], dict):
        msg = f"{msg} (got {json.dumps(err['input'], ensure_ascii=False)[:60]})"
    more = f" (+{e.error_count() - 1} more)" if e.error_count() > 1 else ""
    where = f"{path}: {field}: " if field else f"{path}: "
    return where + msg + (f" — {hint}" if hint else "") + more


def _allowed_keys(loc: list[str]) -> str:
    """The keys allowed where `loc` names one that is not, the closest first (a typo names the key it missed)."""
    if len(loc) == 1:
        return "allowed here: variants, experiments"
    model: type[BaseModel] = Variant if loc[0] == "variants" else ExperimentSpec
    if model is ExperimentSpec and len(loc) > 3:  # a key inside experiments.NAME.analysis / .ramp
        inside: dict[str, type[BaseModel]] = {"analysis": Analysis, "ramp": Ramp, "guardrails": Guardrails}
        model = inside.get(loc[2], ExperimentSpec)
    close = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1, cutoff=0.6)
    near = f"did you mean {close[0]}? " if close else ""
    if model is Variant:  # some fifty keys: the page that lists them
        return (f"{near}(a variant's keys: docs/settings.md)" if close else
                "a variant sets chunker, collection or a setting of the query path (docs/settings.md)")
    return f"{near}allowed here: {', '.join(model.model_fields)}"
