"""HTTP service (`rag serve`): FastAPI over the same RagApp the CLI uses. `app` builds the state and
includes one router per resource (`routes/`); routes take what they need through the typed
dependencies in `deps`; `query_service` is the one query service that /v1/ask, its SSE form,
/v1/chat/completions and `rag ask` all call, its admission a named sequence of steps, one file each
(`admission/`: models -> rate -> cache -> budget -> run -> settle); `shell` builds it for `rag ask` over
one RagApp; `pool` keeps one app per variant, each built at start-up by `variant_apps`; `inputs`, `guards`, `streaming`,
`openai_compat`, `answers` and `startup` are the edges."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.service.app import create_app
    from rag_app.service.pool import VariantPool
    from rag_app.service.shell import shell_request, shell_service
    from rag_app.service.startup import preflight

__all__ = ["VariantPool", "create_app", "preflight", "shell_request", "shell_service"]

if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)
