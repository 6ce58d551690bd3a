"""What the CLI and the HTTP service both show people: one answer payload for every front door
(`presenter`), money and cost tables at sensible precision within 80 columns, "unpriced" never $0
(`cost_render`), `rag report` as a table or CSV / JSON (`report_export`) and the chunk-length histogram
(`chunk_stats`).

Import the module you need; this file only names them."""

__all__ = ["chunk_stats", "cost_render", "presenter", "report_export"]
