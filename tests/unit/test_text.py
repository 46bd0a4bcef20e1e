"""The shared text processing every backend uses for queries: what a question looks up."""

from __future__ import annotations

from longterm.retrieval.text import MAX_QUERY_TERMS, query_terms, segment


def test_a_question_looks_up_its_content_words_not_its_function_words():
    assert query_terms("What did I say about my sister's wedding?") == ["sister", "wed"]
    assert query_terms("what did I say", stem=False) == ["what", "did", "i", "say"]  # nothing else to go on


def test_chinese_is_looked_up_as_bigrams_and_characters_and_found_inside_a_sentence():
    assert query_terms("北京烤鸭") == ["北京", "京烤", "烤鸭", "北", "京", "烤", "鸭"]
    assert {"北京", "京"} <= set(segment("我今天在北京吃了烤鸭").split())


def test_a_chinese_question_drops_its_function_words_unless_nothing_else_is_left():
    assert query_terms("我的猫叫什么名字？") == ["猫叫", "猫", "叫", "名字", "名", "字"]
    assert query_terms("什么？") == ["什么"]


def test_a_pasted_page_looks_up_its_first_distinct_terms_only():
    words = [f"w{i}x" for i in range(3 * MAX_QUERY_TERMS)]
    terms = query_terms(" ".join(["garden", "garden", *words]))
    assert len(terms) == MAX_QUERY_TERMS
    assert terms[:2] == ["garden", "w0x"]
