"""Fixtures the end-to-end tests share."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import index_company_law


@pytest.fixture(scope="module")
def company_law_edge(tmp_path_factory) -> Path:
    """公司法 indexed for BM25 once per module: the Edge store folder each replica copies for itself."""
    root = tmp_path_factory.mktemp("company_law")
    index_company_law(root, retriever="bm25")
    return root / "data" / "edge"
