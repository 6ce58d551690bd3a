"""Document types at ingest, the contract chunker, routing, and English BM25 stems."""
from __future__ import annotations

import pytest

from rag_app.text import sparse
from rag_app.chunking.contract import ContractChunker, Label, clause_path
from rag_app.chunking.doctype import classify, doc_type_for, parse_override
from rag_app.chunking.registry import build_chunker
from rag_app.config.settings import Settings
from rag_app.ingest.loaders import text_blocks
from rag_app.core.types import ParsedDocument
from tests.fakes.contracts import nda_text


def doc(text: str, path: str = "/x/doc.txt", title: str | None = None) -> ParsedDocument:
    return ParsedDocument(path, "d1", "h1", title if title is not None else text.splitlines()[0], text,
                          tuple(text_blocks(text)), "text")


STATUTE_ZH = "# 中华人民共和国合同法\n第一条 为了保护合同当事人的合法权益，制定本法。\n第二条 本法所称合同是平等主体之间的协议。\n第三条 双方当事人订立合同。\n"
CONTRACT_ZH = "房屋租赁合同\n甲方：张三\n乙方：李四\n第一条 甲方将房屋出租给乙方。\n第二条 租金每月三千元。\n第三条 双方签字后生效。\n"
ACT_EN = ("Data Protection Act\nSection 1. Short title.\nThis Act may be cited as the Data Protection Act.\n"
          "Section 2. Definitions.\nIn this Act, data means information.\nSection 3. Duties.\nA controller shall keep data safe.\n")
PROSE_EN = "Meeting notes\nWe discussed the budget for next year and the hiring plan.\nNext meeting in May.\n"

CLASSIFY = [
    (STATUTE_ZH, "statute"),  # a law about contracts: articles, no 甲方/乙方
    (CONTRACT_ZH, "contract"),  # articles too, but two parties bound by it
    (nda_text("acme_nda.txt"), "contract"),
    (ACT_EN, "statute"),
    (PROSE_EN, "other"),
]


@pytest.mark.parametrize("text,expected", CLASSIFY)
def test_documents_are_classified_by_their_own_words(text, expected):
    assert classify(doc(text)) == expected


def test_an_override_wins_and_the_last_matching_one_decides():
    d = doc(nda_text("acme_nda.txt"), path="/data/contracts/2024/acme_nda.txt")
    assert doc_type_for(d) == "contract"
    assert doc_type_for(d, [("*", "other")]) == "other"
    assert doc_type_for(d, [("*", "other"), ("contracts/*/acme_*.txt", "statute")]) == "statute"
    assert doc_type_for(d, [("globex_*.txt", "other")]) == "contract"  # no match: the classification
    assert parse_override("contract") == ("*", "contract")
    assert parse_override("laws/**=statute") == ("laws/**", "statute")
    with pytest.raises(ValueError, match="statute, contract, other"):
        parse_override("x.txt=agreement")


CLAUSES = [
    ((Label("article", "Section 5"), Label("dec2", "5.2"), Label("alpha", "(b)")), "5.2(b)"),
    ((Label("article", "Section 5"), Label("alpha", "(b)"), Label("roman", "(ii)")), "Section 5(b)(ii)"),
    ((Label("dec1", "3"),), "3"),
    ((Label("part", "Recitals"), Label("ALPHA", "(A)")), "Recitals(A)"),
    ((), ""),
]


@pytest.mark.parametrize("path,expected", CLAUSES)
def test_clause_path(path, expected):
    assert clause_path(path) == expected


NESTED = """SERVICES AGREEMENT
This Agreement is made between the parties hereto, who hereby agree as follows:
ARTICLE IV - CONFIDENTIALITY
Section 5.1 Obligations. The Receiving Party shall keep all Confidential Information secret and shall use it only for the Purpose.
5.2 Exceptions
The obligations above do not apply to information that:
(a) is or becomes public other than through a breach;
(b) was known to the Receiving Party before disclosure, as shown by its records; or
(c) is disclosed under an order of a court, in which case:
(i) the Receiving Party gives prompt notice; and
(ii) discloses only what the order requires.
ARTICLE V - TERM
This Agreement lasts two years.
"""


def test_contract_chunks_keep_clauses_whole_and_carry_their_path():
    d = doc(NESTED, path="/x/services.txt")
    chunks = ContractChunker(target_max=40, hard_max=80, min_tokens=5).chunk(d)
    for c in chunks:
        assert d.text[c.char_start:c.char_end] == c.text  # offsets exact
        assert c.doc_type == "contract" and c.chunker == "contract"
    by_start = {c.text.splitlines()[0][:12]: c for c in chunks}
    item_b = next(c for c in chunks if "(b) was known" in c.text)
    assert "5.2(b)" in item_b.articles
    assert "5.2(b)" in item_b.indexed_text() and "SERVICES AGREEMENT" in item_b.indexed_text()
    assert "services.txt" in item_b.indexed_text()
    assert "5.2 Exceptions" in item_b.heading_path
    roman = next(c for c in chunks if "(ii) discloses" in c.text)
    assert "5.2(c)(ii)" in roman.articles
    # no chunk crosses from ARTICLE IV into ARTICLE V
    assert not any("ARTICLE V" in c.text and "Receiving Party" in c.text for c in chunks)
    assert by_start  # every line is in some chunk:
    covered = set()
    for c in chunks:
        covered.update(range(c.char_start, c.char_end))
    first_line = len(NESTED.splitlines()[0]) + 1
    assert all(i in covered for i, ch in enumerate(NESTED) if i >= first_line and not ch.isspace())


def test_a_clause_over_the_hard_max_is_cut_at_sentence_ends():
    long_clause = "1.1 " + " ".join(f"The Receiving Party shall not disclose item {i} to anyone." for i in range(60))
    d = doc("AGREEMENT\n" + long_clause + "\n", path="/x/long.txt")
    chunks = ContractChunker(target_max=60, hard_max=100, min_tokens=5).chunk(d)
    assert len(chunks) > 5 and all(c.token_count <= 100 for c in chunks)
    assert all(c.text.rstrip().endswith(".") for c in chunks)
    assert all(c.articles == ("1.1",) for c in chunks)


def test_legal_routes_contracts_to_the_contract_chunker_and_records_every_type():
    settings = Settings(_env_file=None)
    routed = build_chunker("legal", settings)
    assert {c.chunker for c in routed.chunk(doc(nda_text("acme_nda.txt")))} == {"contract"}
    law = routed.chunk(doc(STATUTE_ZH, path="/x/合同法.md", title="中华人民共和国合同法"))
    assert {(c.chunker, c.doc_type) for c in law} == {("legal", "statute")}
    prose = routed.chunk(doc(PROSE_EN))
    assert {(c.chunker, c.doc_type) for c in prose} == {("legal", "other")}
    forced = build_chunker("legal", settings, doc_types=(("*", "contract"),)).chunk(doc(PROSE_EN))
    assert {(c.chunker, c.doc_type) for c in forced} == {("contract", "contract")}
    # a single-strategy chunker records the type too, and keeps its name and chunk ids
    fixed = build_chunker("fixed-512", settings)
    assert (fixed.name, fixed.version) == ("fixed-512", "1")
    assert {c.doc_type for c in fixed.chunk(doc(nda_text("acme_nda.txt")))} == {"contract"}


def test_statute_chunks_are_what_the_legal_rules_made_before_routing():
    from rag_app.chunking.legal import LegalChunker

    settings = Settings(_env_file=None)
    d = doc(STATUTE_ZH, path="/x/合同法.md", title="中华人民共和国合同法")
    routed = build_chunker("legal", settings).chunk(d)
    plain = LegalChunker().chunk(d)
    assert [(c.chunk_id, c.text, c.indexed_text()) for c in routed] == [(c.chunk_id, c.text, c.indexed_text())
                                                                       for c in plain]


def test_english_text_gets_stems_and_chinese_text_tokenizes_as_before():
    en = sparse.tokenize("The Receiving Party disclosed the confidential information")
    assert {"^receiv", "^disclos", "^confidenti", "^inform"} <= set(en)
    assert "disclosed" in en and "^the" not in en  # surface words stay; function words get no stem
    assert sparse.STEM + "disclos" in sparse.tokenize("disclosing")
    # Chinese text (with a few Latin letters in it) gives exactly what tokenizer /2 gave (its output, recorded)
    assert sparse.tokenize("中华人民共和国公司法第五十七条规定的一人有限责任公司 PDF") == [
        '§57', '中华', '华人', '人民', '共和', '共和国', '中华人民共和国', '公司', '司法', '公司法', '规定', '一人',
        '有限', '责任', '有限责任', '公司', 'pdf', '~中华', '~华人', '~人民', '~民共', '~共和', '~和国', '~国公',
        '~公司', '~司法', '~规定', '~定的', '~的一', '~一人', '~人有', '~有限', '~限责', '~责任', '~任公', '~公司']
    assert sparse.tokenize("违反《劳动合同法》第87条解除合同的，应当依照 Article 87 支付赔偿金") == [
        '§87', '违反', '劳动', '合同', '合同法', '解除', '合同', '解除合同', '依照', 'article', '87', '支付', '赔偿',
        '赔偿金', '~违反', '~劳动', '~动合', '~合同', '~同法', '~解除', '~除合', '~合同', '~同的', '~应当', '~当依',
        '~依照', '~支付', '~付赔', '~赔偿', '~偿金']


def test_a_collection_of_tokenizer_2_is_still_read():
    from rag_app.core.errors import StoreError
    from rag_app.store import CollectionInfo, check_tokenizer

    info = CollectionInfo("c", "m", 4, False, 0.0, 10.0, "legal@2", sparse_tokenizer="jieba-search+cjk-bigram/2")
    check_tokenizer(info, sparse.TOKENIZER_VERSION, sparse.READS)
    with pytest.raises(StoreError, match="--rebuild"):
        check_tokenizer(info, sparse.TOKENIZER_VERSION)
