"""Synthetic conversational data for the cost benchmarks: deterministic, any size.

Texts are 8-30 words drawn from a Zipf-distributed vocabulary (a few very common words,
a long tail), spread over users and sessions like a chat log. Retrieval *quality* is
measured on LoCoMo (bench/locomo.py); these only need realistic term statistics.

``chat_texts``/``questions``/``long_inputs`` (bench/million.py) are English-like instead:
function words in every message, common chat words at realistic frequencies, so questions
in natural English ("what did I say about work today") cost what they cost in use.
"""

from __future__ import annotations

from functools import cache

import numpy as np

VOCAB_SIZE = 20_000


def _vocab(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = set()
    while len(words) < VOCAB_SIZE:
        n = int(rng.integers(3, 10))
        words.add("".join(rng.choice(letters, n)))
    return sorted(words)


def texts(n: int, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng)
    ranks = np.minimum(rng.zipf(1.2, size=n * 30), VOCAB_SIZE) - 1
    lengths = rng.integers(8, 31, size=n)
    out, pos = [], 0
    for length in lengths:
        out.append(" ".join(vocab[r] for r in ranks[pos : pos + length]))
        pos += length
    return out


def queries(n: int, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = _vocab(np.random.default_rng(7))
    picks = rng.integers(50, 5000, size=(n, 3))  # mid-frequency words, like real questions
    return [" ".join(vocab[i] for i in row) for row in picks]


def sessions(n_events: int, users: int = 100, per_session: int = 100, app: str = "bench"):
    """Yield session dicts with ``per_session`` user events each, round-robin over users."""
    all_texts = texts(n_events)
    for s, start in enumerate(range(0, n_events, per_session)):
        user = f"user-{s % users}"
        chunk = all_texts[start : start + per_session]
        yield {
            "id": f"s{s}",
            "app_name": app,
            "user_id": user,
            "events": [
                {
                    "id": f"s{s}-e{i}",
                    "author": "user",
                    "timestamp": 1_700_000_000 + start + i,
                    "content": {"role": "user", "parts": [{"text": t}]},
                }
                for i, t in enumerate(chunk)
            ],
        }


# -- English-like chat: realistic term statistics for questions in natural English -----------

#: English function words (and chat's contractions and fillers) with their rough relative
#: frequency in spoken English, per 10,000 words; about half of a chat message's words.
_FUNCTION = """
    I:420 the:300 to:260 and:240 a:200 my:150 it:140 of:120 that:120 in:110 is:110 you:100
    for:85 was:80 me:70 so:60 we:60 on:60 with:60 but:55 have:55 I'm:50 be:45 at:45 this:45
    just:45 not:40 about:40 what:40 do:40 it's:40 are:35 he:35 she:35 they:30 her:30 don't:30
    can:30 really:30 if:25 or:25 had:25 will:25 when:25 like:25 all:20 from:20 an:20 there:20
    would:20 up:20 did:20 his:20 out:18 him:18 how:15 then:15 been:15 one:15 some:12 our:12
    them:12 because:12 yeah:12 ok:10 oh:10 well:10 that's:15 I've:15 didn't:15 can't:10
    I'll:10 we're:8 also:10 too:10 very:10 now:12 here:8 where:8 who:8 which:6 why:6 any:6
    more:10 than:8 into:6 over:6 after:8 before:8 again:6 still:8 even:6 much:8 am:6 by:8
    no:10 yes:6 were:10 has:10 could:10 should:8 maybe:8 actually:8 pretty:6 its:4 their:6
    these:4 those:4 other:6 being:4 something:8 anything:4 nothing:4 everything:4 always:4
"""

#: Content words of personal chat, most frequent first: the head of the content vocabulary
#: (a Zipf-Mandelbrot tail of made-up words follows). Where a word sits sets how many
#: messages hold it: "work" about 1%, "sister" and "dinner" about 0.3%.
_CONTENT_HEAD = """
    know get think want go time good going day got need see people make feel back today
    lot thing right way new work love home week things little last night friend tomorrow
    sure great morning better job help try take come look mom family bad long first kids
    house year dad life school money eat weekend call talk sleep tired happy friends car
    food lunch coffee wife husband place start old next years stuff bit kind nice fun
    dinner sister brother live trip doctor boss office meeting phone birthday party game
    watch movie book read play music dog walk run gym hard busy late early days hours plan
    idea problem buy pay city move travel vacation summer winter weather rain cold sick
    class study college daughter son baby boyfriend girlfriend parents team company email
    message picture cook chicken pizza wine tea breakfast restaurant shopping clothes room
    bed stress worried excited sad fun cool weird funny favorite hope wish forgot worry
    decide change finish finally probably guy girl man woman person name christmas holiday
    wedding monday friday saturday sunday tonight yesterday hour month months ago soon
    sometimes never often usually together alone away around yoga running hiking bike
    guitar piano painting writing spanish learning computer laptop app show episode news
    church bus train traffic drive parking bank bills budget rent apartment insurance
    dentist medicine pain headache diet weight vegetables fruit grandma cousin neighbor
    interview salary project boss's garden kitchen laundry cleaning anxiety angry hotel
    beach flight exam teacher hospital appointment health photo recipe beer shoes town
"""

_CONTENT_TYPES = 100_000
_ONSETS = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z"]
_ONSETS += ["br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "s", "t", "m", "nd", "st", "x"]


@cache
def _chat_vocab() -> tuple[list[str], np.ndarray, np.ndarray]:
    """(words: the function words, then the content words by rank; the function words'
    probabilities; the content words' probabilities)."""
    pairs = [p.rsplit(":", 1) for p in _FUNCTION.split()]
    function = [w for w, _ in pairs]
    f_weights = np.array([float(c) for _, c in pairs])
    head = list(dict.fromkeys(_CONTENT_HEAD.split()))
    taken = set(head) | {w.lower() for w in function}
    rng = np.random.default_rng(23)
    tail: list[str] = []
    while len(head) + len(tail) < _CONTENT_TYPES:  # pronounceable made-up words: 2-3 syllables
        on, vo = rng.integers(0, len(_ONSETS), (50_000, 3)), rng.integers(0, len(_VOWELS), (50_000, 3))
        three, coda = rng.random(50_000) < 0.5, rng.integers(0, len(_CODAS), 50_000)
        for o, v, t, c in zip(on.tolist(), vo.tolist(), three.tolist(), coda.tolist(), strict=True):
            w = "".join(_ONSETS[o[i]] + _VOWELS[v[i]] for i in range(3 if t else 2)) + _CODAS[c]
            if w not in taken and len(head) + len(tail) < _CONTENT_TYPES:
                taken.add(w)
                tail.append(w)
    # Zipf-Mandelbrot over the content words: know in ~5% of messages, work ~1%, sister ~0.5%,
    # rank 5,000 in ~0.02%, rank 50,000 in ~0.003% (30 messages of a million).
    c_weights = (np.arange(1, _CONTENT_TYPES + 1) + 2.7) ** -0.8
    return function + head + tail, f_weights / f_weights.sum(), c_weights / c_weights.sum()


def content_words() -> list[str]:
    """The content vocabulary, most frequent first (index 0 is the most frequent)."""
    words, f_p, _ = _chat_vocab()
    return words[len(f_p) :]


def chat_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` English-like chat messages: lengths log-normal (median 12 words, a long tail to
    150), 55% function words, the rest from the Zipf content vocabulary. The vocabulary and
    its frequencies are the same for every seed, so a store's chunks can be made apart."""
    words, f_p, c_p = _chat_vocab()
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.rint(rng.lognormal(np.log(12), 0.75, size=n)), 2, 150).astype(np.int64)
    total = int(lengths.sum())
    is_function = rng.random(total) < 0.55
    idx = np.empty(total, dtype=np.int64)
    idx[is_function] = rng.choice(len(f_p), size=int(is_function.sum()), p=f_p)
    idx[~is_function] = len(f_p) + rng.choice(len(c_p), size=total - int(is_function.sum()), p=c_p)
    tokens = np.array(words, dtype=object)[idx].tolist()
    ends = rng.choice(np.array([".", ".", ".", "?", "!", ""], dtype=object), size=n).tolist()
    out, pos = [], 0
    for length, end in zip(lengths.tolist(), ends, strict=True):
        text = " ".join(tokens[pos : pos + length])
        pos += length
        out.append(text[:1].upper() + text[1:] + end)
    return out


#: The issue's own questions, then templates. Frequent: content words among the ~130 most
#: frequent ("work" ~1% of messages, "know" ~5%); mid: ranks 300-5,000; rare: 30,000 and past.
_FREQUENT_FIXED = [
    "what did I say about work today",
    "what do you remember about my sister",
    "did I tell you where I live",
]
_FREQUENT = [
    "what did I say about {a} today",
    "what do you remember about my {a}",
    "what did I tell you about my {a}",
    "do you know what I think about {a}",
    "how do I feel about my {a}",
    "what did I say about {a} and {b}",
    "did I mention my {a} yesterday",
    "what do I need to get for {a}",
    "do you remember what I said about {a} at {b}",
    "what's going on with my {a}",
    "what did we talk about last week",
    "what was the thing I wanted to do this weekend",
    "what time do I usually go to the {a}",
]
_FREQUENT_SLOTS = """
    work home job mom dad family kids house school money weekend friend friends car food lunch
    coffee wife husband dinner sister brother trip doctor boss office meeting phone birthday party
    movie book music dog gym plan idea problem life
"""
_OTHER = [
    "what did I say about {a}",
    "do you remember {a}",
    "who is {a}",
    "where did I put the {a}",
    "have I mentioned {a} before",
    "what did I say about {a} and {b}",
    "tell me about my {a}",
]


def questions(n: int, seed: int = 11) -> dict[str, list[str]]:
    """``n`` questions of each class in natural English, over ``chat_texts``' vocabulary:
    "frequent" (the issue's three first), "mid" and "rare" (see above)."""
    rng = np.random.default_rng(seed)
    words = content_words()
    frequent = _FREQUENT_SLOTS.split()
    out: dict[str, list[str]] = {"frequent": _FREQUENT_FIXED[:n]}
    while len(out["frequent"]) < n:
        a, b = rng.choice(frequent, 2, replace=False)
        out["frequent"].append(str(rng.choice(_FREQUENT)).format(a=a, b=b))
    for name, low, high in (("mid", 300, 5_000), ("rare", 30_000, len(words))):
        picks = rng.integers(low, high, size=(n, 2)).tolist()
        out[name] = [str(rng.choice(_OTHER)).format(a=words[i], b=words[j]) for i, j in picks]
    return out


def long_inputs() -> dict[str, str]:
    """Inputs a user pastes: 100 KB and 16 KB of chat, and 1,000 distinct words of it."""

    def paste(size: int, seed: int) -> str:
        return " ".join(chat_texts(size // 40, seed=seed))[:size].rsplit(" ", 1)[0]

    distinct = dict.fromkeys(w.strip(".?!").lower() for w in " ".join(chat_texts(3_000, seed=5)).split())
    return {
        "100 KB paste": paste(100_000, 3),
        "1,000 distinct words": " ".join(list(distinct)[:1000]),
        "16 KB paste": paste(16_000, 4),
    }
