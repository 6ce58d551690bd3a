"""Scopes and named documents (rag_app/query/scope.py): fixed case tables over a small catalogue."""
from __future__ import annotations

import pytest

from rag_app.query.scope import Catalogue, DocRef, Scope, UnknownDocument, catalogue_of, named_in, resolve

DOCS = [
    DocRef("a1", "OISAIR PROJECT", "/data/nda/nda_0003.txt", "contract"),
    DocRef("a2", "NON-DISCLOSURE AGREEMENT", "/data/nda/nda_0007.txt", "contract"),
    DocRef("a3", "NON-DISCLOSURE AGREEMENT", "/data/nda/nda_0029.txt", "contract"),
    DocRef("a4", "MUTUAL NON-DISCLOSURE AGREEMENT", "/data/nda/nda_0027.txt", "contract"),
    DocRef("z1", "中华人民共和国刑法", "/data/laws/刑法/刑法.md", "statute"),
    DocRef("z2", "中华人民共和国劳动合同法", "/data/laws/社会法/劳动合同法(2012-12-28).md", "statute"),
    DocRef("z3", "中华人民共和国公司法", "/data/laws/民法商法/公司法(2018-10-26).md", "statute"),
    DocRef("z4", "最高人民法院、最高人民检察院关于执行《中华人民共和国刑法》 确定罪名的补充规定（七）",
           "/data/laws/司法解释/罪名补充规定（七）.md", "statute"),
    DocRef("z5", "中华人民共和国民法典", "/data/laws/民法典/总则.md", "statute"),
    DocRef("z6", "中华人民共和国民法典", "/data/laws/民法典/合同编.md", "statute"),
]
CAT = Catalogue.of(DOCS)

NAMED = [
    # (question, documents it names)
    ('Consider the non-disclosure agreement nda_0003.txt ("OISAIR PROJECT"); does it allow copies?', ["a1"]),
    # eight NDAs share this quoted title: it describes the file named, it adds nothing
    ('Consider the non-disclosure agreement nda_0007.txt ("NON-DISCLOSURE AGREEMENT"); may it be shared?', ["a2"]),
    ('Does "MUTUAL NON-DISCLOSURE AGREEMENT" survive termination?', ["a4"]),  # a quoted unique title
    ('Does "NON-DISCLOSURE AGREEMENT" survive termination?', ["a2", "a3"]),  # a shared title: every holder
    ("Does the MUTUAL NON-DISCLOSURE AGREEMENT cover affiliates?", ["a4"]),  # written out, same case
    ("does the mutual non-disclosure agreement cover affiliates?", []),  # lower case: any NDA says that
    ("根据《劳动合同法》，用人单位应当提前多少日通知？", ["z2"]),  # a quoted short name
    ("依照《中华人民共和国刑法》第二百三十四条，故意伤害他人身体的如何处罚？", ["z1"]),
    # the quoted 《刑法》 lies inside the full title of the 罪名补充规定 written out (with no space): that one
    ("根据最高人民法院、最高人民检察院关于执行《中华人民共和国刑法》确定罪名的补充规定（七），刑法第一百三十三条之二对应的罪名是什么？",
     ["z4"]),
    ("被告人系某有限公司法定代表人，挪用资金", []),  # 公司法 inside 有限公司法定: unquoted short names are not read
    ("用人单位违反劳动法规定不与劳动者订立合同", []),
    ("《民法典》关于诉讼时效的规定", ["z5", "z6"]),  # one law in several files: all of them
    ("what does nda_9999.txt say?", []),  # a file the collection does not hold
    ("compare nda_0003.txt with nda_0027.txt", ["a1", "a4"]),
]


@pytest.mark.parametrize("question,expected", NAMED)
def test_documents_named_in_a_question(question, expected):
    got = named_in(question, CAT)
    assert sorted(got.doc_ids if got else []) == sorted(expected)
    if got:
        assert got.how == "named" and "named in the question" in got.note()


RESOLVE = [
    (Scope(docs=("nda_0003.txt",)), ["a1"]),
    (Scope(docs=("NDA_0003",)), ["a1"]),  # the stem, any case
    (Scope(docs=("a2",)), ["a2"]),  # the id
    (Scope(docs=("nda/nda_0029.txt",)), ["a3"]),  # a path tail, as a QA line's `doc` gives it
    (Scope(docs=("Non-Disclosure Agreement",)), ["a2", "a3"]),  # a shared title: every document with it
    (Scope(docs=("社会法/劳动合同法(2012-12-28).md",)), ["z2"]),
    (Scope(laws=("刑法",)), ["z1"]),
    (Scope(laws=("《中华人民共和国公司法》",)), ["z3"]),
    (Scope(docs=("nda_0003.txt",), laws=("劳动合同法",)), ["a1", "z2"]),
]


@pytest.mark.parametrize("scope,expected", RESOLVE)
def test_a_scope_resolves_to_the_documents_it_names(scope, expected):
    got = resolve(scope, CAT)
    assert list(got.doc_ids) == expected and got.how == "asked"
    assert got.where == {"doc_id": expected}


def test_an_unknown_name_is_one_line_listing_close_matches():
    with pytest.raises(UnknownDocument) as e:
        resolve(Scope(docs=("nda_003.txt",)), CAT)
    msg = str(e.value)
    assert "\n" not in msg and "'nda_003.txt'" in msg and "nda_0003.txt" in msg
    with pytest.raises(UnknownDocument, match="劳动合同法"):
        resolve(Scope(laws=("劳动合同",)), CAT)
    with pytest.raises(UnknownDocument, match="no close match"):
        resolve(Scope(docs=("zzzzzzzz",)), CAT)
    with pytest.raises(UnknownDocument):  # a law scope reads titles only, never file names
        resolve(Scope(laws=("nda_0003.txt",)), CAT)


def test_scope_names_are_bounded():
    with pytest.raises(ValueError, match="at most 50"):
        Scope(docs=tuple(f"d{i}" for i in range(51)))
    with pytest.raises(ValueError, match="non-empty"):
        Scope(docs=("  ",))
    assert not Scope() and Scope.from_mapping({"docs": ["x"]}) == Scope(docs=("x",))


def test_the_catalogue_has_one_entry_per_document_from_its_chunks():
    payloads = [{"doc_id": "a1", "title": "T", "source_path": "/x/a.txt", "doc_type": "contract"},
                {"doc_id": "a1", "title": "T", "source_path": "/x/a.txt", "doc_type": "contract"},
                {"doc_id": "b", "title": "U", "source_path": "/x/b.md"}]  # written before types were recorded
    cat = catalogue_of(payloads)
    assert [(d.doc_id, d.doc_type) for d in cat.docs] == [("a1", "contract"), ("b", "other")]
    assert cat.labels(["b", "a1"]) == ("b.md", "a.txt")
