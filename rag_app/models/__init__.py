"""Every model the product calls, and what each call costs in the unit it is billed in: the chat model
over an OpenAI-compatible endpoint with our retries (`llm`), each physical request as a usage
(`attempts`, `llm_usage`), embedders and their persistent cache (`embedding`, `embedding_cache`,
`e5_onnx`), rerankers in-process or over HTTP (`rerank`, `rerank_http`), where weights are found
(`weights`) and billed token counts (`model_tokens`). Imports `core`, `text` and `config` only.

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.models.attempts import AttemptRecorder, REPORTED_BY_STAGE
    from rag_app.models.embedding import LocalEmbeddings, cached_embeddings, load_encoder
    from rag_app.models.embedding_cache import EmbeddingCache
    from rag_app.models.llm import (build_chat_model, build_judge_model, build_rewrite_model,
                                    invoke_with_retries)
    from rag_app.models.llm_usage import classify_error, explicit_cache_of
    from rag_app.models.model_tokens import tokenizer_for
    from rag_app.models.rerank import load_reranker, rerank_candidates


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["REPORTED_BY_STAGE", "AttemptRecorder", "EmbeddingCache", "LocalEmbeddings", "build_chat_model",
           "build_judge_model", "build_rewrite_model", "cached_embeddings", "classify_error",
           "explicit_cache_of", "invoke_with_retries", "load_encoder", "load_reranker", "rerank_candidates",
           "tokenizer_for"]
