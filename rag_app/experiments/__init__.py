"""Gray releases, from the file an operator writes to the promote / hold / roll back verdict: the
experiments file typed and checked (`schema`), variants and sticky traffic splits (`variants`), which
variant a request gets (`routing`), arms
compared from the ledger (`comparison`, reading what `evidence` gathers of each arm), the same
comparison at every hour or day of the experiment (`timeline`), intervals valid however often they are
read (`sequential`), one primary metric with guardrails (`verdict`), and the ramp that raises a share or
rolls it back (`rollout` decides, `ramp` applies it in the service). A change to any of these opens this folder only.

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.experiments.comparison import compare_served, replay
    from rag_app.experiments.ramp import RampController
    from rag_app.experiments.routing import route, served
    from rag_app.experiments.variants import Assignment, ExperimentConfig


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["Assignment", "ExperimentConfig", "RampController", "compare_served", "replay", "route", "served"]
