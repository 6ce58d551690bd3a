from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from rag_app.config import Settings
from rag_app.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def env_names() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.add(alias.choices[0] if alias is not None else f"RAG_{name.upper()}")
    return names


def test_env_example_lists_every_setting_with_a_comment():
    text = (REPO / ".env.example").read_text()
    listed = set(re.findall(r"^#?\s*([A-Z0-9_]+)=", text, re.M))
    assert env_names() == listed
    for line in text.splitlines():
        if re.match(r"^#?\s*[A-Z0-9_]+=", line):
            assert "#" in line.lstrip("# "), f"no comment: {line}"


def test_env_example_loads_as_a_dotenv(tmp_path, monkeypatch):
    shutil.copy(REPO / ".env.example", tmp_path / ".env")
    monkeypatch.chdir(tmp_path)
    s = Settings()
    assert s == Settings(_env_file=None)  # the example states the defaults, nothing else


def test_env_beats_dotenv_and_ecosystem_names(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("RAG_TOP_K=30\nOPENAI_BASE_URL=http://from-file/v1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_TOP_K", "40")
    s = Settings()
    assert s.top_k == 40 and s.openai_base_url == "http://from-file/v1" and s.use_llm


def test_bad_combinations_name_the_settings():
    with pytest.raises(ConfigError, match="RAG_CHUNK_HARD_MAX"):
        Settings(_env_file=None, chunk_target_max=600)
    with pytest.raises(ConfigError, match="RAG_TOP_N"):
        Settings(_env_file=None, top_n=30)


def test_repr_never_shows_keys_tokens_or_the_ledger_password(tmp_path):
    from rag_app.config import SECRET_FIELDS, Settings

    s = Settings(_env_file=None, data_dir=tmp_path, openai_api_key="sk-live-123", api_token="tok-456",
                 rerank_api_key="rk-789", qdrant_api_key="qk-000",
                 ledger_url="postgresql://rag:hunter2@db.example/ledger?password=hunter2")
    for text in (repr(s), str(s)):
        for secret in ("sk-live-123", "tok-456", "rk-789", "qk-000", "hunter2"):
            assert secret not in text
        assert "postgresql://rag:***@db.example/ledger" in text and "data_dir" in text
    assert s.openai_api_key == "sk-live-123"  # the value itself is untouched
    assert set(SECRET_FIELDS) <= set(Settings.model_fields)
