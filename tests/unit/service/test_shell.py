"""`rag ask`'s side of the query service (rag_app/service/shell.py): who asks, and the one-app router."""
from __future__ import annotations

import getpass

import pytest

from rag_app.app import RagApp
from rag_app.core.errors import ConfigError
from rag_app.service.shell import CLI_KEY, OneApp, os_user, shell_request
from tests.conftest import make_settings


def test_the_shell_asks_as_the_key_cli_for_the_os_user_or_the_one_named():
    mine = shell_request("q")
    assert (mine.key_id, mine.user_id, mine.principal.name, mine.principal.user) == (
        "cli", getpass.getuser(), "cli", getpass.getuser())
    assert CLI_KEY == "cli" and mine.principal.admin  # the shell user holds the data dir and ledger anyway
    theirs = shell_request("q", user="alice", variant="cheap")
    assert (theirs.user_id, theirs.principal.user, theirs.variant) == ("alice", "alice", "cheap")


def test_without_a_login_name_the_user_is_the_uid(monkeypatch):
    def no_name():
        raise OSError("No username set in the environment")
    monkeypatch.setattr(getpass, "getuser", no_name)
    assert os_user().startswith("uid-") and shell_request("q").user_id == os_user()  # a user budget still binds


def test_one_app_routes_every_question_to_its_app_with_origin_cli(tmp_path):
    with RagApp(make_settings(tmp_path)) as app:
        router = OneApp(app)
        r = router.route("alice", None, "cli", "cheap")
        assert (r.variant, r.app_variant, r.experiment, r.assignment) == ("cheap", "default", None, None)
        assert r.extra == {"user_id": "alice", "session_id": None, "origin": "cli", "api_key_id": "cli"}
        assert router.route().variant == app.settings.variant and router.route().query_id != r.query_id
        assert router.app_for("anything") is app and router.config.variants == {"default": {}}
        with pytest.raises(ConfigError, match="reads collection 'legal', not 'other'"):
            router.route(collection="other")
