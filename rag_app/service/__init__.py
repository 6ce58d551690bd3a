"""HTTP service (`rag serve`): FastAPI over the same RagApp the CLI uses. `app` builds the state and
includes one router per resource (`routes/`); routes take what they need through the typed
dependencies in `deps`; `query_service` is the one query policy (answer cache -> budget -> pipeline
-> presenter) that /v1/ask, its SSE form and /v1/chat/completions all call; `pool` keeps one
pipeline per experiment arm; `inputs`, `guards`, `streaming`, `openai_compat`, `answers` and
`startup` are the edges."""
