"""Ingest decides the dense leg without loading a model it will not use (issue 20 item 4): the packaged
fallback's [UNK] rate and dimension come from its folder (tokenizer.json, the pooling config), and
sentence-transformers + torch (~7 s of CPU) load only when something is embedded."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rag_app.models.embedding import FALLBACK_MODEL, SentenceTransformerEncoder, _fallback_path, load_embeddings

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["中华人民共和国民法典第一千零四十三条规定家庭应当树立优良家风",
         "The employer shall pay wages in full and on time.", "劳动者享有平等就业和选择职业的权利。" * 80]

_INGEST_IN_A_FRESH_PROCESS = """
import json, sys
from pathlib import Path
from rag_app.app import RagApp
from tests.conftest import make_settings
root = Path(sys.argv[1])
(root / "law.md").write_text("# 劳动法\\n\\n" + "".join(
    f"第{i}条 劳动者享有平等就业和选择职业的权利、取得劳动报酬的权利、休息休假的权利。\\n\\n" for i in range(1, 30)),
    encoding="utf-8")
with RagApp(make_settings(root, embed_model="no-such-model-offline")) as app:
    report = app.ingest([root / "law.md"])
info = report.collection
print(json.dumps({"torch": "torch" in sys.modules, "st": "sentence_transformers" in sys.modules,
                  "dense": info.dense_enabled, "reason": info.dense_disabled_reason, "dim": info.dimension,
                  "model": info.embed_model, "errors": [o.error for o in report.errors]}))
"""


def test_ingest_that_drops_the_dense_leg_never_loads_torch(tmp_path):
    out = subprocess.run([sys.executable, "-c", _INGEST_IN_A_FRESH_PROCESS, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                                                              "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["errors"] == []
    assert seen["model"] == FALLBACK_MODEL and seen["dense"] is False
    assert "[UNK]" in seen["reason"] and "dense leg dropped" in seen["reason"]  # the user-visible decision
    assert seen["dim"] == 384
    assert not seen["torch"] and not seen["st"]


def test_the_folder_reading_agrees_with_the_loaded_model():
    lazy = SentenceTransformerEncoder(_fallback_path(), lazy=True)
    rate, dim = lazy.unknown_token_rate(TEXTS), lazy.dimension
    assert lazy._model is None  # neither read loaded it
    loaded = load_embeddings(FALLBACK_MODEL)
    tok = loaded.tokenizer  # loads the model: the tokenizer sentence-transformers itself uses
    ids = tok(TEXTS, add_special_tokens=False, truncation=True, max_length=512)["input_ids"]
    real = sum(sum(1 for t in x if t == tok.unk_token_id) for x in ids) / sum(len(x) for x in ids)
    assert rate == real and 0.2 < rate < 0.9
    assert dim == int(loaded.encoder.encode_query("dimension probe").shape[-1]) == 384
