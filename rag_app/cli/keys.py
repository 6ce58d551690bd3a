"""`rag keys create|list|revoke|rotate|audit`: issued API keys, kept hashed in the ledger every replica
reads (rag_app/access/). The secret is printed once, by create and rotate, and never stored."""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Optional

import typer

from rag_app.cli.common import fail_one_line
from rag_app.core import RagError
from rag_app.text import shown_name


@contextmanager
def _ledger():
    from rag_app.config import load_settings
    from tracing.ledger import Ledger

    try:
        with Ledger.open(load_settings().ledger) as ledger:
            yield ledger
    except RagError as e:
        fail_one_line(e)


def _actor() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no login name (a container): still say it came from the shell
        return "cli"


def create(name: str = typer.Option(..., "--name", help="the key's name: its spend and rows are filed under it"),
           user: Optional[str] = typer.Option(None, "--user", help="the user it speaks for (default: its name)"),
           role: str = typer.Option("member", "--role", help="admin | member"),
           budget_usd: Optional[str] = typer.Option(None, "--budget-usd", help="a hard budget of its own, in USD"),
           period: str = typer.Option("month", "--period", help="the budget's period: day | week | month"),
           rpm: Optional[int] = typer.Option(None, "--rpm", help="requests per minute"),
           tpm: Optional[int] = typer.Option(None, "--tpm", help="tokens per minute"),
           models: Optional[str] = typer.Option(None, "--models", help="models or variants it may use: m1,m2"),
           collections: Optional[str] = typer.Option(None, "--collections", help="collections it may read: c1,c2"),
           documents: Optional[str] = typer.Option(None, "--documents", help="documents it may read: a.md,b.pdf"),
           ingest: bool = typer.Option(False, "--ingest", help="may upload documents into its collections"),
           replace: bool = typer.Option(False, "--replace",
                                        help="an upload may replace a document of the same name (with --ingest)"),
           create_collections: bool = typer.Option(False, "--create-collections",
                                                   help="an upload may create a collection (with --ingest)"),
           max_collections: Optional[int] = typer.Option(None, "--max-collections",
                                                         help="how many it may create (default 5)"),
           expires: Optional[str] = typer.Option(None, "--expires", help="UTC date or date-time it stops working"),
           as_json: bool = typer.Option(False, "--json", help='print {"name": ..., "key": ...}')):
    """Issue an API key; its secret is printed once (keep it: only a hash is stored)."""
    from rag_app.access import manage
    from rag_app.access import KeySpec

    try:
        spec = KeySpec.parse({"name": name, "user": user, "role": role, "budget_usd": budget_usd, "period": period,
                              "rpm": rpm, "tpm": tpm, "models": models, "collections": collections,
                              "documents": documents, "can_ingest": ingest, "expires": expires,
                              "can_replace": replace, "can_create_collections": create_collections,
                              "max_collections": max_collections})
    except RagError as e:
        fail_one_line(e)
    with _ledger() as ledger:
        try:
            secret = manage.create(ledger, spec, _actor())
        except RagError as e:
            fail_one_line(e)
    if as_json:
        print(json.dumps({"name": spec.name, "key": secret}))
    else:
        print(secret)
        typer.echo(f"key {spec.name!r} ({spec.role}, user {spec.user or spec.name}): the line above is its secret, "
                   "shown once", err=True)


def list_keys(as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Every key: name, its secret's first characters, user, role, state, limits (never a secret)."""
    from rag_app.access import manage

    with _ledger() as ledger:
        rows = manage.listing(ledger)
    if as_json:
        print(json.dumps({"keys": rows}, ensure_ascii=False, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    from rag_app.present import keyed_labels

    def build(labels: dict) -> Table:  # a key or user name too long for 80 columns: N1, spelled out below
        t = Table(box=None, pad_edge=False)
        for col in ("name", "prefix", "user", "role", "state", "budget", "rpm", "tpm", "expires"):
            t.add_column(col, no_wrap=True)
        for r in rows:
            budget = f"${r['budget_usd']:g}/{r['period']}" if r["budget_usd"] is not None else "-"
            t.add_row(labels[r["name"]], r["prefix"] + "…", labels.get(r["user"], "-"), r["role"], r["state"], budget,
                      str(r["rpm"] or "-"), str(r["tpm"] or "-"), (r["expires_at"] or "-")[:10])
        return t
    console = Console(width=80)
    if not rows:
        console.print("no keys issued yet: rag keys create --name NAME")
        return
    table, legend = keyed_labels([name for r in rows for name in (r["name"], r["user"])], build, "N")
    console.print(table)
    for line in legend:
        console.print(line)


def revoke(name: str = typer.Argument(..., help="the key's name")):
    """Revoke a key: every replica refuses it (401) within seconds; its rows and spend stay."""
    from rag_app.access import manage

    with _ledger() as ledger:
        try:
            manage.revoke(ledger, name, _actor())
        except RagError as e:
            fail_one_line(e)
    print(f"revoked {name}")


def rotate(name: str = typer.Argument(..., help="the key's name"),
           as_json: bool = typer.Option(False, "--json", help='print {"name": ..., "key": ...}')):
    """A new secret for a key (printed once); the old one stops working. Name, limits and history stay."""
    from rag_app.access import manage

    with _ledger() as ledger:
        try:
            secret = manage.rotate(ledger, name, _actor())
        except RagError as e:
            fail_one_line(e)
    print(json.dumps({"name": name, "key": secret}) if as_json else secret)


def audit(limit: int = typer.Option(50, "--limit", min=1, max=1000, help="the N latest changes"),
          as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Who created, rotated or revoked which key, uploaded or replaced which document, created which
    collection, and when (`--json`: with each row's detail: user, collection, SHA-256, replaced id)."""
    with _ledger() as ledger:
        rows = ledger.key_audit(limit)
    if as_json:
        print(json.dumps({"events": rows}, ensure_ascii=False, indent=2))
        return
    for r in rows:  # 80 columns: the time to the second, who, what, and as much of the target as fits
        target = shown_name(r["target"])
        print(f"{r['at'][:19]} {r['actor'][:14]:<14} {r['action'][:17]:<17} "
              f"{target if len(target) <= 27 else target[:26] + '…'}")
