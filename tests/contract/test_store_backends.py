"""The store contract run against each backend: Qdrant Edge (the embedded default), qdrant-client's
local mode (the stand-in for the server API) and, when QDRANT_URL is set, a real Qdrant server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from rag_app.core.errors import OutdatedStore, StoreInUse
from rag_app.store.client import ClientStore
from rag_app.store.edge import EdgeStore
from tests.conftest import HANG_S
from tests.contract.store_contract import StoreContract, info_for, point

SERVER_URL = os.environ.get("QDRANT_URL")  # read before the autouse fixture clears it
SERVER_KEY = os.environ.get("QDRANT_API_KEY")
HNSW = dict(hnsw_m=12, hnsw_ef_construct=64)


class TestEdgeStore(StoreContract):
    def make_store(self, tmp_path):
        return EdgeStore(tmp_path / "edge", legacy_path=tmp_path / "qdrant", **HNSW)

    def hnsw_config(self, store, name):
        cfg = json.loads((store.root / name / "shard" / "edge_config.json").read_text())
        h = cfg["vectors"]["dense"].get("hnsw_config") or cfg["hnsw_config"]
        return h["m"], h["ef_construct"]

    def indexed_fields(self, store, name):
        return set(store._shard(name).info().payload_schema)

    def test_collection_survives_reopen(self, tmp_path):
        with self.make_store(tmp_path) as s:
            s.create(info_for("legal"))
            s.replace_document("legal", "d1", "v1", [point("d1", "v1", i) for i in range(3)])
        with self.make_store(tmp_path) as s:
            assert s.info("legal") == info_for("legal") and s.count("legal") == 3
            assert s.titles("legal") == ["公司法"]

    def test_second_process_gets_one_line_naming_the_store_and_holder(self, tmp_path):
        with self.make_store(tmp_path) as s:
            s.create(info_for("legal"))
            code = ("import sys; from pathlib import Path; from rag_app.store.edge import EdgeStore\n"
                    "from rag_app.core.errors import StoreInUse\n"
                    f"try: EdgeStore(Path({str(tmp_path / 'edge')!r}))\n"
                    "except StoreInUse as e: print(e); sys.exit(3)\n")
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S,
                                 env={**os.environ, "PYTHONPATH": os.getcwd()})
            assert res.returncode == 3, res.stderr
            line = res.stdout.strip()
            assert "\n" not in line and str(tmp_path / "edge") in line and f"process {os.getpid()}" in line
        with self.make_store(tmp_path) as s:  # released on close: the next owner gets in
            assert s.count("legal") == 0

    def test_a_sparse_only_collection_is_indexed_at_commit_whatever_its_size(self, tmp_path):
        """Issue 20 item 4: past the engine's default threshold (10,000 KB, between 1x and 2x legal_zh) only
        larger corpora paid the indexing pass, so writes grew 6x for 4x the corpus. 1,200 chunks of 150
        terms (~1 MB of sparse vectors, a tenth of that default) are indexed at commit: an indexed segment
        beside the empty appendable one. A dense collection keeps the engine's threshold (its HNSW build)."""
        with self.make_store(tmp_path) as s:
            s.create(info_for("sparse", dense=False))
            s.create(info_for("dense"))
            for d in range(12):
                s.replace_document("sparse", f"d{d}", "v1", [
                    replace(point(f"d{d}", "v1", i, terms=tuple(range(i % 50, i % 50 + 150))), dense=None)
                    for i in range(100 * d, 100 * d + 100)])
            s.commit("sparse")
            assert s._shard("sparse").info().segments_count == 2
            assert s.count("sparse") == 1200
            config = json.loads((s.root / "dense" / "shard" / "edge_config.json").read_text())
            assert (config.get("optimizers") or {}).get("indexing_threshold") is None

    def test_holder_with_a_multiline_command_is_still_named_on_one_line(self, tmp_path):
        code = ("import sys, time\nfrom pathlib import Path\nfrom rag_app.store.edge import EdgeStore\n"
                f"s = EdgeStore(Path({str(tmp_path / 'edge')!r}))\nprint('ready', flush=True)\ntime.sleep(60)\n")
        holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": os.getcwd()})
        try:
            assert holder.stdout.readline().strip() == "ready"
            with pytest.raises(StoreInUse) as e:
                self.make_store(tmp_path)
            assert "\n" not in str(e.value) and f"process {holder.pid} (" in str(e.value)
        finally:
            holder.kill()
            holder.wait()

    def test_in_process_second_open_is_refused_too(self, tmp_path):
        with self.make_store(tmp_path):
            with pytest.raises(StoreInUse, match="in use by process"):
                self.make_store(tmp_path)

    def test_store_of_an_earlier_version_is_recognised_and_rebuild_clears_it(self, tmp_path):
        old = ClientStore(path=tmp_path / "qdrant")
        old.create(info_for("legal"))
        old.replace_document("legal", "d1", "v1", [point("d1", "v1", 0)])
        old.close()
        with self.make_store(tmp_path) as s:
            with pytest.raises(OutdatedStore) as e:
                s.info("legal")
            assert "rag ingest --rebuild PATH" in str(e.value) and str(tmp_path / "qdrant") in str(e.value)
            assert s.info("other") is None  # only the collection the old store holds
            s.drop("legal")  # what --rebuild does first
            assert s.info("legal") is None
        assert not (tmp_path / "qdrant").exists()

    def test_bad_collection_name_is_refused(self, store):
        from rag_app.core.errors import StoreError

        with pytest.raises(StoreError, match="RAG_COLLECTION"):
            store.info("../escape")


class TestLocalModeStore(StoreContract):
    """qdrant-client local mode: the same client API a server answers (and the earlier store)."""

    def make_store(self, tmp_path):
        return ClientStore(path=tmp_path / "qdrant", **HNSW)

    def hnsw_config(self, store, name):
        h = store.client.get_collection(name).config.params.vectors["dense"].hnsw_config
        return h.m, h.ef_construct

    def indexed_fields(self, store, name):
        return None  # local mode has no payload indexes (it scans)


@pytest.mark.skipif(not SERVER_URL, reason="set QDRANT_URL to run the contract against a Qdrant server")
class TestServerStore(StoreContract):
    def make_store(self, tmp_path):
        return ClientStore(url=SERVER_URL, api_key=SERVER_KEY, **HNSW)

    def hnsw_config(self, store, name):
        h = store.client.get_collection(name).config.params.vectors["dense"].hnsw_config
        return h.m, h.ef_construct

    def indexed_fields(self, store, name):
        return set(store.client.get_collection(name).payload_schema)
