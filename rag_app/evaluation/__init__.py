"""Retrieval and chunking evaluation (`rag eval`): QA files with gold char spans -> ranx metrics.
`qa` reads and splits question files, `harness` ingests and runs each chunker/retriever, `hits` and
`scoring` decide a hit within a token budget, `stats` and `budget` give intervals and splits, `render`
and `compare_cli` print the tables."""
