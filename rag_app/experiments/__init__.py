"""Gray releases, from the file an operator writes to the promote / hold / roll back verdict: the
experiments file typed and checked (`schema`), variants and sticky traffic splits (`variants`), which
variant a request gets (`routing`), arms
compared from the ledger (`comparison`, reading what `evidence` gathers of each arm), the same
comparison at every hour or day of the experiment (`timeline`), intervals valid however often they are
read (`sequential`), one primary metric with guardrails (`verdict`), and the ramp that raises a share or
rolls it back (`rollout` decides, `ramp` applies it in the service). A change to any of these opens this folder only.

Import the module you need; this file only names them."""

__all__ = ["comparison", "evidence", "ramp", "rollout", "routing", "schema", "sequential", "timeline",
           "variants", "verdict"]
