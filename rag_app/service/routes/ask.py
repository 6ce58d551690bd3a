"""/v1/ask (JSON or SSE), /v1/chat/completions (OpenAI-compatible, JSON or SSE) and /v1/models: each
parses its request, hands one `QueryRequest` to the query service and presents what comes back."""
from __future__ import annotations

from collections.abc import Callable


from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_app.service.deps import Authed, Bearer, ServiceState, Svc
from rag_app.service.inputs import AskScope
from rag_app.service.openai_compat import ChatRequest, ChunkStream, completion, models_payload, question_of, variant_for
from rag_app.service.pool import Route
from rag_app.service.query_service import QueryRequest
from rag_app.service.streaming import SSE_HEADERS, StreamedQuery, rest_of, sse
from rag_app.text.edge_text import EdgeText

router = APIRouter(dependencies=Authed)


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # {"scopes": ...} was ignored: the answer came unscoped
    question: EdgeText = Field(min_length=1, max_length=8000)
    user_id: EdgeText | None = Field(None, max_length=200)
    session_id: EdgeText | None = Field(None, max_length=200)
    scope: AskScope | None = None
    stream: bool = False  # SSE: tokens as they come, the answer and its cost in the last event

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is only whitespace; send the question text")
        return v


def scope_of(req: AskScope | None):
    from rag_app.query.scope import Scope

    try:
        return Scope(tuple(req.docs), tuple(req.laws)) or None if req else None
    except ValueError as e:  # a blank or overlong name: the same 422 as any other bad field
        raise HTTPException(422, f"scope: {e}") from None


def api_key_id(token: str) -> str:
    """What the ledger records for a bearer token: 12 hex digits of its SHA-256 (tells keys apart, reveals none)."""
    import hashlib

    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def key_of(svc: ServiceState, creds) -> str | None:
    # spend per API key: the ledger keeps a short hash of the bearer token, never the token
    return api_key_id(creds.credentials) if creds and svc.settings.api_token is not None else None


def presented(svc: ServiceState, result: tuple[dict, Route]) -> dict:
    payload, route = result
    svc.answers.put(payload)
    a = route.assignment
    return {**payload,
            "experiment": route.experiment, "variant": route.variant,
            "arm": a.arm if a else None, "sticky": a.sticky if a else None,
            # the figures above come from the answer itself; this says whether its rows are on disk yet
            "ledger": "buffered" if svc.pool.base.writer.failing else "ok"}


def streamed(svc: ServiceState, req: QueryRequest) -> StreamedQuery:
    """Start a query in a worker thread; returns once it is admitted (a refusal raises: its status)."""
    q = StreamedQuery(lambda callbacks, admitted: svc.queries.answer(req, callbacks=callbacks, admitted=admitted))
    q.wait_admitted()
    return q


@router.post("/v1/ask")
def ask(req: AskRequest, svc: Svc, creds: Bearer):
    """The answer, its citations and its cost. `stream: true`: SSE, `token` events as the LLM sends
    them, then one `answer` event with the whole payload and its cost (or one `error` event)."""
    query = QueryRequest(req.question, req.user_id, req.session_id, scope_of(req.scope), key_of(svc, creds))
    if not req.stream:
        return presented(svc, svc.queries.answer(query))
    q = streamed(svc, query)

    def events():
        for kind, value in q.follow():
            if kind == "token":
                yield sse({"text": value}, "token")
            elif kind == "error":
                yield sse(svc.error_body(value), "error")
            else:
                yield sse(presented(svc, value), "answer")
    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


@router.get("/v1/models")
def models(svc: Svc):
    """OpenAI-compatible: `legal-rag` (routed as /v1/ask) and one model per variant."""
    return models_payload(sorted(svc.pool.config.variants))


@router.post("/v1/chat/completions")
def chat_completions(req: ChatRequest, svc: Svc, creds: Bearer):
    """OpenAI-compatible chat completions over the same query path and ledger as /v1/ask
    (rag_app/service/openai_compat.py)."""
    variant = variant_for(req.model, sorted(svc.pool.config.variants))
    query = QueryRequest(question_of(req.messages), req.user, None, scope_of(req.scope), key_of(svc, creds), variant)
    show: Callable[[tuple[dict, Route]], dict] = lambda result: presented(svc, result)  # noqa: E731
    if not req.stream:
        return completion(show(svc.queries.answer(query)), req.model)
    q = streamed(svc, query)
    chunks = ChunkStream(req.model).events(q.follow(), q.query_id, show, rest_of, svc.error_body)

    def events():
        for c in chunks:
            yield sse(c)
        yield "data: [DONE]\n\n"
    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


