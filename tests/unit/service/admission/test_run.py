"""The `run` step alone, over a router whose run is recorded: the front door is told first, the question
is marked begun, and the presenter's payload becomes the result; a cache hit runs nothing."""
from __future__ import annotations

import pytest

from rag_app.core.types import Answer, Citation
from rag_app.core.usage import StageUsage
from rag_app.service.admission import QueryRequest, QueryResult, Run
from rag_app.service.shell import OneApp


class Recorded(OneApp):
    """The shell's router, but its run answers at once and says when it was called."""

    def __init__(self, app, events, fail=False):
        super().__init__(app)
        self.events, self.fail = events, fail

    def run(self, route, question, scope=None, callbacks=()):
        self.events.append(("run", route.query_id, tuple(callbacks)))
        if self.fail:
            raise TimeoutError("the model did not answer")
        return Answer(route.query_id, question, "依照第五十七条。[1]",
                      (Citation("中华人民共和国公司法", ("第五十七条",), "/srv/rag/data/laws/公司法.md", "c1"),), "llm",
                      usage=(self.base.pricer.price(StageUsage("generate", model="gpt-4o-mini", input_tokens=900,
                                                               output_tokens=40, billing="billed", price_basis="llm")),))


def test_the_front_door_is_told_then_the_question_runs_and_is_presented(app, ctx):
    events = []
    c = ctx(QueryRequest("一人有限责任公司是什么？"), router=Recorded(app, events), callbacks=("sink",),
            admitted=lambda qid, variant: events.append(("admitted", qid, variant)))
    Run(doc_path=lambda doc: doc.rsplit("/", 1)[-1]).enter(c)
    qid = c.route.query_id
    assert events == [("admitted", qid, "default"), ("run", qid, ("sink",))] and c.began
    r = c.result
    assert isinstance(r, QueryResult) and not r.cache_hit and r.saving is None and r.route is c.route
    assert (r.answer["query_id"], r.answer["cache_hit"], r.answer["saved_cost_usd"]) == (qid, False, None)
    assert r.answer["citations"][0]["doc"] == "公司法.md"  # shown as the front door shows files
    assert c.payload is not None and "cache_hit" not in c.payload  # what the cache keeps: the answer itself
    with pytest.raises(TypeError):
        r.answer["answer"] = "changed"  # a result is a value: read-only


def test_a_failing_run_has_begun_so_its_reservations_stand(app, ctx):
    c = ctx(router=Recorded(app, [], fail=True))
    with pytest.raises(TimeoutError):
        Run().enter(c)
    assert c.began and c.result is None


def test_a_cache_hit_runs_nothing(app, ctx):
    events = []
    c = ctx(router=Recorded(app, events), admitted=lambda qid, variant: events.append("admitted"))
    c.result = hit = QueryResult({"answer": "cached"}, c.route, cache_hit=True)
    Run().enter(c)
    assert events == [] and c.result is hit and not c.began
