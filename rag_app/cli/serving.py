"""`rag serve`: the HTTP service over the same RagApp (rag_app/service/)."""
from __future__ import annotations

import typer

from rag_app.cli.common import fail_one_line
from rag_app.core import RagError


def serve(host: str = typer.Option("127.0.0.1", help="bind address"),
          port: int = typer.Option(8000, help="port"),
          allow_remote: bool = typer.Option(False, "--allow-remote",
                                            help="bind beyond loopback without RAG_API_TOKEN (anyone reaching it may ingest)")):
    """HTTP service: /v1/ask, /v1/ingest, /v1/queries, /v1/reports/summary, /v1/experiments/NAME, /docs."""
    from rag_app.service import preflight

    try:  # cheap checks first: a bad setting fails in well under a second, before the heavy imports
        settings = preflight(host, allow_remote)
        from rag_app.service import create_app

        api = create_app(settings, bind_host=host)
    except RagError as e:
        fail_one_line(e)
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:  # listening: say where (uvicorn at log level warning says nothing)
                bound = [s.getsockname()[1] for srv in self.servers for s in (srv.sockets or ())]
                print(ready_banner(host, bound[0] if bound else port, settings.api_token is not None), flush=True)

    Server(uvicorn.Config(api, host=host, port=port, log_level="warning")).run()


def ready_banner(host: str, port: int, token: bool) -> str:
    """What `rag serve` prints once it answers: the URLs a person opens first."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else (
        f"[{host}]" if ":" in host else host)  # an all-interfaces bind is reached locally at loopback
    base = f"http://{shown}:{port}"
    lines = [f"rag serve: ready at {base}" + (f" (listening on {host})" if shown.strip("[]") != host else ""),
             f"  dashboard  {base}/dashboard",
             f"  API docs   {base}/docs",
             f"  health     {base}/healthz"]
    if token:
        lines.append("  API calls need the header Authorization: Bearer <key>")
    return "\n".join(lines)
