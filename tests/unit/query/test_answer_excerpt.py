"""The extractive answer shows whole sentences that answer the question, within a token budget, and its
citations say where they lie (section, character range, the document's own title)."""
from __future__ import annotations

import pytest

from rag_app.query.answer import EXCERPT_TOKENS, citation_for, extractive_answer, format_context, passage_label
from rag_app.chunking.legal import LegalChunker
from rag_app.query.excerpt import best_excerpt, ends_sentence, section_at, sentence_spans
from rag_app.ingest.loaders import load_document
from rag_app.present.presenter import citation_label
from rag_app.text.tokens import count_tokens
from rag_app.core.types import Chunk, ScoredChunk
from tests.conftest import SHARED

LEGAL_EN = SHARED / "data" / "legal_en" / "corpus"

SENTENCES = [  # (text, the sentences it splits into)
    ("公司股东依法享有资产收益。股东会行使下列职权！是否可以？可以；但须登记",
     ["公司股东依法享有资产收益。", "股东会行使下列职权！", "是否可以？", "可以；", "但须登记"]),
    ("10. The Recipient shall keep it secret. It shall survive for five (5) years.",
     ["10. The Recipient shall keep it secret.", "It shall survive for five (5) years."]),
    ("Acme Inc. and Foo Ltd. agree (the \"Parties\"). Then they sign.",
     ["Acme Inc. and Foo Ltd. agree (the \"Parties\").", "Then they sign."]),
    ("2.07 Return of Confidential Information\nUpon request, return it.",
     ["2.07 Return of Confidential Information", "Upon request, return it."]),
    ("他说：“可以。”随后离开。", ["他说：“可以。”", "随后离开。"]),
    ("As set out in Section 2.07. No more.", ["As set out in Section 2.07. No more."]),
]


@pytest.mark.parametrize("text,want", SENTENCES)
def test_sentences_end_at_chinese_and_english_boundaries_not_at_numbers(text, want):
    assert [text[a:b] for a, b in sentence_spans(text)] == want


SECTIONS = [  # (passage text, offset, fallback, section)
    ("第二十条 公司股东应当遵守法律。\n第二十一条 公司的控股股东不得利用关联关系。", 30, (), "第二十一条"),
    ("第二十条 公司股东应当遵守法律。\n第二十一条 公司的控股股东不得利用关联关系。", 5, (), "第二十条"),
    ("15. Term and Termination. This Agreement lasts two (2) years.", 40, (), "15 Term and Termination"),
    ("10. The representations of the Recipient survive.", 20, (), "10"),
    ("3.04 GOVERNING LAW. The laws of the State of New York.", 30, (), "3.04 GOVERNING LAW"),
    ("ARTICLE IV\nThe Recipient shall not disclose.", 20, (), "ARTICLE IV"),
    ("and the Recipient shall not disclose it.", 10, ("第七条",), "第七条"),
    ("30 days after notice, the Recipient returns it.", 10, (), None),  # a number, not a section
]


@pytest.mark.parametrize("text,offset,fallback,want", SECTIONS)
def test_section_is_the_article_or_numbered_section_the_text_is_in(text, offset, fallback, want):
    assert section_at(text, offset, fallback) == want


def test_the_excerpt_is_the_run_of_sentences_that_covers_the_question_within_the_budget():
    filler = " ".join(f"The Recipient shall comply with obligation number {i} of the schedule." for i in range(40))
    text = f"{filler} Governing law: this Agreement is governed by the laws of the State of New York. {filler}"
    ex = best_excerpt(text, "Which state's laws govern this agreement?", 60)
    assert "State of New York." in ex.text and ex.text == text[ex.start:ex.end]
    assert ex.tokens == count_tokens(ex.text) <= 60 and ends_sentence(ex.text) and not ex.cut
    start = best_excerpt(text, "nothing in common", 60)  # no term matches: the passage's start
    assert start.start == 0 and "New York" not in start.text


def test_a_sentence_over_the_budget_is_cut_at_a_clause_break_and_says_so():
    sentence = ("The Receiving Party shall hold in confidence, and shall not disclose, " * 12) + "any information."
    ex = best_excerpt(sentence, "Receiving Party confidence", 40)
    assert ex.cut and ex.tokens <= 40 and ex.text.endswith(",")
    text, _ = extractive_answer([_scored(_chunk(sentence))], "Receiving Party confidence", max_tokens=40)
    assert text.endswith(",…")


def test_english_titles_are_not_wrapped_in_chinese_title_marks():
    en = _scored(_chunk("10. The Recipient shall keep it secret.", title="NON-DISCLOSURE AGREEMENT"))
    zh = _scored(_chunk("第二十条 公司股东应当遵守法律。", title="中华人民共和国公司法", articles=("第二十条",)))
    assert passage_label(en) == "NON-DISCLOSURE AGREEMENT, §10" and "《" not in format_context([en])
    assert passage_label(zh) == "《中华人民共和国公司法》第二十条"
    text, (cite,) = extractive_answer([en], "How long is it kept secret?")
    assert "[1] NON-DISCLOSURE AGREEMENT, §10：10. The Recipient" in text
    assert citation_label(cite.as_dict()) == "NON-DISCLOSURE AGREEMENT §10  nda.txt chars 100-139"


def test_citations_keep_their_old_fields_and_add_title_section_and_range():
    text = "第二十条 公司股东应当遵守法律。\n第二十一条 公司的控股股东不得利用关联关系损害公司利益。"
    sc = _scored(_chunk(text, title="公司法", articles=("第二十条", "第二十一条")))
    _, (cite,) = extractive_answer([sc], "控股股东能否利用关联关系？", max_tokens=40)
    d = cite.as_dict()
    assert {"law", "article", "articles", "doc", "chunk_id", "page"} <= set(d)  # what clients read already
    assert d["title"] == d["law"] == "公司法" and d["section"] == "第二十一条"
    assert text[d["char_start"] - 100:d["char_end"] - 100] == "第二十一条 公司的控股股东不得利用关联关系损害公司利益。"


CONTRACT_CASES = [  # (file, the clause that answers, question, its section) — real ContractNLI NDAs
    ("nda_0045.txt", "within thirty (30) days after the oral or visual disclosure",
     "Within how many days must an oral disclosure be reduced to tangible form and marked confidential?", None),
    ("nda_0063.txt", "shall survive and continue for five (5) years",
     "How long do the obligations of the Receiving Party survive?", "14"),
    ("nda_0016.txt", "governed by the laws of the State of New York",
     "Which state's laws govern this Confidentiality Agreement?", None),
    ("nda_0398.txt", "the laws of the State of New York", "Which law governs this Agreement?", "3.04 GOVERNING LAW"),
]


@pytest.mark.shared_data
@pytest.mark.parametrize("name,clause,question,section", CONTRACT_CASES)
def test_the_answering_clause_of_a_real_contract_is_shown_and_cited_to_its_characters(name, clause, question, section):
    doc = load_document(LEGAL_EN / name)
    chunk = next(c for c in LegalChunker().chunk(doc) if clause in c.text)
    assert chunk.text.index(clause) > 400  # the first 400 characters, the old answer, never showed it
    text, (cite,) = extractive_answer([_scored(chunk)], question)
    assert clause in text and "《" not in text
    shown = doc.text[cite.char_start:cite.char_end]  # the range is the document's own text, as shown
    assert clause in shown and shown in text and ends_sentence(shown)
    assert count_tokens(shown) <= EXCERPT_TOKENS
    assert cite.law == doc.title and f"[1] {doc.title}" in text
    if section:
        assert cite.section == section


@pytest.mark.shared_data
def test_the_contract_case_needs_the_choice_of_sentences():
    """nda_0045's clause lies 367 tokens into its chunk: the first sentences within budget miss it."""
    doc = load_document(LEGAL_EN / "nda_0045.txt")
    clause = CONTRACT_CASES[0][1]
    chunk = next(c for c in LegalChunker().chunk(doc) if clause in c.text)
    assert clause not in best_excerpt(chunk.text, "", EXCERPT_TOKENS).text


def _chunk(text: str, title: str = "NON-DISCLOSURE AGREEMENT", articles: tuple[str, ...] = ()) -> Chunk:
    return Chunk(doc_id="d", source_path="nda.txt", title=title, text=text, char_start=100,
                 char_end=100 + len(text), token_count=count_tokens(text), chunker="legal", chunker_version="t",
                 articles=articles, chunk_id="c1")


def _scored(chunk: Chunk) -> ScoredChunk:
    return ScoredChunk(chunk, 1.0, 1)


def test_no_passages_is_said_in_both_languages():
    text, cites = extractive_answer([], "anything")
    assert cites == () and "No matching provisions" in text


def test_a_whole_passage_cites_every_section_it_spans():
    zh = _scored(_chunk("第二十条 公司股东应当遵守法律。\n第二十一条 公司的控股股东不得利用关联关系。", title="公司法",
                        articles=("第二十条", "第二十一条")))
    en = _scored(_chunk("13. The Recipient keeps it secret.\n14. It survives for five (5) years."))
    assert citation_for(zh).section == "第二十条、第二十一条"
    assert citation_for(en).section == "13, 14" and (citation_for(en).char_start, citation_for(en).char_end) == (100, 170)


FILLER = " ".join(f"The Recipient shall comply with obligation number {i} of the schedule." for i in range(30))


def test_english_words_match_across_their_endings():
    text = f"{FILLER} This Agreement is governed by Delaware statutes. {FILLER}"
    assert "Delaware" in best_excerpt(text, "What governs it?", 40).text
    assert "Delaware" in best_excerpt(text, "Which statute is governing?", 40).text
    laws = f"{FILLER} The laws of Delaware apply. {FILLER}"
    assert "Delaware" in best_excerpt(laws, "Which law?", 40).text


def test_the_sentence_that_answers_most_of_the_question_is_kept_over_scattered_mentions():
    text = (f"Notices: confidentiality applies.\nNotices: survival applies.\n{FILLER}\n"
            f"Confidentiality survives for three (3) years.\n{FILLER}")
    ex = best_excerpt(text, "Does confidentiality survive?", 30)
    assert ex.text.startswith("Confidentiality survives for three (3) years.")


def test_budget_left_at_a_passage_end_shows_the_sentences_before_the_answer():
    text = f"{FILLER}\nIt is governed by the laws of the State of New York."
    ex = best_excerpt(text, "Which law governs?", 60)
    assert ex.text.endswith("State of New York.") and ex.tokens > 40 and ex.start > 0


def test_a_passage_merged_across_a_gap_cites_its_whole_range():
    chunk = _chunk("第一条 甲。\n第二条 乙。", title="法")
    merged = ScoredChunk(Chunk(**{**chunk.__dict__, "char_end": chunk.char_end + 1}), 1.0, 1)  # 2-char gap joined by 1
    cite = extractive_answer([merged], "乙", max_tokens=5)[1][0]
    assert (cite.char_start, cite.char_end) == (merged.chunk.char_start, merged.chunk.char_end)


def test_a_sentences_terms_are_found_without_segmenting_it():
    from rag_app.query.excerpt import match_terms, question_terms, terms_in

    wanted = question_terms("股东会决议违反第二十二条怎么办？")
    sentence = "依照第22条，股东会的决议内容违反法律的无效。"
    assert terms_in(sentence, wanted) == set(match_terms(sentence)) & wanted  # jieba's answer, no jieba
    assert "§22" in terms_in(sentence, wanted)  # the article, whatever its numerals
    en = question_terms("Which state's laws govern the agreement?")
    assert {"govern", "^govern"} <= terms_in("This Agreement is governed by Delaware law.", en)
    assert not terms_in("法", frozenset({"法"}))  # one character is in most sentences: it counts nowhere
