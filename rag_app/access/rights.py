"""What a key may do, decided before any work: which user it speaks for, which collection and
documents it reads, which models it uses, whether it may upload, which names, whether an upload may
replace a document or create a collection, and whose queries it sees.
A refusal is `Forbidden` (403) naming what was asked and what the key allows."""
from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import PurePath

from rag_app.access.keys import Principal
from rag_app.query import Scope


class Forbidden(Exception):
    """403: the key is known but may not do this."""


def user_for(p: Principal, asked: str | None) -> str | None:
    """The user the ledger records: a member's own; an admin may act for a user (its key is recorded)."""
    if p.admin:
        return asked if asked is not None else p.user
    if asked is not None and asked != p.user:
        raise Forbidden(f"API key {p.name!r} speaks for user {p.user!r}, not {asked[:80]!r}; "
                        "send no user_id (a member key's user is its own)")
    return p.user


def collection_for(p: Principal, asked: str | None, default: str) -> str:
    """The collection a query reads: the one asked for, else the default when the key may read it,
    else the first of the key's."""
    if asked is None:
        return default if p.collections is None or default in p.collections else p.collections[0]
    if p.collections is not None and asked not in p.collections:
        raise Forbidden(f"API key {p.name!r} may not read collection {asked[:80]!r} "
                        f"(it may read: {', '.join(p.collections)})")
    return asked


def _norm(name: str) -> str:
    return unicodedata.normalize("NFKC", name).strip().casefold()


def scope_for(p: Principal, scope: Scope | None) -> Scope | None:
    """A key limited to documents searches only those: no scope becomes its documents; a scope must
    stay inside them (documents named by `docs`; a law name could mean others, so it is refused)."""
    if p.documents is None:
        return scope
    if scope is None or not scope:
        return Scope(docs=p.documents)
    outside = _outside(p.documents, scope)
    if outside is not None:
        raise Forbidden(f"API key {p.name!r} may read only its documents ({', '.join(p.documents[:5])}"
                        f"{'…' if len(p.documents) > 5 else ''}); {outside[:80]!r} is not one of them")
    return scope


def _outside(documents: tuple[str, ...], scope: Scope) -> str | None:
    """The first thing `scope` names beyond `documents`: a document not among them, else a law (a law name
    could mean documents the key was not given); None when it stays inside."""
    allowed = {_norm(d) for d in documents}
    outside = [d for d in scope.docs if _norm(d) not in allowed]
    if outside:
        return outside[0]
    return f"law {scope.laws[0]}" if scope.laws else None


def check_models(p: Principal, names: Iterable[str | None]) -> None:
    """A key with a model list may use a route whose model or variant name is on it."""
    if p.models is None:
        return
    given = [n for n in names if n]
    if not any(n in p.models for n in given):
        raise Forbidden(f"API key {p.name!r} may not use {' / '.join(given)[:120]} "
                        f"(its models: {', '.join(p.models)})")


def check_ingest(p: Principal, collection: str) -> None:
    if p.admin:
        return
    if not p.can_ingest:
        raise Forbidden(f"API key {p.name!r} may not upload documents; an admin can create a key with --ingest")
    collection_for(p, collection, collection)


def check_writes(p: Principal, names: Sequence[str]) -> None:
    """A key with a document list uploads only those names (its file name, or its name without the
    extension, as listed): uploading another would put text in front of every reader of the collection
    that the key was never given to write."""
    if p.admin or p.documents is None:
        return
    allowed = {_norm(d) for d in p.documents}
    for name in names:
        if _norm(name) not in allowed and _norm(PurePath(name).stem) not in allowed:
            raise Forbidden(f"API key {p.name!r} may upload only its documents ({', '.join(p.documents[:5])}"
                            f"{'…' if len(p.documents) > 5 else ''}); {name[:120]!r} is not one of them")


def check_replace(p: Principal, name: str, collection: str) -> None:
    """Taking the place of a document already in the collection is a right of its own (--replace): the
    refusal names the document, never its id."""
    if not (p.admin or p.can_replace):
        raise Forbidden(f"API key {p.name!r} may not replace {name[:120]!r}: a document of that name is already "
                        f"in collection {collection!r}; an admin can replace it, or create a key with --replace")


def check_create(p: Principal, collection: str) -> int | None:
    """Creating a collection needs an admin key or one created with --create-collections; the number of
    collections that key may create (None: no limit, an admin)."""
    if p.admin:
        return None
    if not p.can_create_collections or p.max_collections is None:
        raise Forbidden(f"API key {p.name!r} may not create collection {collection[:80]!r}; an admin creates it "
                        "(its first upload), or creates a key with --create-collections")
    return p.max_collections


def check_admin(p: Principal, what: str) -> None:
    if not p.admin:
        raise Forbidden(f"{what} needs an admin key; API key {p.name!r} is a member")


def seen_user(p: Principal) -> str | None:
    """Whose queries a listing shows: a member only its own user's (None: everyone's, for an admin)."""
    return None if p.admin else (p.user or "")


def names(items: Sequence[str] | None) -> str:
    return ", ".join(items) if items else "any"
