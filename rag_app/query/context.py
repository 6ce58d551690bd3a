"""Token-budgeted context: reranked chunks packed in rank order until RAG_CONTEXT_TOKENS.

- Budget unit: cl100k tokens of the passage texts (what `rag eval --budgets` measures), not the
  labels and prompt around them.
- Order: rank order; the chunk that would cross the budget is cut to the tokens left (its first N
  tokens) and stops the packing (the same rule as recall within a budget in
  rag_app/evaluation/budget.py). Cutting rather than dropping it: +0.017 [+0.006, +0.032] recall
  within 1,000 tokens on tune (docs/evaluation-and-levers.md, "Quality per prompt token").
- Small-to-big: a chunk that overlaps or directly follows/precedes an already packed passage of the
  same document and section (same heading path) is merged into it, in document order, with the
  overlapping text kept once; it costs only the tokens it adds.
- RAG_TOP_N stays an upper bound on the chunks considered.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from rag_app.text import count_tokens, cut_to_tokens
from rag_app.core import Chunk, ScoredChunk

MAX_GAP_CHARS = 2  # a line break or two between chunks still counts as adjacent


@dataclass(frozen=True)
class PackedContext:
    contexts: list[ScoredChunk]
    budget: int
    tokens: int  # tokens of the packed passages (<= budget)
    considered: int  # chunks looked at (<= top_n)
    packed: int  # chunks that made it in (merged ones included)
    merged: int  # chunks merged into a neighbour
    truncated: bool = False

    def usage(self) -> dict:
        """Fields for the generate stage's usage event."""
        return {"context_budget_tokens": self.budget, "context_tokens": self.tokens,
                "context_chunks": self.packed, "context_chunks_considered": self.considered,
                "context_chunks_merged": self.merged}


def _joinable(a: Chunk, b: Chunk) -> bool:
    if a.doc_id != b.doc_id or a.heading_path != b.heading_path or a.kind != b.kind:
        return False
    return b.char_start <= a.char_end + MAX_GAP_CHARS and a.char_start <= b.char_end + MAX_GAP_CHARS


def merge_chunks(a: Chunk, b: Chunk) -> Chunk:
    """One passage covering both, in document order, overlap kept once (texts are exact slices)."""
    first, second = (a, b) if a.char_start <= b.char_start else (b, a)
    if second.char_end <= first.char_end:  # contained
        text, end = first.text, first.char_end
    else:
        overlap = first.char_end - second.char_start
        tail = second.text[overlap:] if overlap >= 0 else second.text
        sep = "" if overlap >= 0 else "\n"
        text, end = first.text + sep + tail, second.char_end
    articles = tuple(dict.fromkeys(first.articles + second.articles))
    nums = tuple(dict.fromkeys(first.article_nums + second.article_nums))
    refs = tuple(dict.fromkeys(first.refs + second.refs))
    return replace(first, text=text, char_start=first.char_start, char_end=end, token_count=count_tokens(text),
                   articles=articles, article_nums=nums, refs=refs, chunk_id=a.chunk_id)


def _join_target(out: list[ScoredChunk], c: Chunk) -> int | None:
    return next((i for i, p in enumerate(out) if _joinable(p.chunk, c)), None)


def _cut(c: Chunk, tokens: int) -> Chunk | None:
    """The chunk's first `tokens` tokens (texts are exact slices, so char_end follows); None if nothing fits."""
    text = cut_to_tokens(c.text, tokens) if tokens > 0 else ""
    n = count_tokens(text)
    if not text or n > tokens:
        return None
    return replace(c, text=text, char_end=c.char_start + len(text), token_count=n)


def pack_context(ranked: list[ScoredChunk], budget: int, top_n: int | None = None) -> PackedContext:
    considered = ranked[:top_n] if top_n else list(ranked)
    out: list[ScoredChunk] = []
    used = packed = merged = 0
    truncated = False
    for sc in considered:
        target = _join_target(out, sc.chunk)
        if target is not None:
            combined = merge_chunks(out[target].chunk, sc.chunk)
            extra = combined.token_count - out[target].chunk.token_count
            if used + extra <= budget:
                out[target] = replace(out[target], chunk=combined)
                used, packed, merged = used + extra, packed + 1, merged + 1
                continue
        elif used + sc.chunk.token_count <= budget:
            out.append(sc)
            used, packed = used + sc.chunk.token_count, packed + 1
            continue
        # The chunk that crosses the budget: its first tokens that fit, then stop.
        cut = _cut(sc.chunk, budget - used)
        if cut is not None:
            target = _join_target(out, cut)
            if target is None:
                out.append(replace(sc, chunk=cut))
                used, packed, truncated = used + cut.token_count, packed + 1, True
            else:
                combined = merge_chunks(out[target].chunk, cut)
                extra = combined.token_count - out[target].chunk.token_count
                if used + extra <= budget:
                    out[target] = replace(out[target], chunk=combined)
                    used, packed, merged, truncated = used + extra, packed + 1, merged + 1, True
        break
    return PackedContext(out, budget, used, len(considered), packed, merged, truncated)


def pack_with_links(contexts: list[ScoredChunk], budget: int) -> PackedContext:
    """Pack the ranked passages; cross-referenced articles (RAG_ATTACH_REFS, opt-in) ride along after
    them, outside the budget, and only for sources that made it in."""
    packed = pack_context([c for c in contexts if c.linked_from is None], budget)
    kept = {c.chunk.chunk_id for c in packed.contexts}
    linked = [c for c in contexts if c.linked_from is not None and c.linked_from in kept]
    return replace(packed, contexts=packed.contexts + linked) if linked else packed
