"""Where the ledger lives: `RAG_LEDGER_URL` parsed into a `LedgerTarget` (a SQLite file or a
PostgreSQL database), and the redaction that keeps its password out of every message.

Settings need this to validate at start-up and the ledger needs it to connect; it lives here, outside
`tracing/`, so that configuration does not import the observer."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from rag_app.core import ConfigError

ENV = "RAG_LEDGER_URL"


class LedgerURLError(ConfigError, ValueError):
    """RAG_LEDGER_URL cannot be used; the message says how to fix it (and never holds a password)."""


@dataclass(frozen=True)
class LedgerTarget:
    """A ledger location: a SQLite file, or a PostgreSQL database (conninfo URL)."""
    dialect: str  # "sqlite" | "postgresql"
    path: Path | None = None
    url: str | None = None  # full URL with the password: pass it to the driver, never print it

    @property
    def display(self) -> str:
        """What to show people and logs: the URL without its password."""
        return str(self.path) if self.dialect == "sqlite" else redact(self.url or "")

    def scrub(self, text: str) -> str:
        """`text` (an error message, say) with this ledger's password masked wherever it appears: a
        driver may echo part of a URL it could not parse, which no pattern over URLs would catch."""
        return scrub(text, self.url or "")

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"LedgerTarget({self.dialect}, {self.display})"

    def exists(self) -> bool:
        """A SQLite file that is there; a PostgreSQL ledger is created on first connect, so: True."""
        return self.path.exists() if self.dialect == "sqlite" and self.path is not None else True

    def user_and_database(self) -> tuple[str | None, str | None]:
        """The PostgreSQL user and database this URL names (for messages: neither is a secret)."""
        if self.dialect != "postgresql" or not self.url:
            return None, None
        import psycopg.conninfo

        info = psycopg.conninfo.conninfo_to_dict(self.url)
        user, dbname = info.get("user"), info.get("dbname")
        return (None if user is None else str(user)), (None if dbname is None else str(dbname))

    @property
    def key(self) -> str:
        """A short stable name for files about this ledger (spill files)."""
        ident = str(self.path.resolve()) if self.dialect == "sqlite" and self.path is not None else self.display
        return hashlib.sha1(ident.encode()).hexdigest()[:12]


_SCHEME = re.compile(r"^([A-Za-z][\w+.-]*://)(.*)$", re.DOTALL)
_PASSWORD_PARAM = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)")


def redact(url: str) -> str:
    """`postgresql://user:secret@host/db?password=x` -> `postgresql://user:***@host/db?password=***`.

    The user information is everything up to the *last* `@` after the scheme, so a password with an
    unencoded `@`, `#`, `?` or `/` is masked whole (over-masking an `@` in a query string is the safe side)."""
    m = _SCHEME.match(url)
    if m:
        rest = m.group(2)
        at = rest.rfind("@")
        if at >= 0 and ":" in rest[:at]:
            url = m.group(1) + rest[:at].split(":", 1)[0] + ":***" + rest[at:]
    return _PASSWORD_PARAM.sub(lambda mm: mm.group(1) + "***", url)


def secrets_in(url: str) -> list[str]:
    """The password(s) a ledger URL or conninfo string carries, raw and URL-decoded."""
    found = []
    m = _SCHEME.match(url)
    if m:
        rest = m.group(2)
        at = rest.rfind("@")
        if at >= 0 and ":" in rest[:at]:
            found.append(rest[:at].split(":", 1)[1])
    found += [p.group(2).strip("'") for p in _PASSWORD_PARAM.finditer(url)]
    out = {s for f in found if f for s in (f, unquote(f))}
    return sorted(out, key=len, reverse=True)


# A password this long is masked wherever it occurs; a shorter one also occurs inside ordinary words
# ("on" in "connection"), where masking it would garble the message and show which letters it is
MASK_MIN_CHARS = 8
WITHHELD = "the driver's message is withheld: it contains text equal to the ledger's password"


def scrub(text: str, url: str) -> str:
    """`text` with every password of `url` replaced by ***, and any URL in it redacted; a text that
    contains a short password anywhere is withheld whole."""
    text = redact(text)
    for secret in secrets_in(url):
        if secret in text:
            if len(secret) < MASK_MIN_CHARS:
                return WITHHELD
            text = text.replace(secret, "***")
    return text


def parse_ledger_url(url: str | None, default_path: Path) -> LedgerTarget:
    """RAG_LEDGER_URL -> LedgerTarget; unset or empty: the SQLite file `default_path`."""
    if url is None or not url.strip():
        return LedgerTarget("sqlite", path=Path(default_path))
    url = url.strip()
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        # SQLAlchemy's form: sqlite:///relative/file.sqlite, sqlite:////absolute/file.sqlite
        if not url.lower().startswith("sqlite:///") or len(url) == len("sqlite:///"):
            raise LedgerURLError(f"{ENV}={redact(url)} is not a SQLite file URL; write sqlite:///relative/ledger.sqlite "
                                 "or sqlite:////absolute/ledger.sqlite (an in-memory ledger would lose every row)")
        path = unquote(url[len("sqlite:///"):].split("?", 1)[0])
        return LedgerTarget("sqlite", path=Path(path))
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        pg = "postgresql" + url[len(scheme):]
        unencoded = _unencoded_in_userinfo(pg)
        if unencoded:  # libpq would read part of the password as the host, port or database, then print it
            raise LedgerURLError(f"{ENV}: the password holds an unencoded {unencoded}; percent-encode it "
                                 "(@ as %40, / as %2F, : as %3A, ? as %3F, # as %23), e.g. in Python "
                                 "urllib.parse.quote(password, safe='')")
        try:
            import psycopg.conninfo
        except ImportError as e:
            raise LedgerURLError(f"{ENV} names PostgreSQL but psycopg is not installed; "
                                 "pip install 'psycopg[binary]' (a dependency of this package)") from e
        try:
            info = psycopg.conninfo.conninfo_to_dict(pg)
        except psycopg.Error as e:
            raise LedgerURLError(f"{ENV}={redact(url)} is not a valid PostgreSQL URL ({scrub(str(e), url)}); "
                                 "write postgresql://USER:PASSWORD@HOST:5432/DBNAME") from None
        port = str(info.get("port") or "5432")
        if not all(p.strip().isdigit() for p in port.split(",")):
            raise LedgerURLError(f"{ENV}={redact(url)} is not a valid PostgreSQL URL (its port is not a number); "
                                 "write postgresql://USER:PASSWORD@HOST:5432/DBNAME")
        if not info.get("dbname"):
            raise LedgerURLError(f"{ENV}={redact(url)} names no database; "
                                 "write postgresql://USER:PASSWORD@HOST:5432/DBNAME")
        return LedgerTarget("postgresql", url=pg)
    raise LedgerURLError(f"{ENV}={redact(url)} has an unknown scheme {scheme or '(none)'!r}; use "
                         "sqlite:////absolute/ledger.sqlite or postgresql://USER:PASSWORD@HOST:5432/DBNAME")


def _unencoded_in_userinfo(url: str) -> str | None:
    """`'@'` or `'/, ? or #'` when the URL's user information holds one unencoded, else None.

    A password is read by libpq up to the first `@` before the first `/`, `?` or `#`: `u:p@ss?x@host/db` is
    user u, password `p`, host `ss` and a query string `x@host/db`, whose tail libpq then prints in its
    error. So an `@` after the first of those delimiters, with no `=` between them (no query parameter
    such as `?application_name=a@b` holds it), means the password ran past a delimiter."""
    m = _SCHEME.match(url)
    if not m:
        return None
    rest = m.group(2)
    cut = re.search(r"[/?#]", rest)
    authority, tail = (rest[:cut.start()], rest[cut.end():]) if cut else (rest, "")
    if authority.count("@") > 1:
        return "'@'"
    if "@" not in authority and "@" in rest and ":" in authority:
        return "'/', '?' or '#'"
    if "@" in authority and ":" in authority.split("@", 1)[0] and "@" in tail and "=" not in tail[:tail.rfind("@")]:
        return "'/', '?' or '#' (with an '@')"
    return None


def as_target(where: LedgerTarget | str | Path) -> LedgerTarget:
    """A LedgerTarget from what callers hold: a target, a URL string, or a SQLite file path."""
    if isinstance(where, LedgerTarget):
        return where
    if isinstance(where, str) and re.match(r"(?i)(sqlite|postgres(ql)?(\+psycopg)?):", where):
        return parse_ledger_url(where, Path("ledger.sqlite"))
    return LedgerTarget("sqlite", path=Path(where))
