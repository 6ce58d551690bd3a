"""Which variant answers a request: a pure function over the experiments file and the experiment as it is
served now, so the service only calls it (and a unit test can, without a service).

    served(config, name, rollout_pct) -> Experiment | None     RAG_EXPERIMENT at its ramp's current step
    route(config, experiment, default_variant, ...) -> Routing  the variant, its app, the experiment's arm

Inside an experiment a request gets an arm by `variants.assign`: growthbook's hash of the user, else the
session (sticky), else the request's own id (not sticky); below the rollout percentage, treatment. In shadow
mode control answers and treatment runs beside it (`Routing.assignment.shadow`). A variant asked for by
name (the OpenAI-compatible endpoint's `model`) answers outside any experiment."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rag_app.core import ConfigError
from rag_app.experiments.variants import Assignment, Experiment, ExperimentConfig, assign


@dataclass(frozen=True)
class Routing:
    variant: str  # as the ledger records it
    app_variant: str  # whose settings answer (a variant of RAG_EXPERIMENTS_FILE, or "default")
    assignment: Assignment | None = None  # the experiment's arm; None outside an experiment

    @property
    def experiment(self) -> str | None:
        return self.assignment.experiment if self.assignment else None

    def row(self) -> dict[str, Any]:
        """What the query row says of the arm (nothing outside an experiment)."""
        a = self.assignment
        return {"arm": a.arm, "sticky": int(a.sticky)} if a else {}


def served(config: ExperimentConfig, name: str | None, rollout_pct: float | None = None) -> Experiment | None:
    """The experiment `name` as it is served: the file's, at `rollout_pct` when a ramp has moved it."""
    exp = config.experiments.get(name) if name else None
    if exp is None or rollout_pct is None:
        return exp
    return dataclasses.replace(exp, rollout_pct=rollout_pct)


def route(config: ExperimentConfig, experiment: Experiment | None, default_variant: str, *,
          request_id: str, user_id: str | None = None, session_id: str | None = None,
          variant: str | None = None) -> Routing:
    """`experiment`: as served now (None: no experiment runs). `variant`: this one, outside any experiment
    (an unknown name is a ConfigError). `default_variant`: RAG_VARIANT, what the rows say outside one."""
    if experiment is None or variant is not None:
        if variant is not None and variant not in config.variants:
            raise ConfigError(f"unknown variant {variant!r}")
        name = variant or default_variant
        return Routing(name, name if name in config.variants else "default")
    a = assign(experiment, user_id, session_id, request_id=request_id)
    return Routing(a.variant, a.variant, a)
