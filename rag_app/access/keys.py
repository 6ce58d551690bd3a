"""API keys: issued with `rag keys create` or POST /v1/keys, shown once, kept as a SHA-256 of the
secret in the ledger (both engines), resolved on every request.

A key is known by its name: every ledger row of its queries records the name as `api_key_id` and the
key's user as `user_id`, so rotating the secret keeps its history, budget and limits. RAG_API_TOKEN stays
the bootstrap admin key (recorded, as before, by 12 hex digits of its hash). Replicas cache what they
resolved for `ttl_s` (2 s): a revoked or expired key is refused by every replica within that time.
Secrets are 32 random bytes, so one SHA-256 is enough to keep them (no password stretching needed:
nobody can guess one to test against the hash)."""
from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from rag_app.core import ConfigError
from rag_app.text import has_bidi

log = logging.getLogger(__name__)

ADMIN, MEMBER = "admin", "member"
ROLES = (ADMIN, MEMBER)
PERIODS = ("day", "week", "month")
SECRET_PREFIX = "rag_"
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@")
NANO = Decimal(10**9)
DEFAULT_MAX_COLLECTIONS = 5  # what --create-collections allows without --max-collections


class Unauthorized(Exception):
    """401: no key, a wrong one, or one revoked or expired (the message says which)."""


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def token_key_id(token: str) -> str:
    """What the ledger records for the bootstrap token: 12 hex digits of its SHA-256 (as before keys)."""
    return secret_hash(token)[:12]


@dataclass(frozen=True)
class Principal:
    """Who a request speaks for and what it may do. `name` is the ledger's `api_key_id`."""

    name: str | None
    user: str | None
    role: str
    models: tuple[str, ...] | None = None
    collections: tuple[str, ...] | None = None
    documents: tuple[str, ...] | None = None
    rpm: int | None = None
    tpm: int | None = None
    budget_nano_usd: int | None = None
    budget_period: str | None = None
    can_ingest: bool = False
    issued: bool = False  # an issued key (False: the bootstrap token, or no auth at all)
    can_replace: bool = False  # an upload may take the place of a document of its name
    can_create_collections: bool = False  # an upload may create a collection, up to `max_collections`
    max_collections: int | None = None

    @property
    def admin(self) -> bool:
        return self.role == ADMIN


OPEN = Principal(None, None, ADMIN)  # no RAG_API_TOKEN and no key issued: the service is open, as before keys


def bootstrap(token: str) -> Principal:
    return Principal(token_key_id(token), None, ADMIN)


def _names(raw: Any, field_: str) -> tuple[str, ...] | None:
    if raw is None or raw == "" or raw == []:
        return None
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    names = tuple(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))
    if not names or any(len(n) > 200 for n in names):
        raise ConfigError(f"{field_}: a comma-separated list of names, each at most 200 characters")
    return names


def _positive(v: Any, field_: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{field_} must be a whole number of at least 1, got {v!r}")
    return v


# -- KeySpec's fields, one check each: the value as kept, or a ConfigError naming the field --------------------

def _key_name(v: Any) -> str:
    name = str(v or "")
    if not name or len(name) > 64 or not set(name) <= NAME_CHARS:
        raise ConfigError(f"name {name[:80]!r}: 1-64 characters of letters, digits, - _ . @")
    return name


def _one_of(v: Any, allowed: tuple[str, ...], field_: str) -> str:
    if v not in allowed:
        raise ConfigError(f"{field_} must be {', '.join(allowed[:-1])} or {allowed[-1]}, got {v!r}")
    return str(v)


def _budget(v: Any) -> Decimal | None:
    if v is None:
        return None
    try:
        budget = Decimal(str(v))
    except InvalidOperation:
        raise ConfigError(f"budget_usd must be a number of dollars, got {v!r}") from None
    if not budget.is_finite() or budget <= 0:
        raise ConfigError(f"budget_usd must be above 0, got {budget}")
    return budget


def _user(v: Any) -> str | None:
    if v is None:
        return None
    if not str(v).strip() or len(str(v)) > 200 or has_bidi(str(v)):
        raise ConfigError("user: non-empty text of at most 200 characters, without bidirectional controls")
    return str(v)


def _future_expiry(v: Any, now: datetime) -> str | None:
    expires = _expiry(v)
    if expires is not None and expires <= stamp(now):
        raise ConfigError(f"expires {expires} is in the past: the key would be born expired; give a later "
                          "date (UTC), or no --expires")
    return expires


def _collections_cap(v: Any, create: bool) -> int | None:
    """How many collections the key may create: given, else DEFAULT_MAX_COLLECTIONS; None without the right."""
    cap = _positive(v, "max_collections")
    if cap is not None and not create:
        raise ConfigError("max_collections needs can_create_collections (--create-collections)")
    return (cap or DEFAULT_MAX_COLLECTIONS) if create else None


@dataclass(frozen=True)
class KeySpec:
    """What `rag keys create` and POST /v1/keys are given, checked field by field."""

    name: str
    user: str | None = None
    role: str = MEMBER
    budget_usd: Decimal | None = None
    period: str = "month"
    rpm: int | None = None
    tpm: int | None = None
    models: tuple[str, ...] | None = None
    collections: tuple[str, ...] | None = None
    documents: tuple[str, ...] | None = None
    can_ingest: bool = False
    expires: str | None = None  # ISO date or date-time, UTC
    can_replace: bool = False
    can_create_collections: bool = False
    max_collections: int | None = None  # with can_create_collections: DEFAULT_MAX_COLLECTIONS unless given

    @classmethod
    def parse(cls, d: dict[str, Any], now: datetime | None = None) -> KeySpec:
        """Each field checked in turn (the first one wrong is a ConfigError naming it and what it takes)."""
        create = bool(d.get("can_create_collections"))
        return cls(name=_key_name(d.get("name")), role=_one_of(d.get("role") or MEMBER, ROLES, "role"),
                   period=_one_of(d.get("period") or "month", PERIODS, "period"),
                   budget_usd=_budget(d.get("budget_usd")), user=_user(d.get("user")),
                   expires=_future_expiry(d.get("expires"), now or datetime.now(UTC)),
                   max_collections=_collections_cap(d.get("max_collections"), create),
                   rpm=_positive(d.get("rpm"), "rpm"), tpm=_positive(d.get("tpm"), "tpm"),
                   models=_names(d.get("models"), "models"), collections=_names(d.get("collections"), "collections"),
                   documents=_names(d.get("documents"), "documents"), can_ingest=bool(d.get("can_ingest")),
                   can_replace=bool(d.get("can_replace")), can_create_collections=create)

    def row(self, secret: str, now: datetime) -> dict[str, Any]:
        import json

        def listed(v: tuple[str, ...] | None) -> str | None:
            return json.dumps(list(v), ensure_ascii=False) if v is not None else None

        return {"name": self.name, "secret_sha256": secret_hash(secret), "prefix": secret[:8],
                "user_id": self.user or self.name, "role": self.role,
                "budget_nano_usd": int(self.budget_usd * NANO) if self.budget_usd is not None else None,
                "budget_period": self.period if self.budget_usd is not None else None,
                "rpm": self.rpm, "tpm": self.tpm, "models": listed(self.models),
                "collections": listed(self.collections), "documents": listed(self.documents),
                "can_ingest": int(self.can_ingest), "created_at": stamp(now), "expires_at": self.expires,
                "can_replace": int(self.can_replace), "can_create_collections": int(self.can_create_collections),
                "max_collections": self.max_collections}

    def shown(self) -> dict[str, Any]:
        """The settings an audit row records (never the secret)."""
        return {k: (str(v) if isinstance(v, Decimal) else list(v) if isinstance(v, tuple) else v)
                for k, v in self.__dict__.items() if v is not None and v is not False}


def _expiry(v: Any) -> str | None:
    if v in (None, ""):
        return None
    try:
        t = datetime.fromisoformat(str(v)) if "T" in str(v) else datetime.combine(date.fromisoformat(str(v)),
                                                                                   datetime.min.time())
    except ValueError:
        raise ConfigError(f"expires must be a date (2027-01-31) or date-time, got {str(v)[:40]!r}") from None
    return stamp(t if t.tzinfo else t.replace(tzinfo=UTC))


def stamp(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="seconds")


def principal_of(row: dict[str, Any]) -> Principal:
    import json

    def listed(v: str | None) -> tuple[str, ...] | None:
        return tuple(json.loads(v)) if v else None

    return Principal(row["name"], row["user_id"], row["role"], listed(row["models"]), listed(row["collections"]),
                     listed(row["documents"]), row["rpm"], row["tpm"], row["budget_nano_usd"], row["budget_period"],
                     bool(row["can_ingest"]), issued=True, can_replace=bool(row.get("can_replace")),
                     can_create_collections=bool(row.get("can_create_collections")),
                     max_collections=row.get("max_collections"))


def refusal(row: dict[str, Any] | None, now: datetime) -> str | None:
    """Why a key row cannot be used now (None: it can)."""
    if row is None:
        return "unknown API key"
    if row["revoked_at"]:
        return f"API key {row['name']!r} was revoked at {row['revoked_at']}"
    if row["expires_at"] and stamp(now) >= row["expires_at"]:
        return f"API key {row['name']!r} expired at {row['expires_at']}"
    return None


@dataclass
class KeyRing:
    """Resolves a bearer secret to its Principal through the ledger, remembering each answer `ttl_s`."""

    lookup: Callable[[str], dict[str, Any] | None]  # secret_sha256 -> key row (the ledger)
    any_issued: Callable[[], bool]
    ttl_s: float = 2.0
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    _seen: dict[str, tuple[float, dict[str, Any] | None]] = field(default_factory=dict)
    _issued: tuple[float, bool] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def issued(self) -> bool:
        """Whether any key was ever issued (then a request without a key is refused even with no token).
        While the ledger cannot be read, the last answer stands; never read at all, none is assumed (the
        service stays as open as before keys: set RAG_API_TOKEN wherever keys are issued)."""
        now = time.monotonic()
        with self._lock:
            if self._issued is not None and now - self._issued[0] < self.ttl_s:
                return self._issued[1]
        try:
            found = self.any_issued()
        except Exception as e:
            with self._lock:
                known = self._issued
            log.warning("keys issued? the ledger cannot say (%s); %s", getattr(e, "detail", e),
                        "keeping the last answer" if known else "assuming none")
            return known[1] if known else False
        with self._lock:
            self._issued = (now, found)
        return found

    def forget(self) -> None:
        """Drop what was read: a key revoked or rotated here is refused at once on this replica (others
        within `ttl_s`)."""
        with self._lock:
            self._seen.clear()

    def resolve(self, secret: str) -> Principal:
        h, now = secret_hash(secret), time.monotonic()
        with self._lock:
            hit = self._seen.get(h)
        if hit is None or now - hit[0] >= self.ttl_s:
            try:
                row = self.lookup(h)
            except Exception:
                if hit is None:
                    raise  # never read: the caller answers 503 (the ledger is down), not 401
                row = hit[1]  # the ledger is down: the key is judged by what was last read
            else:
                with self._lock:
                    if len(self._seen) > 10_000:  # bounded: a flood of wrong keys must not grow memory
                        self._seen.clear()
                    self._seen[h] = (now, row)
        else:
            row = hit[1]
        why = refusal(row, self.clock())
        if why is not None:
            raise Unauthorized(why)
        assert row is not None
        return principal_of(row)
