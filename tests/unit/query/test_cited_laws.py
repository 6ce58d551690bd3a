"""Which laws a question names: a fixed case table for the pure function retrieval uses."""
import pytest

from rag_app.query.retrieval import cited_laws

TITLES = ["中华人民共和国保险法", "中华人民共和国社会保险法", "中华人民共和国公司法", "公司法", "中华人民共和国民法典",
          "中华人民共和国刑法", "中华人民共和国刑法修正案（十一）"]

CASES = [
    ("保险法第十条的内容是什么", ["中华人民共和国保险法"]),
    ("社会保险法第十条规定了什么", ["中华人民共和国社会保险法"]),  # 保险法 inside 社会保险法 is dropped
    ("《中华人民共和国公司法》第五十七条", ["中华人民共和国公司法"]),
    ("公司法第57条", ["中华人民共和国公司法", "公司法"]),  # two titles share the name: both
    ("民法典和刑法第264条", ["中华人民共和国刑法", "中华人民共和国民法典"]),
    ("刑法修正案（十一）第一条", ["中华人民共和国刑法修正案（十一）"]),
    ("劳动合同法第十条", []),
    ("", []),
]


@pytest.mark.parametrize("question,expected", CASES)
def test_cited_laws(question, expected):
    assert cited_laws(question, TITLES) == sorted(expected)


def test_no_titles_names_nothing():
    assert cited_laws("公司法第57条", []) == []
