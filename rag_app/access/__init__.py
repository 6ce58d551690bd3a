"""Who is asking and what they may do: issued API keys (`rag keys`, /v1/keys), the identity every
ledger row takes from its key, per-key rate limits counted across replicas, and what a key may read
(collections, documents, models) and see (a member its own queries; an admin everything).
`keys` issues and resolves keys, `rate` admits requests per minute, `rights` decides what a key may do."""
from rag_app.access.keys import ADMIN, MEMBER, OPEN, Principal, KeyRing, KeySpec, bootstrap
from rag_app.access.rate import RateLimited, RateLimiter
from rag_app.access.rights import Forbidden

__all__ = ["ADMIN", "MEMBER", "OPEN", "Forbidden", "KeyRing", "KeySpec", "Principal", "RateLimited", "RateLimiter",
           "bootstrap"]
