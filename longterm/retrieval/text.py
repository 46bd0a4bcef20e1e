"""Language-aware text processing for full-text search, shared by every backend.

The seam: ``segment(text)`` rewrites a memory so that an engine's ordinary word
tokenizer indexes it well (CJK runs become space-separated bigrams and unigrams; other
text is left to the engine's stemmer); ``query_terms(text)`` turns a question into the
terms to look up. For engines without a stemmer, ``index_terms``/``query_terms(stem=True)``
do the stemming here, so the same text gives the same terms on every engine.
``TEXT_VERSION`` names what ``segment`` produces: rows indexed under another version do
not match this version's query terms until they are indexed again.

Why do it ourselves instead of the engines' analyzers:
- Chinese and Japanese have no spaces. Overlapping character bigrams (plus unigrams on
  the index side) make any two-character word findable inside a longer sentence, with
  no dictionary. Korean gets the same treatment, which copes with its particles.
- Questions look up each Chinese character too (but the most common ones): a bigram
  that straddles two words of the question (猫叫 in 我的猫叫什么) matches nothing, its
  characters still do. Kana and Hangul are not looked up alone (particles).
- Chinese is folded before anything else: width (NFKC: ５月 is 5月), traditional to
  simplified (``zh_fold``: 過敏 finds 过敏) and dates to one form (``zh_dates``: 五月三号
  finds 5月3日), on both sides.
- English is stemmed (Snowball here, or the engine's Porter stemmer), so "hiking" finds
  "hiked"; accents are folded.
- Questions are mostly function words ("what did I say about ...", 我上次说的是什么).
  The query side drops stopwords and memory meta-verbs unless nothing else is left, so
  they cannot dominate; a Chinese question is cut at its function words before bigrams
  are made, so 我的 or 什么 are never looked up.
- Every term is made of letters and digits only, so it can never carry query syntax
  into an engine, whatever the user typed.

Why ASCII text has a pattern of its own: the patterns that know CJK (``_token``, ``_zh_stop``)
take milliseconds to compile (``re`` walks every character of their ranges), which every
``import longterm`` paid. Normalised ASCII text holds no CJK, no 月/日 and no capital, so
``_ASCII_TOKEN`` finds exactly the runs ``_token()`` would (``tests/unit/test_light_install.py``
checks that); the CJK patterns are compiled when the first text that is not ASCII needs them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import cache, lru_cache

import snowballstemmer

from .zh_dates import canonical_dates
from .zh_fold import fold

#: What ``segment``/``index_terms`` produce; bumped whenever the index side changes, so a
#: store can tell that rows written before need indexing again.
TEXT_VERSION = "2"

_CJK = (
    "\u1100-\u11ff"  # Hangul jamo
    "\u2e80-\u2fdf"  # CJK radicals
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0003134f"  # CJK extensions B..G
)
#: What ``_token()`` finds in ASCII text once normalised (NFKC and casefold: lower case): words.
_ASCII_TOKEN = re.compile("[0-9a-z]+")


@cache
def _token() -> re.Pattern[str]:
    """Runs of any text: a day or month number (5月), a CJK run, or a word (letters and digits)."""
    return re.compile(rf"(?P<date>[0-9]{{1,2}}[月日])|(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")


def _is_han(char: str) -> bool:
    """A Han character (CJK unified ideographs, extension A and B..G, compatibility ideographs)."""
    o = ord(char)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x3134F


STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
        "don",
        "didn",
        "doesn",
        "isn",
        "wasn",
        "aren",
        "weren",
        "won",
        "shall",
        "may",
        "might",
        "must",
        "also",
        "ever",
    ]
)

#: Verbs that ask *about* memory rather than name its content ("what did I say about X").
MEMORY_VERBS = frozenset(["say", "said", "says", "tell", "told", "mention", "mentioned", "remember", "recall"])

#: Chinese function words, question words and memory meta-verbs (simplified: text is folded
#: first). A question's CJK run is cut at them; single characters only where they are
#: almost never part of a content word (not 是, 在, 都, 和: 还是, 现在, 成都, 和弦).
_ZH_STOPWORDS = """
    我 你 他 她 它 的 了 吗 呢 吧 啊 呀 嘛 么 我们 你们 他们 她们 自己 这个 那个 这样 那样
    什么 为什么 怎么 怎么样 怎样 哪 哪里 哪儿 哪个 哪些 哪天 哪家 哪款 哪种 哪部 哪首 哪位
    几 几号 几点 几岁 几月 多少 多久 是不是 有没有 可以 应该 还是 但是 因为 所以 如果 就是
    现在 已经 比较 一下 一些 来着 之前 以前 上次 时候 那时候
    说过 你说 我说 说的 提到 提过 记得 告诉 推荐 建议
"""
ZH_STOPWORDS = frozenset(_ZH_STOPWORDS.split())


@cache
def _zh_stop() -> re.Pattern[str]:
    """The Chinese function words, longest first: what a question's CJK run is cut at."""
    return re.compile("|".join(sorted(ZH_STOPWORDS, key=len, reverse=True)))


#: About the hundred most frequent characters of written Chinese. A question looks them up
#: inside its bigrams only, never alone: alone, each reads a posting list nearly as long as
#: the store (query p50 1.8x at 100k Chinese memories) for almost no BM25 weight.
_ZH_COMMON = frozenset(
    "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后"
    "作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实"
)

#: Distinct terms a query looks up at most; the first ones are kept. A pasted page must not
#: become a query no engine accepts (OpenSearch refuses more than 1,024 clauses) or one that
#: scans every posting list of the store.
MAX_QUERY_TERMS = 256

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def _normalize_word(word: str, stem: bool = True) -> str:
    if not word.isascii():
        word = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
    if stem and len(word) > 3 and word.isalpha():
        return str(_stemmer.stemWord(word))
    return word


def _runs(text: str) -> Iterator[tuple[str, str]]:
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():
        for word in _ASCII_TOKEN.findall(text):
            yield "word", word
        return
    # Casefolding Turkish İ leaves i + a combining dot, which no word pattern joins: "İstanbul"
    # was "i" and "stanbul", and a search for "istanbul" found nothing.
    text = canonical_dates(fold(text.replace("i\u0307", "i")))
    for m in _token().finditer(text):
        yield ("word" if m.lastgroup == "date" else str(m.lastgroup)), m.group()


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_terms(text: str) -> list[str]:
    """Terms to index for ``text``: stemmed words, CJK bigrams and CJK unigrams."""
    out: list[str] = []
    for kind, run in _runs(text):
        if kind == "word":
            out.append(_normalize_word(run))
        else:
            out.extend(_bigrams(run))
            if len(run) > 1:
                out.extend(run)
    return out


@cache
def _longer_than(n: int) -> re.Pattern[str]:
    return re.compile(rf"[^\W_]{{{n + 1},}}")


def segment(text: str, max_word: int | None = None) -> str:
    """``text`` made ready for an engine's word tokenizer.

    CJK runs become bigrams and unigrams, accents are folded (not every engine does),
    and the words are joined by spaces. ASCII text is returned as it is, but for NUL, which
    ends a string in C engines (RediSearch indexed nothing after it): it becomes a space.
    With ``max_word``, longer words are cut to it (Lucene refuses a term over 32,766 bytes).
    """
    if max_word is not None:
        return _longer_than(max_word).sub(lambda m: m.group(0)[:max_word], segment(text))
    if text.isascii():
        return text.replace("\x00", " ") if "\x00" in text else text
    out: list[str] = []
    for kind, run in _runs(text):
        if kind == "word":
            out.append(_normalize_word(run, False))
        else:
            out.extend(_bigrams(run))
            if len(run) > 1:
                out.extend(run)
    return " ".join(out)


def query_terms(text: str, *, stem: bool = True) -> list[str]:
    """Distinct terms to look up for a question (at most ``MAX_QUERY_TERMS``, the first),
    function words dropped when possible.

    ``stem=False`` leaves stemming to an engine whose tokenizer stems (FTS5 ``porter``).
    """
    content: list[str] = []
    fallback: list[str] = []
    for kind, run in _runs(text):
        if kind == "word":
            term = _normalize_word(run, stem)
            (fallback if run in STOPWORDS or run in MEMORY_VERBS else content).append(term)
            continue
        parts = [p for p in _zh_stop().split(run) if p]
        if not parts:
            fallback.extend(_bigrams(run))
        for part in parts:
            content.extend(_bigrams(part))
            if len(part) > 1:
                content.extend(c for c in part if _is_han(c) and c not in _ZH_COMMON)
    terms = content or fallback
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
