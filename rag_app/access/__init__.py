"""Who is asking and what they may do: issued API keys (`rag keys`, /v1/keys), the identity every
ledger row takes from its key, per-key rate limits counted across replicas, and what a key may read
(collections, documents, models) and see (a member its own queries; an admin everything).
`keys` issues and resolves keys, `rate` admits requests per minute, `rights` decides what a key may do,
`manage` issues, rotates and revokes keys with their audit rows."""
from rag_app.access.keys import ADMIN, MEMBER, OPEN, Principal, KeyRing, KeySpec, bootstrap
from rag_app.access.rate import RateLimited, RateLimiter
from rag_app.access.rights import Forbidden

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.access.keys import Unauthorized, principal_of, stamp, token_key_id
    from rag_app.access.manage import audit_budgets
    from rag_app.access.rate import Ticket
    from rag_app.access.rights import (check_admin, check_create, check_ingest, check_models, check_replace,
                                       check_writes, collection_for, scope_for, seen_user, user_for)


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["ADMIN", "MEMBER", "OPEN", "Forbidden", "KeyRing", "KeySpec", "Principal", "RateLimited",
           "RateLimiter", "Ticket", "Unauthorized", "audit_budgets", "bootstrap", "check_admin",
           "check_create", "check_ingest", "check_models", "check_replace", "check_writes", "collection_for",
           "principal_of", "scope_for", "seen_user", "stamp", "token_key_id", "user_for"]
