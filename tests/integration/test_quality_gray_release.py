"""Two scripted gray releases (issue 44), end to end: the real pipeline over 公司法 (BM25), a real local
OpenAI-compatible server whose "model" reads the prompt it is sent and answers in a known way
(bench/quality_set.py's writers: a quote for the control's gpt-4o-mini; for the cheaper gpt-4.1-nano
treatment, the same quote with its modal flipped, or a faithful heavy paraphrase), a real SQLite ledger,
and the verdict `rag experiment compare` gives. No judge: the local groundedness decides.

0.9 promoted the flipped-modal arm (it scored 0.99: the passage's own words) and rolled back the
paraphrasing one on a point estimate while its interval was still unclear."""
from __future__ import annotations

import json

import pytest

from bench.quality_set import Writer
from rag_app.experiments.comparison import compare_live
from rag_app.experiments.verdict import agrees
from rag_app.service.pool import VariantPool
from rag_app.service.query_service import QueryRequest, QueryService
from rag_app.spend.budgets import BudgetGate, Limits, load_budgets
from tests.conftest import index_company_law, make_settings
from tests.fakes.openai_server import FakeOpenAI, Reply
from tracing.ledger import Ledger

QUESTIONS = ["一人有限责任公司是什么？", "董事任期多长？", "股东会会议由谁召集和主持？", "公司成立后股东能抽逃出资吗？",
             "有限责任公司最多可以有多少个股东？", "股东会行使哪些职权？", "董事会对谁负责？", "召开股东会会议应当提前多久通知股东？",
             "股东有权查阅哪些文件？", "有限责任公司的注册资本是什么？", "监事会由哪些人组成？", "经理由谁聘任或者解聘？",
             "股东可以用哪些财产出资？", "股东不按规定缴纳出资要承担什么责任？", "公司合并应当怎样通知债权人？", "董事会会议的表决规则是什么？"]
ANSWERS = 160  # users; about half in each arm


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("gray")
    index_company_law(root, retriever="bm25")
    return root


def scripted(kinds: dict[str, str]):
    """A model per name that reads the real prompt and writes one kind of answer from its passages."""
    def respond(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        question = prompt.split("问题 / Question:")[-1].strip()
        writer = Writer("zh", question, prompt, donors=["用人单位可以随时无理由辞退劳动者。"], seed=question)
        answer = writer.write(kinds[body["model"]]) or writer.write("quote")
        return Reply(content=answer, prompt_tokens=1200, completion_tokens=120)
    return respond


def gray_release(indexed, tmp_path, treatment_kind: str) -> dict:
    import shutil

    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"nano": {"llm_model": "gpt-4.1-nano"}}, "experiments": {
        "cheaper": {"control": "default", "treatment": "nano", "rollout_pct": 50, "seed": "s"}}}))
    shutil.copytree(indexed / "data" / "edge", tmp_path / "d" / "edge")
    with FakeOpenAI(scripted({"gpt-4o-mini": "quote", "gpt-4.1-nano": treatment_kind})) as llm:
        settings = make_settings(indexed, data_dir=tmp_path / "d", experiments_file=cfg, experiment="cheaper",
                                 retriever="bm25", answer_cache_size=0, openai_base_url=llm.base_url)
        pool = VariantPool(settings)
        try:
            gate = BudgetGate(load_budgets(None), Limits(pool.base.prices.fx), lambda fn: None)
            service = QueryService(lambda: pool, gate, None, settings.data_dir)
            for i in range(ANSWERS):
                payload = service.answer(QueryRequest(QUESTIONS[i % len(QUESTIONS)], user_id=f"u{i}")).answer
                assert payload["quality"]["claims"], payload  # every answer carries its claims
            pool.drain()
            with Ledger.open(f"sqlite:///{settings.ledger_path}") as ledger:
                return compare_live(ledger, pool.experiment)
        finally:
            pool.close()


def test_a_cheaper_arm_that_flips_modalities_is_not_promoted_without_a_judge(indexed, tmp_path):
    res = gray_release(indexed, tmp_path, "flipped_modal")
    c, t = res["arms"]["control"], res["arms"]["treatment"]
    assert t["cost_per_query"]["mean"] < 0.9 * c["cost_per_query"]["mean"]  # cost alone would promote it
    assert c["quality"]["groundedness"] >= 0.9 and t["quality"]["groundedness"] <= 0.3, (c["quality"], t["quality"])
    assert res["verdict"] in ("roll back", "hold") and res["decided_by"] in ("groundedness", "quality"), res["reason"]
    assert agrees(res["verdict"], res["reason"]), res["reason"]


def test_a_cheaper_arm_that_paraphrases_faithfully_is_not_rolled_back(indexed, tmp_path):
    res = gray_release(indexed, tmp_path, "heavy_paraphrase")
    c, t = res["arms"]["control"], res["arms"]["treatment"]
    assert t["quality"]["groundedness"] >= 0.8, t["quality"]
    assert res["verdict"] != "roll back", res["reason"]
    assert agrees(res["verdict"], res["reason"]), res["reason"]
