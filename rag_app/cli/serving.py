"""`rag serve`: the HTTP service over the same RagApp (rag_app/service/)."""
from __future__ import annotations

import typer

from rag_app.cli.common import fail_one_line
from rag_app.core.errors import RagError


def serve(host: str = typer.Option("127.0.0.1", help="bind address"),
          port: int = typer.Option(8000, help="port"),
          allow_remote: bool = typer.Option(False, "--allow-remote",
                                            help="bind beyond loopback without RAG_API_TOKEN (anyone reaching it may ingest)")):
    """HTTP service: /v1/ask, /v1/ingest, /v1/queries, /v1/reports/summary, /v1/experiments/NAME, /docs."""
    from rag_app.service.startup import preflight

    try:  # cheap checks first: a bad setting fails in well under a second, before the heavy imports
        settings = preflight(host, allow_remote)
        from rag_app.service.app import create_app

        api = create_app(settings, bind_host=host)
    except RagError as e:
        fail_one_line(e)
    import uvicorn

    uvicorn.run(api, host=host, port=port, log_level="warning")
