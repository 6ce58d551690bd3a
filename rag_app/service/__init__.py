"""HTTP service (`rag serve`): FastAPI over the same RagApp the CLI uses, with experiment routing."""
