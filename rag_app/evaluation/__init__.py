"""Retrieval and chunking evaluation (`rag eval`): QA files with gold char spans -> ranx metrics."""
