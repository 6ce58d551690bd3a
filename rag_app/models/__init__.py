"""Every model the product calls, and what each call costs in the unit it is billed in: the chat model
over an OpenAI-compatible endpoint with our retries (`llm`), each physical request as a usage
(`attempts`, `llm_usage`), embedders and their persistent cache (`embedding`, `embedding_cache`,
`e5_onnx`), rerankers in-process or over HTTP (`rerank`, `rerank_http`), where weights are found
(`weights`) and billed token counts (`model_tokens`). Imports `core`, `text` and `config` only.

Import the module you need; this file only names them."""

__all__ = ["attempts", "e5_onnx", "embedding", "embedding_cache", "llm", "llm_usage", "model_tokens",
           "rerank", "rerank_http", "weights"]
