"""Find model weights: a local path, the Hugging Face cache, or a download when the hub answers.

Offline, transformers retries the hub for ~50 s before failing; we check the cache and the
hub's reachability first so a missing model fails (and falls back) in well under a second.
"""
from __future__ import annotations

import os
import socket
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

from rag_app.core import ModelLoadError


@lru_cache(maxsize=1)
def hub_reachable(timeout_s: float = 2.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def resolve_model_path(model: str) -> Path:
    """A directory holding the model's files, or ModelLoadError saying how to provide one."""
    path = Path(model).expanduser()
    if path.exists():
        return path
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except Exception:
        pass
    if not hub_reachable():
        raise ModelLoadError(
            f"model {model!r} is neither a local path nor in the Hugging Face cache, and the hub "
            "is unreachable; download it on a connected machine and point the setting at its folder")
    try:
        return Path(snapshot_download(model))
    except Exception as e:
        raise ModelLoadError(f"cannot download model {model!r}: {e}") from e
