"""The vocabulary every other package speaks: the domain's values (`types`), what a stage did and cost
(`usage`), the seams of the query path as Protocols (`ports`) and the lazily built part that fills one
(`lazy`), money in nano-dollars (`money`), the ledger's clock (`clock`) and the one exception tree
(`errors`); `face` makes every package's face lazy. It imports nothing else of the project, so anything may import it.

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core.face import lazy_face

if TYPE_CHECKING:
    from rag_app.core.clock import stamp, utcnow
    from rag_app.core.errors import (ConfigError, EmptyDocument, IngestError, LLMError, ModelLoadError,
                                     ModelMismatch, OutdatedStore, RagError, StageError, StoreError,
                                     StoreInUse, UnsupportedFormat)
    from rag_app.core.lazy import Lazy
    from rag_app.core.money import decimal_text, positive_usd, to_nano, usd_json
    from rag_app.core.ports import Embedder, Pricer, Provider, ReplyStats, Reranker
    from rag_app.core.types import Answer, Block, Chunk, Citation, ParsedDocument, Resolved, ScoredChunk
    from rag_app.core.usage import (AttemptInfo, EmbedUsage, GRADES_QUERY, JUDGE_KIND, JUDGE_STAGE, Price,
                                    PriceBasis, RerankUsage, StageUsage, USAGE_EVENT, judge_run_id, totals)


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["GRADES_QUERY", "JUDGE_KIND", "JUDGE_STAGE", "USAGE_EVENT", "Answer", "AttemptInfo", "Block",
           "Chunk", "Citation", "ConfigError", "EmbedUsage", "Embedder", "EmptyDocument", "IngestError",
           "LLMError", "Lazy", "ModelLoadError", "ModelMismatch", "OutdatedStore", "ParsedDocument", "Price",
           "PriceBasis", "Pricer", "Provider", "RagError", "ReplyStats", "RerankUsage", "Reranker",
           "Resolved", "ScoredChunk", "StageError", "StageUsage", "StoreError", "StoreInUse",
           "UnsupportedFormat", "decimal_text", "judge_run_id", "lazy_face", "positive_usd", "stamp",
           "to_nano", "totals", "usd_json", "utcnow"]
