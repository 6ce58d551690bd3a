"""/v1/experiments: the experiments file's names, and one experiment's live comparison (at the ramp
step it is served at, with the ramp's moves)."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query

from rag_app.access import check_admin
from rag_app.service.deps import Authed, Caller, Svc

router = APIRouter(dependencies=Authed)


@router.get("/v1/experiments")
def experiments(svc: Svc, who: Caller):
    check_admin(who, "experiments")
    return {"experiments": sorted(svc.pool.config.experiments), "live": svc.settings.experiment}


@router.get("/v1/experiments/{name}")
def experiment(name: str, svc: Svc, who: Caller,
               over_time: str | None = Query(None, description="auto | hour | day: also the comparison at the end "
                                                               "of every hour or day (`rag experiment compare "
                                                               "--over-time --json`)")):
    """The experiment as `rag experiment compare --json` prints it (one computation): at the rollout it is
    served at, with the ramp's moves and, where this server runs the ramp, its last look."""
    check_admin(who, "experiments")
    from rag_app.core import RagError
    from rag_app.experiments import compare_served

    exp = svc.pool.config.experiments.get(name)
    if exp is None:
        raise HTTPException(404, f"no experiment {name[:80]!r} in RAG_EXPERIMENTS_FILE")
    try:
        res = svc.read(lambda L: compare_served(L, exp, over_time=over_time))
    except RagError as e:  # a bad `over_time`, or hours over too long an experiment: the one line, never a 500
        raise HTTPException(422, str(e)) from None
    ramp = svc.pool.ramp
    if ramp is not None and ramp.exp.name == name and "ramp" in res:
        res["ramp"]["last_look"] = ramp.state()["last_look"]
    return res
