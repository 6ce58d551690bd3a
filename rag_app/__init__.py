"""Legal-document RAG that knows what every answer costs.

Data flows one way: ingest (loaders) -> chunking -> embedding -> store -> retrieval -> rerank
-> prompt -> LLM. `chains/` wires those stages as LangChain runnables; `tracing/` observes them.
"""
