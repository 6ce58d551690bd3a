"""`rag ask` prints the answer's quality beside its citations and cost."""
from __future__ import annotations

import io

from rich.console import Console

from rag_app.cli import documents as cli


def test_the_quality_line_names_each_invalid_citation(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(cli, "out", Console(file=buf, width=80))
    cli._print_answer({"question": "q", "answer": "a", "citations": [], "stages": [], "query_id": "x", "mode": "llm",
                       "total_cost_usd": 0.0001, "priced_cost_usd": 0.0001, "total_shadow_cost_usd": None,
                       "priced_shadow_cost_usd": 0.0, "unpriced_rows": 1,
                       "quality": {"groundedness": 0.0, "retrieval_confidence": 0.25, "invalid_citations": [
                           {"citation": "[7]", "why": "no passage 7 was sent (5 were)"}]}})
    text = " ".join(buf.getvalue().split())
    assert "quality: grounded 0%, 1 invalid citation ([7]: no passage 7 was sent (5 were)), retrieval confidence 0.25" in text
