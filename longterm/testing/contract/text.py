"""The contract's text: Unicode and CJK found, broken UTF-16 repaired, huge queries and events handled.

The seam: ``Text``, a mixin of test methods over ``Fixtures``' ``memory``.
"""

from __future__ import annotations

import pytest

from ... import InvalidInputError, LongTermMemory
from .. import make_session
from .fixtures import hit_parts, search_texts


class Text:
    """Every language is searchable; no text a client sends breaks a save or a search."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        "text, query",
        [
            ("我今天在北京吃了烤鸭，味道很好", "北京"),
            ("我今天在北京吃了烤鸭，味道很好", "烤鸭"),
            ("昨日は東京で寿司を食べました", "東京"),
            ("저는 서울에서 한국어를 공부합니다", "한국어"),
            ("Ich wohne in München und trinke gern Kaffee", "münchen"),
            ("J'adore le café crème", "cafe"),
            ("Weekend plans 🎉 with Zoë", "zoë"),
            ("Next month I fly to İstanbul", "istanbul"),
            ("下周我和Maria一起去上海出差", "Maria"),
            ("下周我和Maria一起去上海出差", "上海出差"),
            ("We had dinner at 海底捞 with Tom", "海底捞"),
            ("明天的meeting改到下午三点", "meeting"),
        ],
    )
    async def test_unicode_and_cjk_are_searchable(self, memory: LongTermMemory, text: str, query: str):
        await memory.add_session_to_memory(make_session(turns=[("user", text), ("user", "unrelated filler sentence")]))
        assert (await search_texts(memory, "app", "u1", query))[:1] == [text]

    @pytest.mark.asyncio
    async def test_text_cut_inside_an_emoji_is_repaired_and_ids_that_are_no_unicode_refused(
        self, memory: LongTermMemory
    ):
        """Lone UTF-16 surrogates (an emoji sliced by a JavaScript client) cannot be stored by
        any engine: in text, author, tool arguments and metadata they become U+FFFD and the
        memory is saved and found; in an id they are refused with a clear error."""
        s = make_session(turns=[("user", "Pack the sunscreen \ud83d"), ("user", "unrelated filler sentence")])
        s["events"][0]["author"] = "user\udc00"
        s["events"][0]["custom_metadata"] = {"note\ud800": ["x\ud800"]}
        call = {"function_call": {"name": "pack", "args": {"item": "sunscreen \ud83d"}}}
        s["events"].append({"id": "s1-call", "author": "agent", "content": {"role": "model", "parts": [call]}})
        await memory.add_session_to_memory(s, auto_save_memory_policy="all")
        res = await memory.search_memory(app_name="app", user_id="u1", query="sunscreen")
        texts = [" ".join(p.text or "" for p in hit_parts(m)) for m in res.memories]
        assert "Pack the sunscreen \ufffd" in texts
        hit = res.memories[texts.index("Pack the sunscreen \ufffd")]
        assert hit.author == "user\ufffd"
        assert any(hit_parts(m)[0].function_call is not None for m in res.memories)
        for bad in (make_session("s\ud800"), {**make_session("s2"), "user_id": "u\udc00"}):
            with pytest.raises(InvalidInputError, match="not valid Unicode"):
                await memory.add_session_to_memory(bad)
        bad_event = make_session("s3")
        bad_event["events"][0]["id"] = "e\ud800"
        with pytest.raises(InvalidInputError, match="not valid Unicode"):
            await memory.add_session_to_memory(bad_event)
        with pytest.raises(InvalidInputError, match="not valid Unicode"):
            await memory.search_memory(app_name="app", user_id="u1\ud800", query="sunscreen")

    @pytest.mark.asyncio
    async def test_a_pasted_page_as_query_is_answered_in_scope(self, memory: LongTermMemory):
        """Thousands of distinct words, or one huge token, are a valid query on every engine
        (OpenSearch alone refuses more than 1,024 clauses), and stay in scope."""
        await memory.add_session_to_memory(make_session(user="victim", turns=[("user", "victim keeps bees too")]))
        await memory.add_session_to_memory(
            make_session(turns=[("user", "I keep bees in the garden"), ("user", "filler words here")])
        )
        many = " ".join(f"w{i}x" for i in range(3000))
        for query in ["bees " + many, "bees " + "z" * 100_000, "bees " + "蜂" * 20_000, "bees " * 3000, many + " bees"]:
            texts = await search_texts(memory, "app", "u1", query)
            assert set(texts) <= {"I keep bees in the garden", "filler words here"}, query[:40]
            assert texts or query.startswith("w0x"), query[:40]  # past the first 256 terms, bees may not count

    @pytest.mark.asyncio
    async def test_one_megabyte_event_is_stored_whole_or_refused(self, memory: LongTermMemory):
        big = ("lorem ipsum dolor sit amet " * 40_000)[:1_000_000] + " zanzibar"
        s = make_session(turns=[("user", big)])
        try:
            await memory.add_session_to_memory(s)
        except InvalidInputError as exc:
            assert "bytes" in str(exc)
            assert await memory.count(app_name="app", user_id="u1") == 0
            return
        stored = [r async for r in memory.iter_records(app_name="app", user_id="u1")]
        assert len(stored) == 1 and stored[0].text == big
        res = await memory.search_memory(app_name="app", user_id="u1", query="zanzibar")
        assert res.memories and hit_parts(res.memories[0])[0].text == big
