"""/v1/experiments: the experiments file's names, and one experiment's live comparison (at the ramp
step it is served at, with the ramp's moves)."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException

from rag_app.access.rights import check_admin
from rag_app.service.deps import Authed, Caller, Svc

router = APIRouter(dependencies=Authed)


@router.get("/v1/experiments")
def experiments(svc: Svc, who: Caller):
    check_admin(who, "experiments")
    return {"experiments": sorted(svc.pool.config.experiments), "live": svc.settings.experiment}


@router.get("/v1/experiments/{name}")
def experiment(name: str, svc: Svc, who: Caller):
    check_admin(who, "experiments")
    from rag_app.experiments.comparison import compare_live

    exp = svc.pool.config.experiments.get(name)
    if exp is None:
        raise HTTPException(404, f"no experiment {name!r} in RAG_EXPERIMENTS_FILE")
    ramp = svc.pool.ramp
    if ramp is not None and ramp.exp.name == name:  # compared at the step it is served at, with its moves
        return {**svc.read(lambda L: compare_live(L, ramp.live())), "ramp": ramp.state()}
    return svc.read(lambda L: compare_live(L, exp))
