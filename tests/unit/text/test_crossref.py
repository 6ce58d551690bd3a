from rag_app.text.crossref import same_document_refs


def test_same_document_references():
    assert same_document_refs("第七十条 依照本法第六十九条的规定，决定执行的刑罚。", ("70",)) == ["69"]
    assert same_document_refs("违反本法第十二条规定的，依照刑法第二百六十四条处罚；依照《民法典》第五条") == ["12"]
    assert same_document_refs("有前款行为的，依照第一百三十三条之一定罪处罚") == ["133-1"]
    assert same_document_refs("第五条 本条没有引用。") == []
