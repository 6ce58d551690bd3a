"""Text as this product reads it, below any model: cl100k token counts (`tokens`), Chinese numerals and
article labels (`legal_numbers`), the BM25 words of a text (`sparse`), cross-references inside a law
(`crossref`) and the one rule for text that enters from outside (`edge_text`). Imports only `core`.

Import the module you need; this file only names them."""

__all__ = ["crossref", "edge_text", "legal_numbers", "sparse", "tokens"]
