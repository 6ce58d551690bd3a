"""Settings fail at start-up in one line naming the setting, and a RagApp that fails while opening
releases what it had opened: the same process can open the store again right after."""
from __future__ import annotations

import pytest

from rag_app.app import RagApp
from rag_app.config.settings import load_settings
from rag_app.core.errors import ConfigError
from tests.conftest import make_settings


def test_a_bad_lever_list_fails_when_settings_load_not_at_the_first_question(monkeypatch):
    monkeypatch.setenv("RAG_RETRIEVAL_LEVERS", "rescore+magic")
    with pytest.raises(ConfigError, match="RAG_RETRIEVAL_LEVERS") as e:
        load_settings(_env_file=None)
    assert "\n" not in str(e.value) and "rescore+charge" in str(e.value)  # one line, with a valid example


def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv("RAG_CONTEXT_TOKENS", "abc")
    with pytest.raises(ConfigError) as e:
        load_settings(_env_file=None)
    assert str(e.value).startswith("environment: RAG_CONTEXT_TOKENS:") and "\n" not in str(e.value)


def test_a_misspelt_setting_is_named_with_the_closest_real_one():
    from rag_app.config.settings import unknown_setting_warnings

    warnings = unknown_setting_warnings({"RAG_CONTEXT_TOKEN": "800", "RAG_DATA_DIR": "x", "HOME": "/"})
    assert warnings == ["RAG_CONTEXT_TOKEN is not a setting and is ignored; did you mean RAG_CONTEXT_TOKENS?"]


def test_a_failed_app_releases_the_store(tmp_path, monkeypatch):
    bad_prices = tmp_path / "prices.json"
    bad_prices.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="prices.json"):
        RagApp(make_settings(tmp_path, price_overrides=bad_prices))

    def refuse(*a, **k):
        raise ConfigError("RAG_LEDGER_URL=postgresql://rag:***@db/ledger: password authentication failed")
    with monkeypatch.context() as m:  # fails after the store is open (a wrong ledger password does this)
        m.setattr("rag_app.app.LedgerWriter", refuse)
        with pytest.raises(ConfigError, match="RAG_LEDGER_URL"):
            RagApp(make_settings(tmp_path))
    with RagApp(make_settings(tmp_path)) as app:  # the embedded store's lock was released both times
        assert app.store.info(app.settings.collection) is None
