from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from rag_app.config.settings import Settings
from rag_app.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]


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
    from rag_app.config.settings import SECRET_FIELDS, Settings

    s = Settings(_env_file=None, data_dir=tmp_path, openai_api_key="sk-live-123", api_token="tok-456",
                 rerank_api_key="rk-789", qdrant_api_key="qk-000",
                 ledger_url="postgresql://rag:hunter2@db.example/ledger?password=hunter2")
    for text in (repr(s), str(s)):
        for secret in ("sk-live-123", "tok-456", "rk-789", "qk-000", "hunter2"):
            assert secret not in text
        assert "postgresql://rag:***@db.example/ledger" in text and "data_dir" in text
    assert s.openai_api_key == "sk-live-123"  # the value itself is untouched
    assert set(SECRET_FIELDS) <= set(Settings.model_fields)


# (variable, a value out of range, what the one line must say); each once crashed or was silently used
OUT_OF_RANGE = [
    ("RAG_RRF_K", "-1", "greater than or equal to 0"),  # ZeroDivisionError in `rag ask`
    ("RAG_EMBED_BATCH_SIZE", "0", "greater than or equal to 1"),  # ValueError traceback in `rag ingest`
    ("RAG_HNSW_M", "-1", "greater than or equal to 1"),  # OverflowError
    ("RAG_TOP_K", "0", "greater than or equal to 1"),  # was "RAG_TOP_N (10) must not exceed RAG_TOP_K (0)"
    ("RAG_TOP_N", "-2", "greater than or equal to 1"),
    ("RAG_LLM_MAX_TOKENS", "-5", "greater than or equal to 1"),
    ("RAG_LLM_TIMEOUT_S", "-1", "greater than 0"),
    ("RAG_SEARCH_EF", "-1", "greater than or equal to 1"),
    ("RAG_EMBED_MAX_UNK_RATE", "2", "less than or equal to 1"),
    ("RAG_CONTEXT_TOKENS", "0", "greater than or equal to 1"),
    ("QDRANT_URL", "notaurl", "must be an http(s) URL such as http://localhost:6333"),
    ("OPENAI_BASE_URL", "ftp://x", "must be an http(s) URL"),  # serve started and every /v1/ask was a 502
    ("OPENAI_BASE_URL", "notaurl", "must be an http(s) URL"),
    ("RAG_RERANK_URL", "http://host:99999", "must be an http(s) URL"),
]


@pytest.mark.parametrize("name,value,says", OUT_OF_RANGE, ids=[f"{n}={v}" for n, v, _ in OUT_OF_RANGE])
def test_an_out_of_range_value_is_one_line_naming_the_variable(name, value, says, tmp_path, monkeypatch):
    from rag_app.config.settings import load_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as e:
        load_settings()
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"environment: {name}: ") and says in line and value in line


def test_every_numeric_setting_has_a_range():
    """A number added later without bounds turns this red: each was a crash or a silent nonsense value."""
    unbounded = [name for name, f in Settings.model_fields.items()
                 if f.annotation in (int, float)
                 and not any(getattr(m, attr, None) is not None for m in f.metadata for attr in ("ge", "gt"))]
    assert unbounded == []


def test_server_urls_accept_http_and_treat_empty_as_unset():
    s = Settings(_env_file=None, qdrant_url="https://q.example:6333", openai_base_url="http://127.0.0.1:8080/v1",
                 rerank_url="")
    assert (s.qdrant_url, s.openai_base_url, s.rerank_url) == ("https://q.example:6333", "http://127.0.0.1:8080/v1", None)


def test_an_empty_setting_is_unset_for_every_setting(tmp_path, monkeypatch):
    """#45: `RAG_PRICE_OVERRIDES=` was read as the path "." (and an empty number failed to parse): an empty
    value, in the environment or in .env, is unset, for every setting; `RAG_RERANK_MODEL=none` turns the
    reranker off."""
    monkeypatch.chdir(tmp_path)
    defaults = Settings(_env_file=None)
    for name in env_names():
        monkeypatch.setenv(name, "")
    (tmp_path / ".env").write_text("RAG_TOP_K=\nRAG_CONTEXT_TOKENS=\n")
    s = Settings()
    assert s == defaults
    assert s.price_overrides is None and s.top_k == 20 and s.rerank_model == "BAAI/bge-reranker-base"
    monkeypatch.setenv("RAG_RERANK_MODEL", "none")
    assert Settings().rerank_model is None
