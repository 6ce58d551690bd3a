"""The OpenAI-compatible front door: `POST /v1/chat/completions` and `GET /v1/models`, so any chat UI
or SDK (the `openai` client, LangChain's ChatOpenAI) can ask `rag serve`.

- `model`: a variant of RAG_EXPERIMENTS_FILE (one model per variant, run as that variant), or
  `legal-rag`: routed exactly as `/v1/ask` routes (the live experiment, else RAG_VARIANT).
- The question is the last `user` message (answers are single-turn: earlier turns are not retrieved on).
- `user` is the ledger's user_id; the bearer token is the API key, as for `/v1/ask`; `scope` (an extra
  field, e.g. `extra_body={"scope": {"laws": ["公司法"]}}`) limits the documents searched.
- Every call is one ledger query, the same rows as `/v1/ask`, behind the same budgets.
- Citations ride in the message (a "Sources:" list after the answer) and in an extra `citations` field;
  `query_id` and `cost_usd` ride along too.
- `stream: true` is SSE: chat.completion.chunk deltas as the LLM sends them, a last chunk with
  finish_reason and the citations, then a usage chunk (always sent; with the cost), then [DONE].
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from rag_app.text import EdgeText
from rag_app.service.inputs import AskScope
from rag_app.present import citation_label

ROUTED_MODEL = "legal-rag"  # the model that routes like /v1/ask
OWNER = "legal-rag"


class ContentPart(BaseModel):
    """One part of a message's content list: a text part is read; an image, audio or file part a chat
    client sends beside it is accepted and not read. Any other shape is a 422 naming the part (a
    number, list, object or null as `text` was a 500)."""
    model_config = ConfigDict(extra="allow")
    type: Literal["text", "image_url", "input_audio", "file", "refusal"]
    text: EdgeText | None = Field(None, max_length=8000, validate_default=True)

    @field_validator("text")
    @classmethod
    def _text_part_has_text(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None and info.data.get("type") == "text":
            raise ValueError("a text part needs `text`, a string")
        return v


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: EdgeText = Field(max_length=50)
    content: EdgeText | list[ContentPart] | None = Field(None, union_mode="left_to_right")


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, max_tokens, ...: the variant's settings decide
    model: EdgeText = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=500)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: EdgeText | None = Field(None, max_length=200)
    scope: AskScope | None = None
    collection: EdgeText | None = Field(None, min_length=1, max_length=200)  # None: RAG_COLLECTION


def question_of(messages: list[ChatMessage]) -> str:
    """The last user message's text (a string, or the text parts of a content list)."""
    for m in reversed(messages):
        if m.role != "user":
            continue
        if isinstance(m.content, str):
            text = m.content
        else:
            text = "".join(p.text or "" for p in (m.content or []) if p.type == "text")
        if not text.strip():
            raise HTTPException(400, "messages: the last user message has no text; put the question in it")
        if len(text) > 8000:
            raise HTTPException(400, "messages: the question is over 8000 characters; shorten it")
        return text
    raise HTTPException(400, "messages: no message with role \"user\"; send the question as one")


def models_payload(variants: list[str]) -> dict:
    return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": OWNER}
                                       for m in [ROUTED_MODEL, *variants]]}


def variant_for(model: str, variants: list[str]) -> str | None:
    """None: route as /v1/ask does; else the variant the model names (404 for an unknown one)."""
    if model == ROUTED_MODEL:
        return None
    if model not in variants:
        raise HTTPException(404, f"model {model!r} not found; GET /v1/models lists {ROUTED_MODEL} and one "
                                 "model per variant")
    return model


def sources(citations: list[dict]) -> str:
    if not citations:
        return ""
    return "\n\nSources:\n" + "\n".join(f"[{i}] {citation_label(c)}" for i, c in enumerate(citations, 1))


def usage_of(payload: dict) -> dict:
    """Billed LLM tokens of the query (a skipped, extractive generate bills none) and its cost."""
    gen = [s for s in payload["stages"] if s["stage"] == "generate" and s["status"] != "skipped"]
    prompt = sum(s["input_tokens"] for s in gen)
    completion = sum(s["output_tokens"] for s in gen)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "cost_usd": payload["total_cost_usd"], "priced_cost_usd": payload.get("priced_cost_usd"),
            "unpriced": payload["unpriced"]}


def extras(payload: dict) -> dict:
    return {"query_id": payload["query_id"], "citations": payload["citations"], "cost_usd": payload["total_cost_usd"],
            "mode": payload["mode"], "quality": payload.get("quality")}


def completion(payload: dict, model: str) -> dict:
    content = payload["answer"] + sources(payload["citations"])
    return {"id": f"chatcmpl-{payload['query_id']}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                         "message": {"role": "assistant", "content": content,
                                                     "citations": payload["citations"]}}],
            "usage": usage_of(payload), **extras(payload)}


class ChunkStream:
    """chat.completion.chunk objects of one streamed answer."""

    def __init__(self, model: str):
        self.model, self.created, self.id = model, int(time.time()), "chatcmpl-pending"

    def chunk(self, delta: dict | None, finish: str | None = None, **more: Any) -> dict:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": choices, **more}

    def events(self, follow: Iterator[tuple[str, Any]], query_id: str | None,
               finish: Callable[[Any], dict], rest_of: Callable[[str, str], str], error: Callable[[BaseException], dict],
               ) -> Iterator[dict]:
        """`finish(result)` -> the answer payload; `error(exc)` -> an error body."""
        if query_id:
            self.id = f"chatcmpl-{query_id}"
        yield self.chunk({"role": "assistant", "content": ""})
        streamed = ""
        for kind, value in follow:
            if kind == "token":
                streamed += value
                yield self.chunk({"content": value})
            elif kind == "error":
                yield {"error": error(value)}
                return
            else:
                payload = finish(value)
                tail = rest_of(payload["answer"], streamed) + sources(payload["citations"])
                if tail:
                    yield self.chunk({"content": tail})
                yield self.chunk({}, "stop", **extras(payload))
                yield self.chunk(None, usage=usage_of(payload))
