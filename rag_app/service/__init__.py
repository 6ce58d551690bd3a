"""HTTP service (`rag serve`): FastAPI over the same RagApp the CLI uses. `app` builds the state and
includes one router per resource (`routes/`); routes take what they need through the typed
dependencies in `deps`; `query_service` is the one query service that /v1/ask, its SSE form,
/v1/chat/completions and `rag ask` all call, its admission a named sequence of steps, one file each
(`admission/`: models -> rate -> cache -> budget -> run -> settle); `shell` builds it for `rag ask` over
one RagApp; `pool` keeps one app per variant, each built at start-up by `variant_apps`; `inputs`, `guards`, `streaming`,
`openai_compat`, `answers` and `startup` are the edges."""
