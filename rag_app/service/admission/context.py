"""What one question carries through admission: the request a front door built (`QueryRequest`), the
per-request context each step reads and adds to (`Admission`), and the result every front door presents
(`QueryResult`). Also the two contracts: a `Step`, and the `Router` the steps run on (the service's
VariantPool, or one RagApp for the shell: rag_app/service/shell.py)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

from rag_app.access import OPEN, Principal
from rag_app.access import Ticket
from rag_app.core import Answer
from rag_app.query import Scope
from rag_app.service.pool import Route
from rag_app.spend import Saving
from rag_app.spend import QuestionEstimate


@dataclass(frozen=True)
class QueryRequest:
    """One question as a front door received it (the user and session from the body, the key from
    the bearer token or, for `rag ask`, `cli`; a variant when a chat `model` names one)."""

    question: str
    user_id: str | None = None
    session_id: str | None = None
    scope: Scope | None = None
    key_id: str | None = None
    variant: str | None = None
    collection: str | None = None  # None: RAG_COLLECTION
    principal: Principal = OPEN  # the key that asked: its models, rate limits and budget apply
    model: str | None = None  # the chat request's `model` (a key's model list may name it)


@dataclass(frozen=True)
class QueryResult:
    """What the query service answers: the answer payload as the front doors present it (read-only),
    the route it took, whether the answer cache served it, and what that saved (None: a live answer)."""

    answer: Mapping[str, Any]
    route: Route
    cache_hit: bool
    saving: Saving | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "answer", MappingProxyType(dict(self.answer)))


class Router(Protocol):
    """Where admission sends a question: which variant answers (`route`), its app, and the run itself.
    `config.variants` (each variant's overrides: part of the cache key) and `base.writer` (where a cache
    hit's query row goes) as VariantPool has them."""

    config: Any
    base: Any

    def route(self, user_id: str | None = None, session_id: str | None = None, api_key_id: str | None = None,
              variant: str | None = None, collection: str | None = None) -> Route: ...

    def app_for(self, variant: str, collection: str | None = None) -> Any: ...

    def run(self, route: Route, question: str, scope: Scope | None = None,
            callbacks: Sequence[Any] = ()) -> Answer: ...


@dataclass(eq=False)
class Admission:
    """One question on its way through the steps. Mutable on purpose: each step reads what the steps
    before it added and adds its own (the field comments name the step that sets each)."""

    request: QueryRequest
    router: Router
    route: Route
    app: Any  # the RagApp of the route's variant and collection
    estimate: QuestionEstimate  # its largest bill: what the rate step reserves in tokens, the budget in dollars
    callbacks: Sequence[Any] = ()  # more LangChain handlers for the run (a stream's token sink)
    admitted: Callable[[str, str | None], None] | None = None  # told once the query may spend
    ticket: Ticket | None = None  # rate: the key's place in its window
    cache_key: str | None = None  # cache: where this question's answer is kept
    began: bool = False  # run: spend may have begun, so a failure from here keeps every reservation
    answer: Answer | None = None  # run: the live answer
    payload: dict[str, Any] | None = None  # run: the presenter's payload, what the cache keeps
    result: QueryResult | None = None  # cache (a hit) or run: what the front door gets


class Step(Protocol):
    """One admission step. `enter` refuses the question (raises), passes it on, or answers it (sets
    `result`: the steps after it see that and do no work). `undo` gives back what `enter` took when a later
    step refuses before the question began to spend."""

    name: ClassVar[str]

    def enter(self, ctx: Admission) -> None: ...

    def undo(self, ctx: Admission) -> None: ...
