"""Legal-document RAG that knows what every answer costs.

Data flows one way: ingest (loaders) -> chunking -> embedding -> store -> retrieval -> rerank
-> prompt -> LLM. `chains/` wires those stages as LangChain runnables; `tracing/` observes them.
"""

import os as _os

# onnxruntime (pulled in by unstructured's inference extra) sends usage telemetry and keeps a device
# id outside RAG_DATA_DIR unless this is set before it initialises; set here, the first import, so
# every process of ours (CLI, service, parse workers) inherits it. An explicit user value wins.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
