"""Token-budgeted context packing: rank order, the budget, small-to-big merging without repeats."""
from __future__ import annotations

from rag_app.query.context import merge_chunks, pack_context
from rag_app.text.tokens import count_tokens
from rag_app.core.types import Chunk, ScoredChunk

DOC = ("第一条 为了保护民事主体的合法权益，调整民事关系，制定本法。\n"
       "第二条 民法调整平等主体的自然人、法人和非法人组织之间的人身关系和财产关系。\n"
       "第三条 民事主体的人身权利、财产权利以及其他合法权益受法律保护，任何组织或者个人不得侵犯。\n")


def chunk(start: int, end: int, doc: str = "d1", heading=("第一章",), cid=None, text=None) -> Chunk:
    body = DOC[start:end] if text is None else text
    return Chunk(doc_id=doc, source_path=f"/{doc}.md", title="民法典", text=body, char_start=start, char_end=end,
                 token_count=count_tokens(body), chunker="legal", chunker_version="2", heading_path=heading,
                 chunk_id=cid or f"{doc}:{start}")


def sc(c: Chunk, rank: int) -> ScoredChunk:
    return ScoredChunk(c, 1.0 / rank, rank)


A1, A2, A3 = DOC.index("第一条"), DOC.index("第二条"), DOC.index("第三条")


def test_packs_in_rank_order_and_cuts_the_chunk_that_crosses_to_the_tokens_left():
    far = [sc(chunk(A1, A2, doc=f"d{i}"), i) for i in range(1, 6)]  # different docs: no merging
    each = far[0].chunk.token_count
    p = pack_context(far, budget=each * 3)
    assert [c.chunk.doc_id for c in p.contexts] == ["d1", "d2", "d3"] and not p.truncated
    assert p.tokens == each * 3 == p.budget and p.packed == 3 and p.merged == 0
    p = pack_context(far, budget=each * 3 + 5)
    assert [c.chunk.doc_id for c in p.contexts] == ["d1", "d2", "d3", "d4"] and p.truncated  # nothing after d4
    cut = p.contexts[3].chunk
    assert DOC[A1:A2].startswith(cut.text) and 0 < cut.token_count <= 5 and cut.char_end == A1 + len(cut.text)
    assert p.tokens == each * 3 + cut.token_count <= p.budget
    assert pack_context(far, budget=10_000, top_n=2).considered == 2  # RAG_TOP_N stays an upper bound


def test_adjacent_chunks_of_one_section_merge_in_document_order_without_repeats():
    second, first = chunk(A2, A3), chunk(A1, A2)
    p = pack_context([sc(second, 1), sc(first, 2)], budget=10_000)
    assert len(p.contexts) == 1 and p.merged == 1
    merged = p.contexts[0].chunk
    assert merged.text == DOC[A1:A3] and (merged.char_start, merged.char_end) == (A1, A3)
    assert p.contexts[0].retrieval_rank == 1  # the merged passage keeps its best rank


def test_overlapping_chunks_keep_the_shared_text_once_and_pay_only_for_what_they_add():
    a, b = chunk(A1, A2 + 10), chunk(A2, A3)
    m = merge_chunks(a, b)
    assert m.text == DOC[A1:A3] and m.text.count("第二条") == 1
    p = pack_context([sc(a, 1), sc(b, 2)], budget=10_000)
    assert p.tokens == count_tokens(DOC[A1:A3]) < a.token_count + b.token_count


def test_other_sections_and_distant_chunks_stay_apart():
    a = chunk(A1, A2)
    other_section = chunk(A2, A3, heading=("第二章",))
    distant = chunk(A3 + 5, len(DOC))
    p = pack_context([sc(a, 1), sc(other_section, 2), sc(distant, 3)], budget=10_000)
    assert len(p.contexts) == 3 and p.merged == 0


def test_an_oversized_first_chunk_is_cut_to_the_budget_never_dropped():
    big = chunk(0, len(DOC))
    p = pack_context([sc(big, 1)], budget=20)
    assert p.truncated and len(p.contexts) == 1 and 0 < p.tokens <= 20
    assert DOC.startswith(p.contexts[0].chunk.text)
    assert p.usage() == {"context_budget_tokens": 20, "context_tokens": p.tokens, "context_chunks": 1,
                         "context_chunks_considered": 1, "context_chunks_merged": 0}


def test_linked_articles_ride_along_outside_the_budget_only_for_packed_sources():
    from dataclasses import replace

    from rag_app.query.context import pack_with_links

    src, other = sc(chunk(A1, A2, doc="d1"), 1), sc(chunk(A1, A2, doc="d2"), 2)
    link_kept = replace(sc(chunk(A3, len(DOC), doc="d1", heading=("第九章",)), 3), linked_from=src.chunk.chunk_id)
    link_dropped = replace(sc(chunk(A3, len(DOC), doc="d2", heading=("第九章",)), 4), linked_from=other.chunk.chunk_id)
    p = pack_with_links([src, other, link_kept, link_dropped], budget=src.chunk.token_count)
    assert [c.chunk.chunk_id for c in p.contexts] == [src.chunk.chunk_id, link_kept.chunk.chunk_id]
    assert p.tokens == src.chunk.token_count


def test_an_adjacent_chunk_that_crosses_the_budget_merges_only_its_first_tokens():
    first, second = chunk(A1, A2), chunk(A2, A3)
    p = pack_context([sc(first, 1), sc(second, 2)], budget=first.token_count + 5)
    assert len(p.contexts) == 1 and p.merged == 1 and p.truncated
    text = p.contexts[0].chunk.text
    assert DOC[A1:A3].startswith(text) and len(text) > A2 - A1 and p.tokens == count_tokens(text) <= p.budget
