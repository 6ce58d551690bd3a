"""The ranker's per-candidate numbers (rag_app/query/ranker.py) on a fixed set of views: what each view
says of a candidate shows in its row, and a view that did not propose it shows as absent."""
from __future__ import annotations

import pytest

from rag_app.query.ranker import ABSENT, FEATURES, features, pool_of
from rag_app.query.pipeline import ranker_path
from rag_app.query.views import Views


def payload(cid, doc, title, text, start, refs=(), nums=("1",)):
    return {"chunk_id": cid, "doc_id": doc, "title": title, "text": text, "char_start": start,
            "char_end": start + len(text), "token_count": len(text), "heading_path": [], "refs": list(refs),
            "article_nums": list(nums)}


PAYLOADS = {
    "a": payload("a", "d1", "中华人民共和国劳动合同法", "第一条 用人单位解除劳动合同应当提前三十日通知", 0),
    "b": payload("b", "d1", "中华人民共和国劳动合同法", "第二条 违反本法第一条规定的，应当支付赔偿金", 100, refs=("1",), nums=("2",)),
    "c": payload("c", "d2", "中华人民共和国刑法", "第三条 盗窃公私财物的", 0, nums=("3",)),
}
VIEWS = Views({"bm25": [("a", 10.0), ("b", 5.0)], "bm25+colloquial": [("b", 8.0), ("a", 4.0)],
               "dense": [("c", 0.9), ("a", 0.8)], "cite": [("b", 1.0)]},
              PAYLOADS, charge_picks=(), named_docs=(), cosine={"a": 0.8, "b": 0.5, "c": 0.9})


def row(X, pool, cid):
    return dict(zip(FEATURES, X[pool.index(cid)].tolist()))


def test_each_views_rank_score_and_the_candidates_law_show_in_its_row():
    pool = pool_of(VIEWS, 50)
    assert pool == ["a", "b", "c"]  # every view's top 50, first seen first
    X = features("劳动合同法规定解除劳动合同要提前多少天通知？", VIEWS, pool, {"d1": 200, "d2": 50},
                 ["中华人民共和国劳动合同法", "中华人民共和国刑法"])
    assert X.shape == (3, len(FEATURES))
    a, b, c = (row(X, pool, k) for k in "abc")
    assert (a["bm25_rank"], a["bm25_score"], a["bmc_rank"], a["bmc_score"]) == (1, 1.0, 2, 0.5)
    assert (c["bm25_rank"], c["bmc_rank"], c["dense_rank"]) == (ABSENT, ABSENT, 1)
    assert (b["cite"], a["cite"]) == (1.0, 0.0)
    assert c["cos_gap"] == pytest.approx(0.0) and a["cos_gap"] == pytest.approx(0.1) and a["cos_rank"] == 2
    assert a["law_cited"] == 1.0 and c["law_cited"] == 0.0  # the question names 劳动合同法, not 刑法
    assert a["law_share"] == pytest.approx(2 / 3) and c["law_share"] == pytest.approx(1 / 3)
    assert a["refs_in"] == 1.0 and b["refs_in"] == 0.0  # b (a strong candidate) points at a's article
    assert b["position"] == pytest.approx(0.5) and a["views_top20"] == 3.0 and c["views_top20"] == 1.0
    assert a["q_bigrams_in_chunk"] > c["q_bigrams_in_chunk"] == 0.0


def test_ranker_latest_is_the_newest_artefact_and_a_path_stays_a_path(tmp_path):
    import os

    assert ranker_path("latest", tmp_path) == "" and ranker_path("", tmp_path) == ""
    (tmp_path / "rankers").mkdir()
    old, new = tmp_path / "rankers" / "ranker-v1-aaaa.joblib", tmp_path / "rankers" / "ranker-v1-bbbb.joblib"
    old.write_bytes(b"1")
    new.write_bytes(b"2")
    os.utime(old, (1, 1))
    assert ranker_path(" latest ", tmp_path) == str(new)
    assert ranker_path("/x/ranker-v1-cccc.joblib", tmp_path) == "/x/ranker-v1-cccc.joblib"
