""".env.example and docs/settings.md are written from the settings' declarations (rag_app/config/envfile.py,
`make settings-docs`): a setting added, a default or a description changed without rewriting them fails here."""
from __future__ import annotations

import pytest

from rag_app.config.envfile import ENV_EXAMPLE, REPO, SETTINGS_DOC, env_example, main, sections, settings_doc
from rag_app.config.settings import Settings


@pytest.mark.parametrize("path,render", [(ENV_EXAMPLE, env_example), (SETTINGS_DOC, settings_doc)],
                         ids=lambda v: getattr(v, "name", ""))
def test_the_shipped_file_is_the_one_the_settings_write(path, render):
    assert path.read_text(encoding="utf-8") == render(), (
        f"{path.relative_to(REPO)} is out of step with the settings: run `make settings-docs` and commit it")


def test_every_setting_is_in_one_section_and_says_what_it_does():
    listed = [name for section in sections() for name in section.fields]
    assert sorted(listed) == sorted(Settings.model_fields)  # each once
    assert all(section.heading for section in sections())
    missing = [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()]
    assert not missing, f"settings without a description (Field(description=...)): {missing}"


def test_check_names_a_stale_file(tmp_path, monkeypatch, capsys):
    import rag_app.config.envfile as envfile

    stale = tmp_path / ".env.example"
    stale.write_text("RAG_TOP_K=20  # candidates retrieved\n", encoding="utf-8")
    monkeypatch.setattr(envfile, "REPO", tmp_path)
    monkeypatch.setattr(envfile, "ENV_EXAMPLE", stale)
    monkeypatch.setattr(envfile, "SETTINGS_DOC", tmp_path / "settings.md")
    assert main(["--check"]) == 1
    assert ".env.example is out of step" in capsys.readouterr().err
    assert main(["--write"]) == 0 and main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == env_example()


def test_the_docs_table_names_each_variable_with_its_default():
    doc = settings_doc()
    assert "| `RAG_TOP_K` | `20` | candidates retrieved |" in doc
    assert "| `QDRANT_URL` | unset |" in doc and "(e.g. `http://localhost:6333`)" in doc
    assert "| `RAG_RETRIEVER` | `hybrid` | the legs searched: hybrid (dense and BM25, fused) \\| dense \\| bm25 |" in doc
