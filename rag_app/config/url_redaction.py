"""URLs as people may see them: what a log line, an error or /healthz shows of a URL that may carry a
secret. User and password, query and fragment never appear (an OTLP endpoint with basic auth, a
collector token in the query: refused for the OTLP endpoint, whose user information travels as a header
instead, `credentials_apart`); a webhook's path is a secret too (Slack's hooks carry their token in
it), so it is shown as scheme and host only. The ledger URL keeps its own rule (ledger_location.redact:
the user stays, the password is masked), since which user connects is worth seeing."""
from __future__ import annotations

import base64
import re
from urllib.parse import unquote, urlsplit, urlunsplit

_URL = re.compile(r"(?i)\b[a-z][\w+.-]*://[^\s'\"<>()]+")


def shown_url(url: str, *, path: bool = True) -> str:
    """`https://user:pw@host:4318/v1/traces?token=x` -> `https://host:4318/v1/traces`; with path=False
    -> `https://host:4318/…`."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number, an unbalanced [: show nothing of it
        return "(a URL that does not parse)"
    if not parts.scheme or not host:
        return "(a URL without scheme or host)"
    host = f"[{host}]" if ":" in host else host
    tail = (parts.path or "") if path else ("/…" if parts.path.strip("/") or parts.query else "")
    return f"{parts.scheme}://{host}{port}{tail}"


def scrub_urls(text: str) -> str:
    """Every URL in a message (an HTTP library's error, say) as `shown_url` shows it: no user,
    password, query or fragment."""
    return _URL.sub(lambda m: shown_url(m.group()), text)


def credentials_apart(url: str, setting: str = "RAG_OTEL_ENDPOINT") -> tuple[str, dict[str, str]]:
    """(the URL without user information, the headers that carry it): `https://u:pw@host/v1/traces` ->
    (`https://host/v1/traces`, {"authorization": "Basic dTpwdw=="}), so a client library never holds the
    password in a URL it may log (OpenTelemetry's exporter logs its endpoint on every retry). A query
    string is refused (ValueError): a token in it would be logged the same way; a header carries it."""
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise ValueError(f"{setting} carries a query string or fragment ({shown_url(url)}?…); send a "
                         "collector's token as a header instead: OTEL_EXPORTER_OTLP_HEADERS=name=value")
    if parts.username is None and parts.password is None:
        return url, {}
    netloc = parts.hostname or ""
    netloc = (f"[{netloc}]" if ":" in netloc else netloc) + (f":{parts.port}" if parts.port else "")
    basic = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    return (urlunsplit((parts.scheme, netloc, parts.path, "", "")),
            {"authorization": "Basic " + base64.b64encode(basic).decode()})
