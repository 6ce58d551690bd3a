"""`rag keys` as an operator runs it: create prints the secret once (`--json`: name and key), list never
shows it, rotate and revoke change what resolves, bad flags are one line naming the field, and a key
created here is the one `rag serve` (any replica on the same ledger) accepts."""
from __future__ import annotations

import json
import subprocess
import sys

from rag_app.access.keys import KeyRing
from tests.conftest import HANG_S
from tests.fakes.serve_proc import serve_env
from tracing.ledger import Ledger


def rag(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "rag_app.cli.main", "keys", *args], env=serve_env(tmp_path / "data", None),
                          capture_output=True, text=True, timeout=HANG_S)


def test_create_list_rotate_revoke(tmp_path):
    r = rag(tmp_path, "create", "--name", "alice", "--role", "member", "--budget-usd", "5", "--period", "week",
            "--rpm", "30", "--collections", "contracts,laws", "--json")
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    assert made["name"] == "alice" and made["key"].startswith("rag_")
    listed = rag(tmp_path, "list", "--json")
    assert made["key"] not in listed.stdout + listed.stderr
    alice = json.loads(listed.stdout)["keys"][0]
    assert (alice["budget_usd"], alice["period"], alice["rpm"], alice["collections"]) == (5, "week", 30,
                                                                                           ["contracts", "laws"])
    table = rag(tmp_path, "list")
    assert "alice" in table.stdout and max(map(len, table.stdout.splitlines())) <= 80
    ledger = Ledger.open(tmp_path / "data" / "ledger.sqlite")
    ring = KeyRing(ledger.key_by_secret, ledger.any_keys, ttl_s=0)
    assert ring.resolve(made["key"]).collections == ("contracts", "laws")
    new = rag(tmp_path, "rotate", "alice").stdout.strip()
    assert ring.resolve(new).name == "alice"
    assert rag(tmp_path, "revoke", "alice").returncode == 0
    assert [e["action"] for e in json.loads(rag(tmp_path, "audit", "--json").stdout)["events"]] == [
        "revoke", "rotate", "create"]
    ledger.close()


def test_bad_flags_are_one_line_naming_the_field(tmp_path):
    for args, field in ((["--name", "a b"], "name"), (["--name", "x", "--role", "owner"], "role"),
                        (["--name", "x", "--period", "year", "--budget-usd", "1"], "period"),
                        (["--name", "x", "--expires", "soon"], "expires"), (["--name", "x", "--rpm", "0"], "rpm"),
                        (["--name", "x", "--expires", "2020-01-01"], "expires"),  # born expired (#46)
                        (["--name", "x", "--max-collections", "3"], "max_collections"),
                        (["--name", "x", "--user", "evil\u202eman"], "user")):
        r = rag(tmp_path, "create", *args)
        assert r.returncode == 2 and field in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert rag(tmp_path, "create", "--name", "x").returncode == 0
    again = rag(tmp_path, "create", "--name", "x")
    assert again.returncode == 2 and "exists" in again.stderr
    assert rag(tmp_path, "revoke", "nobody").returncode == 2


def test_upload_rights_are_flags_and_the_audit_fits_80_columns(tmp_path):
    r = rag(tmp_path, "create", "--name", "up", "--ingest", "--replace", "--create-collections", "--max-collections",
            "2", "--documents", "劳动法.md", "--json")
    assert r.returncode == 0, r.stderr
    up = json.loads(rag(tmp_path, "list", "--json").stdout)["keys"][0]
    assert (up["can_ingest"], up["can_replace"], up["can_create_collections"], up["max_collections"]) == (True, True,
                                                                                                         True, 2)
    assert rag(tmp_path, "create", "--name", "up2", "--ingest", "--create-collections", "--json").returncode == 0
    assert json.loads(rag(tmp_path, "list", "--json").stdout)["keys"][1]["max_collections"] == 5  # the default cap
    with Ledger.open(tmp_path / "data" / "ledger.sqlite") as L:
        L.add_audits([{"at": "2026-12-04T07:00:00+00:00", "actor": "up", "action": "replace",
                       "target": "中华人民共和国劳动合同法（2012年12月28日修正）附件一.md", "detail": "{}"}])
    out = rag(tmp_path, "audit")
    assert "replace" in out.stdout and max(map(len, out.stdout.splitlines())) <= 80
