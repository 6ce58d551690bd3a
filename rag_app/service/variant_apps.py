"""The one factory for a service's variant apps: each variant of RAG_EXPERIMENTS_FILE gets its RagApp over
RAG_COLLECTION when `rag serve` starts, not on the variant's first request, so no question pays for (or
fails on) composition, and a variant that cannot be built stops the start with one line naming it.

    check_variants(settings, config)                  what each variant asks for, checked before any build
    variant_app(base, name, overrides, collection)    one app: the variant's settings over the base's parts
    variant_apps(base, config)                        every variant over RAG_COLLECTION (start-up)

Every app shares the base's store, ledger writer, price table and tracer (an embedded store has one owner per
process) and its dense embedder when it reads the same model; building one opens nothing and loads no model
(its parts are `Lazy` providers). Apps over another collection are the same factory's, built when a request
first names that collection (collections are open-ended: rag_app/service/pool.py closes idle ones)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_app.app import RagApp
from rag_app.config import Settings
from rag_app.core import ConfigError
from rag_app.experiments import ExperimentConfig

__all__ = ["check_variants", "variant_app", "variant_apps"]


def check_variants(settings: Settings, config: ExperimentConfig) -> None:
    """Each variant's settings as the service would answer with them, refused with the file and the key:
    top_n within top_k, a rewrite that can run, an adapter that fits this rescore embedder."""
    for name, overrides in config.variants.items():
        top_k, top_n = overrides.get("top_k", settings.top_k), overrides.get("top_n", settings.top_n)
        if top_n > top_k:
            raise ConfigError(f"{settings.experiments_file}: variants.{name}: top_n ({top_n}) exceeds top_k "
                              f"({top_k}, {'the variant' if 'top_k' in overrides else 'RAG_TOP_K'}); "
                              "lower top_n or raise top_k")
        own = settings.model_copy(update=overrides)  # the settings the variant's app will read
        if own.rewrites:
            _check_rewrite(name, own)
        if "query_adapter" in overrides:
            _check_adapter(name, own)


def variant_app(base: RagApp, name: str | None, overrides: dict[str, Any], collection: str) -> RagApp:
    """`name`: the variant (None: the app that ingests into `collection`, with the base's settings)."""
    update = {**overrides, "collection": collection, **({"variant": name} if name is not None else {})}
    return RagApp(base.settings.model_copy(update=update), shared=base)


def variant_apps(base: RagApp, config: ExperimentConfig) -> dict[str, RagApp]:
    """Every variant of `config` over the base's collection, built now (start-up)."""
    collection = base.settings.collection
    return {name: variant_app(base, name, overrides, collection) for name, overrides in config.variants.items()}


def _check_rewrite(variant: str, settings: Settings) -> None:
    why = settings.rewrite_refusal()
    if why:
        raise ConfigError(f"{settings.experiments_file}: variants.{variant}: query_rewrite {why} "
                          "(or drop the rewrite lever from the variant)")
    from rag_app.query import check_rewrite_prompt

    check_rewrite_prompt(settings.query_rewrite_prompt_version)


def _check_adapter(variant: str, settings: Settings) -> None:
    """What start-up checks of RAG_QUERY_ADAPTER, for a variant's own adapter (a gray release of a newly
    trained one): a file that is there, an adapter, over this rescore embedder."""
    setting = settings.query_adapter
    if setting not in ("auto", "none", "latest") and not Path(setting).is_file():
        why: str | None = "is not a file: use auto, none, latest or the .npz path `rag train-adapter` printed"
    else:
        try:
            why = settings.adapter_refusal()
        except ConfigError as e:
            why = str(e)
    if why:
        raise ConfigError(f"{settings.experiments_file}: variants.{variant}: query_adapter {setting!r}: {why}")
