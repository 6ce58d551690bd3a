"""Retrieval levers' pure parts: spec parsing, PRF terms, corpus-mined definitions, the law prior."""
from __future__ import annotations

import pytest

from rag_app.models import embedding

from rag_app.query import levers
from rag_app.core.errors import ModelLoadError
from rag_app.query.levers import (expansion_terms, law_prior, mine_definitions, parse_retriever, prf_terms)


def test_retriever_specs():
    assert parse_retriever("bm25") == ("bm25", ())
    assert parse_retriever("hybrid+law+prf") == ("hybrid", ("law", "prf"))
    for bad in ("bm25+nope", "sparse", "bm25+prf+prf", ""):
        assert parse_retriever(bad) is None


def test_prf_adds_words_shared_by_feedback_at_lower_weight_never_bigrams_or_query_words():
    query = {"工资": 1.0}
    feedback = ["用人单位 拖欠 劳动者 工资 报酬", "用人单位 应当 支付 劳动报酬 拖欠", "劳动者 休息 休假"]
    terms = prf_terms(query, feedback, n_terms=5, weight=0.3)
    assert terms["劳动"] == 0.3 and terms["拖欠"] == 0.3 * 2 / 3  # in 3 and in 2 of 3 feedback texts
    assert "工资" not in terms and "休假" not in terms  # a query word; a word in one text only
    assert len(terms) == 5 and all(not t.startswith(("~", "§")) for t in terms)
    assert "休假" not in prf_terms(query, feedback, n_terms=50, weight=0.3)  # however many terms are asked for


DEFS = ("第二条 本法所称劳动合同，是指劳动者与用人单位确立劳动关系、明确双方权利和义务的协议。\n"
        "第九十六条 本法所称“经营者”，是指从事商品生产、经营或者提供服务的自然人、法人和非法人组织。")


def test_definitions_are_mined_from_the_corpus_text():
    defs = dict(mine_definitions([DEFS]))
    assert set(defs) == {"劳动合同", "经营者"}
    assert {"劳动者", "用人单位", "协议"} <= defs["劳动合同"]


def test_expansion_adds_the_defined_term_when_the_question_uses_its_definition_words():
    defs = mine_definitions([DEFS])
    q = {"劳动者": 1.0, "用人单位": 1.0, "协议": 1.0, "双方": 1.0}
    add = expansion_terms(q, defs, min_overlap=2, min_share=0.2, weight=0.6)
    assert "劳动合同" in add and "经营者" not in add and all(w == 0.6 for w in add.values())
    assert expansion_terms({"天气": 1.0, "下雨": 1.0}, defs, 2, 0.2, 0.6) == {}


def test_law_prior_lifts_chunks_of_the_law_with_the_most_evidence():
    ordered = [("a1", 10.0), ("b1", 9.0), ("b2", 8.0), ("b3", 7.0), ("a2", 1.0)]
    titles = {"a1": "甲法", "a2": "甲法", "b1": "乙法", "b2": "乙法", "b3": "乙法"}
    out = [cid for cid, _ in law_prior(ordered, titles, weight=1.0, top=3)]
    assert out[0] == "b1" and out.index("a1") > out.index("b2")
    assert [c for c, _ in law_prior(ordered, titles, weight=0.0, top=3)] == [c for c, _ in ordered]


def test_linear_fusion_keeps_score_gaps_and_leaves_the_rest_of_bm25_below_the_pool():
    from rag_app.query.levers import linear_fuse

    sparse_hits = [("a", 10.0), ("b", 8.0), ("c", 2.0), ("d", 1.0)]
    dense = [("c", 0.9), ("a", 0.5), ("b", 0.4)]  # the rescored pool: a, b, c
    fused = linear_fuse(sparse_hits, dense, alpha=0.5)
    assert [cid for cid, _ in fused] == ["a", "c", "b", "d"]
    assert [round(s, 3) for _, s in fused[:3]] == [0.6, 0.5, 0.375]  # (bm25 + cosine) / 2, min-max scaled
    assert [cid for cid, _ in linear_fuse(sparse_hits, dense, alpha=1.0)][:3] == ["c", "a", "b"]  # dense alone
    import pytest

    from rag_app.query.knobs import QueryKnobs

    with pytest.raises(ValueError, match="rescore_fusion"):
        QueryKnobs(rescore_fusion="linaer")


def test_rescore_embeds_a_long_question_as_its_head_and_tail():
    """A case description runs to thousands of characters; its charge and the prosecutor's conclusion come
    last. Embedding all of it (512 tokens) took 100-170 ms; its first and last halves bound the work."""
    from rag_app.query.knobs import QueryKnobs
    from rag_app.query.levers import rescore_text

    case = "事实:经审理查明，" + "被告人某某于某日在某地" * 200 + "。 罪名:诈骗。"
    cut = rescore_text(case, QueryKnobs().rescore_query_chars)
    assert len(cut) <= QueryKnobs().rescore_query_chars + 1
    assert cut.startswith("事实:经审理查明") and cut.endswith("罪名:诈骗。")
    assert rescore_text("股东会决议无效怎么办？", 160) == "股东会决议无效怎么办？"  # short: whole
    assert rescore_text(case, 0) == case  # 0: the whole question, as before


def test_a_required_rescorer_load_is_tried_again_after_a_lenient_one_failed(tmp_path, monkeypatch):
    """A warm-up that could not load the rescore model leaves None; evaluation (required) must then raise,
    not score without the lever it measures."""
    def cannot_load(model, batch_size=32, models_dir=None):
        raise ModelLoadError(f"cannot load {model!r}")

    monkeypatch.setattr(embedding, "load_encoder", cannot_load)
    monkeypatch.setattr(levers, "_rescorers", {})
    monkeypatch.setattr(levers, "_rescore_encoders", {})
    assert levers.rescore_embeddings("e5-onnx", tmp_path / "cache.sqlite") is None  # lenient: left out, warned
    with pytest.raises(ModelLoadError):
        levers.rescore_embeddings("e5-onnx", tmp_path / "cache.sqlite", required=True)


def test_embedders_over_two_caches_share_one_encoder(tmp_path, monkeypatch):
    """The model is loaded once per process, whatever the number of data dirs (caches) asked about."""
    loads = []

    class Encoder:
        def encode_query(self, text):
            raise AssertionError("not called")

    def load(model, batch_size=32, models_dir=None):
        loads.append(model)
        return Encoder()

    monkeypatch.setattr(embedding, "load_encoder", load)
    monkeypatch.setattr(levers, "_rescorers", {})
    monkeypatch.setattr(levers, "_rescore_encoders", {})
    one = levers.rescore_embeddings("e5-onnx", tmp_path / "a.sqlite")
    two = levers.rescore_embeddings("e5-onnx", tmp_path / "b.sqlite")
    assert one is not two and one.encoder is two.encoder and loads == ["e5-onnx"]
    assert levers.rescore_embeddings("e5-onnx", tmp_path / "a.sqlite") is one


def test_linear_fusion_of_nothing_is_nothing():
    """A scoped question BM25 and the dense leg found nothing for: an empty ranking, never a ValueError."""
    from rag_app.query.levers import linear_fuse

    assert linear_fuse([], [], alpha=0.5) == []
    assert linear_fuse([("a", 3.0)], [], alpha=0.5) == [("a", -1.0)]
