"""Every lever of this package, found by module: a module whose name does not start with `_` defines
`LEVER`, so adding a lever is adding one file."""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from rag_app.query.levers._contract import STAGES, Lever, Stage


@lru_cache(maxsize=1)
def units() -> tuple[Lever, ...]:
    """Every lever, in the order a search runs them (stage, then `order`)."""
    package = __name__.rpartition(".")[0]
    found = [importlib.import_module(f"{package}.{m.name}").LEVER
             for m in pkgutil.iter_modules(importlib.import_module(package).__path__) if not m.name.startswith("_")]
    return in_run_order(found)


def in_run_order(found: list[Lever]) -> tuple[Lever, ...]:
    """`found` by stage, then `order`; a name used twice or a stage the search has no step for is an error."""
    names = [u.name for u in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two levers share a name: {sorted(names)}")
    for u in found:
        if u.stage not in STAGES:
            raise RuntimeError(f"lever {u.name!r}: stage {u.stage!r} is none of {', '.join(STAGES)}")
    return tuple(sorted(found, key=lambda u: (STAGES.index(u.stage), u.order, u.name)))


def unit(name: str) -> Lever:
    return {u.name: u for u in units()}[name]


def of_stage(names: tuple[str, ...], stage: Stage) -> list[Lever]:
    """The levers named in `names` that run at `stage`, in run order."""
    return [u for u in units() if u.stage == stage and u.name in names]
