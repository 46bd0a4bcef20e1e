"""Language-aware text processing for full-text search, shared by every backend.

The seam: ``segment(text)`` rewrites a memory so that an engine's ordinary word
tokenizer indexes it well (CJK runs become space-separated bigrams and unigrams; other
text is left to the engine's stemmer); ``query_terms(text)`` turns a question into the
terms to look up. For engines without a stemmer, ``index_terms``/``query_terms(stem=True)``
do the stemming here, so the same text gives the same terms on every engine.

Why do it ourselves instead of the engines' analyzers:
- Chinese and Japanese have no spaces. Overlapping character bigrams (plus unigrams on
  the index side) make any two-character word findable inside a longer sentence, with
  no dictionary. Korean gets the same treatment, which copes with its particles.
- English is stemmed (Snowball here, or the engine's Porter stemmer), so "hiking" finds
  "hiked"; accents are folded.
- Questions are mostly function words ("what did I say about ..."). The query side drops
  stopwords and memory meta-verbs unless nothing else is left, so they cannot dominate.
- Every term is made of letters and digits only, so it can never carry query syntax
  into an engine, whatever the user typed.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import snowballstemmer

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
_TOKEN = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")

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
        return _stemmer.stemWord(word)
    return word


def _runs(text: str):
    text = unicodedata.normalize("NFKC", text).casefold()
    for m in _TOKEN.finditer(text):
        yield m.lastgroup, m.group()


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


def segment(text: str) -> str:
    """``text`` made ready for an engine's word tokenizer.

    CJK runs become bigrams and unigrams, accents are folded (not every engine does),
    and the words are joined by spaces. ASCII text is returned as it is, but for NUL, which
    ends a string in C engines (RediSearch indexed nothing after it): it becomes a space.
    """
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
        else:
            content.extend(_bigrams(run))
    terms = content or fallback
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
