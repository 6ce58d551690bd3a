"""Legal-document RAG that knows what every answer costs.

Data flows one way: ingest (loaders) -> chunking -> embedding -> store -> retrieval -> rerank
-> prompt -> LLM. `chains/` wires those stages as LangChain runnables; `tracing/` observes them.

One folder per capability, lowest first (each package's __init__ names its modules):

    core/         values, usage, ports, money, errors, the clock: imports nothing of the project
    data/         files shipped with the package: the bundled query adapter, the colloquial lexicon
    text/         token counts, legal numerals, BM25 words, cross-references, the edge-text rule
    config/       settings checked at start-up, the ledger's location, URL redaction
    models/       the chat model and its attempts, embedders, rerankers, weights, billed tokens
    store/        the vector store (Qdrant Edge in-process, or a server)
    ingest/       files -> parsed text -> (chunking/) -> vectors -> the store
    chunking/     legal, contract and semantic chunkers
    query/        one question's path: stages, retrieval, levers, scope, context, answer
    quality/      whether an answer was right: signals beside its cost
    evaluation/   `rag eval`: retrieval and chunking against gold spans
    experiments/  gray releases: splits, comparison, verdict, ramp
    spend/        budgets, the answer cache, alerts
    access/       API keys, who may read what, rate limits
    present/      what the CLI and the service both render
    app.py        RagApp, the composition root: opens the store, the ledger writer, the price table
    cli/          the `rag` command line        service/  `rag serve`: HTTP over the same RagApp
"""

import os as _os

# onnxruntime (pulled in by unstructured's inference extra) sends usage telemetry and keeps a device
# id outside RAG_DATA_DIR unless this is set before it initialises; set here, the first import, so
# every process of ours (CLI, service, parse workers) inherits it. An explicit user value wins.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
