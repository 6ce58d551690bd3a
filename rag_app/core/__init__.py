"""The vocabulary every other package speaks: the domain's values (`types`), what a stage did and cost
(`usage`), the seams of the query path as Protocols (`ports`) and the lazily built part that fills one
(`lazy`), money in nano-dollars (`money`), the ledger's clock (`clock`) and the one exception tree
(`errors`). It imports nothing else of the project, so anything may import it.

Import the module you need (`from rag_app.core.usage import StageUsage`); this file only names them."""

__all__ = ["clock", "errors", "lazy", "money", "ports", "types", "usage"]
