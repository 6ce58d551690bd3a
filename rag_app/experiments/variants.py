"""Variants and experiments: named pipeline settings, and sticky, monotone traffic splits.

A *variant* is a named set of pipeline settings: chunker + collection, and any setting of the query path
under its own name (rag_app/query/knobs.py, docs/settings.md: prompt_version, llm_model, top_k/top_n,
rerank_model, retrieval_levers, query_rewrite, query_adapter, a lever's weight, ...). An *experiment* pits a control variant against a treatment with a
rollout percentage, a seed and a mode (`split` or `shadow`). Assignment is a pure function after
growthbook's: fnv1a32 hash of (seed, unit id) -> a bucket in [0, 1) -> treatment when the bucket is
below the rollout fraction. So the same user always lands in the same arm, and raising the
percentage only ever moves users from control to treatment. Rollout stages are config, not code.

Config file (JSON; RAG_EXPERIMENTS_FILE):
    {"variants": {"baseline": {}, "big-top-n": {"top_n": 8, "prompt_version": "v1"}},
     "experiments": {"topn": {"control": "baseline", "treatment": "big-top-n",
                              "rollout_pct": 10, "seed": "topn-2026-11", "mode": "split",
                              "analysis": {"primary_metric": "cost_per_query", "expected_queries": 5000},
                              "ramp": {"steps": [1, 10, 50, 100], "min_queries_per_step": 1000}}}}
`analysis` and `ramp` are optional (fields and defaults: rag_app/experiments/schema.py Analysis, Ramp).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rag_app.core import ConfigError


def fnv1a32(text: str) -> int:
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def bucket(seed: str, unit: str) -> float:
    """Uniform in [0, 1), stable for (seed, unit); growthbook's v2 double hash."""
    return (fnv1a32(str(fnv1a32(seed + unit))) % 10000) / 10000


@dataclass(frozen=True)
class Experiment:
    name: str
    control: str
    treatment: str
    rollout_pct: float
    seed: str
    mode: str = "split"  # split | shadow
    guardrails: dict = field(default_factory=dict)
    analysis: dict | None = None  # how compare reads it (experiments_schema.Analysis); None: the defaults
    ramp: dict | None = None  # {"steps": [1, 10, 50, 100], "min_queries_per_step": 1000} (rag_app/experiments/rollout.py)

    def __post_init__(self):
        if not 0 <= self.rollout_pct <= 100:
            raise ConfigError(f"experiment {self.name!r}: rollout_pct must be 0..100, got {self.rollout_pct}")
        if self.mode not in ("split", "shadow"):
            raise ConfigError(f"experiment {self.name!r}: mode must be split or shadow, got {self.mode!r}")


@dataclass(frozen=True)
class Assignment:
    experiment: str
    variant: str
    arm: str  # control | treatment
    unit: str
    sticky: bool  # False: no user/session id, a per-request hash was used
    shadow: str | None = None  # variant to run in the background (shadow mode)


def assign(exp: Experiment, user_id: str | None = None, session_id: str | None = None,
           request_id: str | None = None) -> Assignment:
    unit = user_id or session_id
    sticky = unit is not None
    unit = unit or request_id or str(uuid.uuid4())
    if exp.mode == "shadow":  # everyone is answered by control; treatment runs on the side
        return Assignment(exp.name, exp.control, "control", unit, sticky, shadow=exp.treatment)
    treated = bucket(exp.seed, unit) < exp.rollout_pct / 100
    return Assignment(exp.name, exp.treatment if treated else exp.control,
                      "treatment" if treated else "control", unit, sticky)


@dataclass(frozen=True)
class ExperimentConfig:
    variants: dict[str, dict]
    experiments: dict[str, Experiment]

    @classmethod
    def load(cls, path: Path | None) -> "ExperimentConfig":
        if path is None:
            return cls({"default": {}}, {})
        from rag_app.experiments.schema import parse_config

        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read the experiments file ({e}); "
                              "check RAG_EXPERIMENTS_FILE points at a UTF-8 JSON file") from e
        variants, experiments = parse_config(text, str(path))
        return cls({"default": {}, **variants},
                   {name: Experiment(name=name, **e) for name, e in experiments.items()})
