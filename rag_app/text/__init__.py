"""Text as this product reads it, below any model: cl100k token counts (`tokens`), Chinese numerals and
article labels (`legal_numbers`), the BM25 words of a text (`sparse`), cross-references inside a law
(`crossref`) and the one rule for text that enters from outside (`edge_text`). Imports only `core`.

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.text.crossref import attach_linked, same_document_refs
    from rag_app.text.edge_text import EdgeText, has_bidi, shown_name, why_not_text
    from rag_app.text.legal_numbers import (ARTICLE_REF, CN_NUM, cn_to_int, find_article_refs,
                                            parse_article_label)
    from rag_app.text.sparse import STEM, TOKENIZER_VERSION, stems_of, tokenize
    from rag_app.text.tokens import count_tokens, cut_to_tokens, encoding


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["ARTICLE_REF", "CN_NUM", "STEM", "TOKENIZER_VERSION", "EdgeText", "attach_linked", "cn_to_int",
           "count_tokens", "cut_to_tokens", "encoding", "find_article_refs", "has_bidi",
           "parse_article_label", "same_document_refs", "shown_name", "stems_of", "tokenize", "why_not_text"]
