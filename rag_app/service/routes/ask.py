"""/v1/ask (JSON or SSE), /v1/chat/completions (OpenAI-compatible, JSON or SSE) and /v1/models: each
parses its request, hands one `QueryRequest` to the query service and presents what comes back."""
from __future__ import annotations

from collections.abc import Callable


from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_app.access import Principal, token_key_id
from rag_app.access import collection_for, scope_for, user_for
from rag_app.core import StoreError
from rag_app.store import check_name
from rag_app.service.deps import Authed, Caller, ServiceState, Svc
from rag_app.service.inputs import AskScope
from rag_app.service.openai_compat import ChatRequest, ChunkStream, completion, models_payload, question_of, variant_for
from rag_app.service.query_service import QueryRequest, QueryResult
from rag_app.service.streaming import SSE_HEADERS, StreamedQuery, rest_of, sse
from rag_app.text import EdgeText

router = APIRouter(dependencies=Authed)


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # {"scopes": ...} was ignored: the answer came unscoped
    question: EdgeText = Field(min_length=1, max_length=8000)
    user_id: EdgeText | None = Field(None, max_length=200)
    session_id: EdgeText | None = Field(None, max_length=200)
    scope: AskScope | None = None
    collection: EdgeText | None = Field(None, min_length=1, max_length=200)  # None: RAG_COLLECTION
    stream: bool = False  # SSE: tokens as they come, the answer and its cost in the last event

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is only whitespace; send the question text")
        return v


def scope_of(req: AskScope | None):
    from rag_app.query import Scope

    try:
        return Scope(tuple(req.docs), tuple(req.laws)) or None if req else None
    except ValueError as e:  # a blank or overlong name: the same 422 as any other bad field
        raise HTTPException(422, f"scope: {e}") from None


api_key_id = token_key_id  # what the ledger records for RAG_API_TOKEN (an issued key: its name)


def query_request(svc: ServiceState, who: Principal, question: str, user: str | None, session: str | None,
                  scope: AskScope | None, collection: str | None, variant: str | None = None,
                  model: str | None = None) -> QueryRequest:
    """One question as the key may ask it: its user, its collection, its documents (Forbidden: 403)."""
    if collection is not None:
        try:
            check_name(collection)
        except StoreError as e:  # a field of the request, not a state of the store: 422 like any bad field
            raise HTTPException(422, f"collection: {e}") from None
    name = collection_for(who, collection, svc.settings.collection)
    if name != svc.settings.collection and not svc.pool.has_collection(name):
        raise HTTPException(404, f"no collection {name[:80]!r} in this service's store; ingest into it first")
    return QueryRequest(question, user_for(who, user), session, scope_for(who, scope_of(scope)), who.name, variant,
                        name, who, model)


def presented(svc: ServiceState, result: QueryResult) -> dict:
    payload, route = result.answer, result.route
    svc.answers.put(dict(payload))
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
def ask(req: AskRequest, svc: Svc, who: Caller):
    """The answer, its citations and its cost. `stream: true`: SSE, `token` events as the LLM sends
    them, then one `answer` event with the whole payload and its cost (or one `error` event)."""
    query = query_request(svc, who, req.question, req.user_id, req.session_id, req.scope, req.collection)
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
def chat_completions(req: ChatRequest, svc: Svc, who: Caller):
    """OpenAI-compatible chat completions over the same query path and ledger as /v1/ask
    (rag_app/service/openai_compat.py)."""
    variant = variant_for(req.model, sorted(svc.pool.config.variants))
    query = query_request(svc, who, question_of(req.messages), req.user, None, req.scope, req.collection, variant,
                          req.model)
    show: Callable[[QueryResult], dict] = lambda result: presented(svc, result)  # noqa: E731
    if not req.stream:
        return completion(show(svc.queries.answer(query)), req.model)
    q = streamed(svc, query)
    chunks = ChunkStream(req.model).events(q.follow(), q.query_id, show, rest_of, svc.error_body)

    def events():
        for c in chunks:
            yield sse(c)
        yield "data: [DONE]\n\n"
    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


