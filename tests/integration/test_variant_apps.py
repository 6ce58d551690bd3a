"""Composition off the question's path (rag_app/service/variant_apps.py): `rag serve`'s pool builds every
variant's app when it starts, so a request, whichever arm it lands in, only looks its app up."""
from __future__ import annotations

import json

import pytest

from rag_app.app import RagApp
from rag_app.core.errors import ConfigError
from rag_app.service.pool import VariantPool
from tests.conftest import make_settings

LAW = "第一条 为了规范测试，制定本法。\n\n第二条 本法适用于测试。\n"


def _settings(tmp_path, **kw):
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top1": {"top_n": 1}}, "experiments": {
        "all": {"control": "default", "treatment": "top1", "rollout_pct": 100, "seed": "s"}}}))
    return make_settings(tmp_path, retriever="bm25", experiments_file=cfg, **kw)


def test_a_request_builds_no_app_whichever_variant_answers_it(tmp_path, monkeypatch):
    pool = VariantPool(_settings(tmp_path, experiment="all"))
    try:
        doc = tmp_path / "law.md"
        doc.write_text(LAW, encoding="utf-8")
        assert not pool.ingester(pool.settings.collection).ingest([doc]).errors

        def no_build(*args, **kwargs):
            raise AssertionError("an app was built on the question's path")

        monkeypatch.setattr(RagApp, "__init__", no_build)
        answer, arm = pool.ask("测试适用于什么？", user_id="u1")  # rollout 100%: the treatment answers
        assert arm is not None and arm.variant == "top1" and answer.text
        answer, arm = pool.ask("测试适用于什么？", variant="default")
        assert arm is None and answer.text
        apps = {name: pool.app_for(name) for name in ("default", "top1")}  # the start-up's own
        assert apps["top1"].settings.top_n == 1 and apps["default"].settings.top_n != 1
    finally:
        pool.close()


def test_a_variant_that_cannot_be_built_stops_the_start_and_lets_the_store_go(tmp_path, monkeypatch):
    import rag_app.service.pool as pool_module

    def refuse(base, config):
        raise ConfigError("exp.json: variants.top1: cannot be built")

    settings = _settings(tmp_path)
    with monkeypatch.context() as m:
        m.setattr(pool_module, "variant_apps", refuse)
        with pytest.raises(ConfigError, match="variants.top1"):
            VariantPool(settings)
    VariantPool(settings).close()  # the embedded store's lock was let go: the next start opens it
