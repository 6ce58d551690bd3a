"""ASGI guard in front of the app: checks that must run before a route reads a byte of the body.

    Host header   not in the allow-list            -> 400  (DNS rebinding reads a tokenless API)
    cross-site    state-changing browser request   -> 403  (a page elsewhere posting a forged law)
    body size     Content-Length, then counted     -> 413  (a 300 MB upload is never spooled)
    /docs, /openapi.json with a token set          -> 401 without it

Written as plain ASGI, not BaseHTTPMiddleware, so the body is capped while it streams in.
"""
from __future__ import annotations

import json
import secrets
from urllib.parse import parse_qs, urlsplit

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
DOC_PATHS = {"/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"}


def host_only(value: str) -> str:
    """`[::1]:8000` -> `::1`, `Example.org:80` -> `example.org`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def token_matches(given: str | None, token: str) -> bool:
    # Compare bytes: compare_digest refuses non-ASCII str (a 500 before); headers arrive as latin-1.
    if given is None:
        return False
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass"))


class _BodyTooLarge(Exception):
    pass


class Guard:
    def __init__(self, app, *, allowed_hosts: set[str], max_body_bytes: int, max_json_bytes: int,
                 token: str | None):
        self.app = app
        self.allowed_hosts = {host_only(h) for h in allowed_hosts}
        self.max_body, self.max_json = max_body_bytes, max_json_bytes
        self.token = token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = host_only(headers.get("host", ""))
        if "*" not in self.allowed_hosts and host not in self.allowed_hosts:
            return await _reply(send, 400, f"Host {host!r} is not served here; add it to RAG_ALLOWED_HOSTS "
                                           "(comma-separated) if this name should reach the service")
        method, path = scope["method"], scope["path"]
        if method not in SAFE_METHODS and _cross_site(headers):
            return await _reply(send, 403, "cross-site request refused: state-changing endpoints accept only "
                                           "same-origin browser requests or non-browser clients")
        if self.token is not None and path in DOC_PATHS:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            auth = headers.get("authorization", "")
            given = auth[7:] if auth.lower().startswith("bearer ") else (query.get("token") or [None])[0]
            if not token_matches(given, self.token):
                return await _reply(send, 401, "the API description needs the token: "
                                               "`Authorization: Bearer <RAG_API_TOKEN>` or ?token=")
        limit = self.max_body if path == "/v1/ingest" else self.max_json
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await _reply(send, 413, _too_large(limit, path))
        return await self._capped(scope, receive, send, limit, path)

    async def _capped(self, scope, receive, send, limit: int, path: str):
        seen, overflow, started = 0, False, False

        async def counting_receive():
            nonlocal seen, overflow
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    overflow = True
                    raise _BodyTooLarge()
            return message

        async def tracking_send(message):
            nonlocal started
            if overflow:
                return  # the app's own error page for the aborted read is replaced by the 413
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except Exception:
            if not overflow:
                raise
        if overflow and not started:
            await _reply(send, 413, _too_large(limit, path))


def _cross_site(headers: dict[str, str]) -> bool:
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")  # "none": typed by the user, not sent by a page
    origin = headers.get("origin")
    if origin is None:  # curl, httpx, the CLI: no browser, no ambient credentials to forge with
        return False
    parts = urlsplit(origin)
    return origin == "null" or parts.netloc.lower() != headers.get("host", "").lower()


def _too_large(limit: int, path: str) -> str:
    if path == "/v1/ingest":
        return f"request body larger than {limit / 2**20:g} MB (RAG_MAX_REQUEST_MB); send fewer or smaller files"
    return f"request body larger than {limit / 2**20:g} MB (the JSON limit); send a shorter request"


async def _reply(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
