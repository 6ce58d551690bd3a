"""Chunkers: parsed document -> chunks with exact offsets.

structure.py finds legal units (编/章/节 headings, 第X条 articles, 附件, tables, items);
semantic.py splits long unstructured spans at sentence ends where topic shifts;
merge.py packs units toward a token target without crossing 编/章 boundaries.
legal.py composes them into the default chunker.
"""
