import pytest

from rag_app.text.legal_numbers import cn_to_int, find_article_refs, int_to_cn, parse_article_label


@pytest.mark.parametrize("cn,n", [("一", 1), ("十", 10), ("十七", 17), ("二十", 20), ("一百", 100),
                                  ("一百零一", 101), ("一百一十", 110), ("二百六十四", 264),
                                  ("一千零六十四", 1064), ("一千二百六十", 1260), ("三百零三", 303)])
def test_round_trip(cn, n):
    assert cn_to_int(cn) == n
    assert int_to_cn(n) == cn


def test_every_number_a_law_uses_round_trips():
    for n in range(1, 2000):
        assert cn_to_int(int_to_cn(n)) == n


def test_article_refs_mixed_forms():
    text = "依照刑法第264条、第一百二十八 条（刑事诉讼法的空格）和第一百三十三条之一，另见第 17 条"
    assert find_article_refs(text) == ["264", "128", "133-1", "17"]
    assert parse_article_label("第十七条之二") == "17-2"
    assert parse_article_label("总则") is None


def test_not_a_numeral():
    with pytest.raises(ValueError):
        cn_to_int("甲乙")
