"""Chinese retrieval through the public API on the local backend: a question finds the
memory it is about whatever script, width, date spelling or function words either used."""

from __future__ import annotations

from pathlib import Path

from longterm import LongTermMemory
from longterm.retrieval.text import segment
from tests.conftest import make_session

#: Memories that share no content with the questions below: they give BM25 a store in
#: which rare terms weigh more than common ones, as in a real user's history.
FILLER = [
    "今天下雨了，没出门。",
    "周末去超市买了水果和牛奶。",
    "最近在看一部关于太空的纪录片。",
    "明天早上要开会，得早点睡。",
    "晚饭做了番茄炒蛋。",
    "同事送了我一盆绿萝。",
    "地铁上人太多了。",
    "这周健身房去了三次。",
]


async def _top(tmp_path: Path, memories: list[str], question: str) -> str | None:
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    await m.add_session_to_memory(make_session(turns=[("user", t) for t in [*FILLER, *memories]]))
    res = await m.search_memory(app_name="app", user_id="u1", query=question)
    await m.close()
    return res.memories[0].content.parts[0].text if res.memories else None


async def test_a_simplified_question_finds_a_memory_written_in_traditional(tmp_path: Path):
    memory = "醫生說我對貓毛過敏。"
    assert await _top(tmp_path, [memory, "我养了一只猫"], "我对什么过敏？") == memory


async def test_a_traditional_question_finds_a_memory_written_in_simplified(tmp_path: Path):
    memory = "我女儿的生日派对在会所办。"
    chatter = "我女儿在学游泳，我女儿很开心。"
    assert await _top(tmp_path, [chatter, memory], "我女兒的派對在哪裡辦？") == memory


async def test_a_date_in_chinese_numerals_finds_the_same_date_in_digits(tmp_path: Path):
    memory = "我五月三号去成都。"
    distractor = "我6月3日去杭州。"
    assert await _top(tmp_path, [memory, distractor], "5月3日我去哪？") == memory
    assert await _top(tmp_path / "back", [distractor, "我5月3日去成都。"], "我五月三号去哪里？") == "我5月3日去成都。"


def test_full_width_traditional_and_colloquial_dates_index_alike():
    assert segment("孫子８月２８號到") == segment("孙子8月28日到")
    assert segment("星期天") == segment("礼拜天") == segment("周日")


async def test_a_word_split_by_the_question_s_bigrams_is_still_found(tmp_path: Path):
    # 我的猫叫什么 makes the bigram 猫叫, which the memory does not hold: its characters do.
    memory = "我养了一只橘猫，叫年糕。"
    assert await _top(tmp_path, [memory], "我的猫叫什么名字？") == memory


async def test_function_words_shared_with_a_question_do_not_outrank_its_content(tmp_path: Path):
    memory = "早上只喝燕麦拿铁，不加糖。"
    chatter = "你说的是什么？我喝的是什么？"
    assert await _top(tmp_path, [chatter, memory], "我喝的是什么拿铁？") == memory
