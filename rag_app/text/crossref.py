"""Cross-references inside a law: `违反本法第X条`, `依照第X条`, `本条例第X条` link to that article of
the same document, so its text (the conduct for a penalty article, the penalty for a conduct
article) can be attached to the context. References into another law (`《刑法》第X条`,
`刑法第X条`) are not same-document links and are left out."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from rag_app.text.legal_numbers import CN_NUM, article_key, cn_to_int

_REF = re.compile(rf"(本法|本条例|本办法|本规定|本解释|依照|依据|违反|按照|适用)?\s*第([{CN_NUM}\d]+)条(?:之([{CN_NUM}]+))?")
_OTHER_LAW = re.compile(r"(》|法|条例|办法|规定|解释)\s*$")


def same_document_refs(text: str, own: tuple[str, ...] = ()) -> list[str]:
    """Article keys a chunk's text points at inside its own law, minus its own articles."""
    out = []
    for m in _REF.finditer(text):
        if m.start() == 0 or text[m.start() - 1] == "\n":
            continue  # a line-start 第X条 is the article's own label, not a reference
        if not m.group(1) and _OTHER_LAW.search(text[max(0, m.start() - 12):m.start()]):
            continue  # 刑法第二百六十四条, 《民法典》第…: another law
        try:
            key = article_key(cn_to_int(m.group(2)), cn_to_int(m.group(3)) if m.group(3) else 0)
        except ValueError:
            continue
        if key not in own and key not in out:
            out.append(key)
    return out


if TYPE_CHECKING:
    from rag_app.core import Chunk, ScoredChunk


class _ChunkHit(Protocol):
    @property
    def chunk(self) -> Chunk: ...


class ArticleFinder(Protocol):
    """What linking needs of a store: the chunks of named articles of one document."""

    def find_articles(self, name: str, titles: Sequence[str], keys: Sequence[str], limit: int = 10,
                      doc_id: str | None = None) -> Sequence[_ChunkHit]: ...


def attach_linked(store: ArticleFinder, collection: str, contexts: Sequence[ScoredChunk],
                  max_links: int) -> list[ScoredChunk]:
    """The articles the top passages cite inside their own law, appended after them (at most
    `max_links`, none already present), each marked with the chunk that linked it."""
    from rag_app.core import ScoredChunk

    if max_links <= 0:
        return list(contexts)
    present = {c.chunk.chunk_id for c in contexts}
    extra: list[ScoredChunk] = []
    for sc in contexts:
        if not sc.chunk.refs:
            continue
        for hit in store.find_articles(collection, [], list(sc.chunk.refs), limit=max_links, doc_id=sc.chunk.doc_id):
            chunk = hit.chunk
            if chunk.chunk_id in present or len(extra) >= max_links:
                continue
            present.add(chunk.chunk_id)
            extra.append(ScoredChunk(chunk, 0.0, 0, None, linked_from=sc.chunk.chunk_id))
    return list(contexts) + extra
