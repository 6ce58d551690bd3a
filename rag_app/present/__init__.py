"""What the CLI and the HTTP service both show people: one answer payload for every front door
(`presenter`), money and cost tables at sensible precision within 80 columns, "unpriced" never $0
(`cost_render`), `rag report` as a table or CSV / JSON (`report_export`) and the chunk-length histogram
(`chunk_stats`).

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.present.chunk_stats import by_doc_type, histogram, render_text, render_types, save_png
    from rag_app.present.cost_render import (experiment_arm_tables, experiment_metrics_table, fmt,
                                             keyed_labels, stage_table, timeline_table, usd)
    from rag_app.present.presenter import answer_payload, citation_label, display_path
    from rag_app.present.report_export import plain_row, write_by, write_report


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["answer_payload", "by_doc_type", "citation_label", "display_path", "experiment_arm_tables",
           "experiment_metrics_table", "fmt", "histogram", "keyed_labels", "plain_row", "render_text",
           "render_types", "save_png", "stage_table", "timeline_table", "usd", "write_by", "write_report"]
