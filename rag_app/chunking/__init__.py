"""Chunkers: parsed document -> chunks with exact offsets.

doctype.py classifies each document (statute / contract / other; overridable per file);
routing.py sends it to the chunker for its type and records the type on every chunk;
structure.py finds statute units (编/章/节 headings, 第X条 articles, 附件, tables, items);
contract.py finds contract clauses and list items (1.1, (a), (ii), Section 5, recitals) and their paths;
semantic.py splits long unstructured spans at sentence ends where topic shifts;
merge.py packs statute units toward a token target without crossing 编/章 boundaries.
legal.py composes the statute rules; registry.py builds `legal` (routed: contracts to contract.py,
everything else to the statute rules) and the single-strategy chunkers.
"""
