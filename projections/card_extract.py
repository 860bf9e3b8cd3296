"""How the card keeps a long user message: its imperative and negative sentences, verbatim, in order."""

from __future__ import annotations

import bisect
import itertools
import re

from contextledger.projections.card_calls import clip as _clip

__all__ = ["SENTENCE_END", "extract", "folded", "instructions_of"]

SENTENCE_END = re.compile(r"\s(?:(?<=[.!?]\s)\s*|(?<=\n)\n*)")
"""Where a sentence ends: whitespace after ``.``, ``!`` or ``?``, or line breaks (``(?<=[.!?])\\s+|\\n+``).

Written to start with ``\\s`` so that ``re`` skips to the next whitespace instead of trying both branches at
every character; it matches the same spans (``tests/projections/test_card_fast_paths.py``).
"""
_SENTENCE_ENDS_KEPT = re.compile(f"({SENTENCE_END.pattern})")
"""``SENTENCE_END`` as a group: ``split`` also returns the ends between the sentences (their places)."""
_EXTRACT_CHARS = 50_000
"""How much of a long user message extraction reads."""

_ASCII_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})
"""The characters ``re``'s IGNORECASE matches to an ASCII letter that ``str.lower`` does not lower to it.

U+0130 (capital I with a dot) lowers to two characters (``i`` and a combining dot) but matches ``i``;
U+0131 (dotless i) and U+017F (long s) are ``re``'s extra cases of ``i`` and ``s``. Every other
character matching an ASCII letter (U+212A, the Kelvin sign) lowers to it (checked over every code
point in the tests).
"""


def folded(text: str) -> str:
    """Return ``text`` lower-cased so that a case-blind ASCII phrase ``re`` matches in it is a substring."""
    if text.isascii() or not ("\u0130" in text or "\u0131" in text or "\u017f" in text):
        return text.lower()  # nothing to map first (``translate`` with a table costs ~10x ``lower``)
    return text.translate(_ASCII_FOLD).lower()


_VERBS = (
    r"use|add|remove|keep|write|run|make|fix|do|put|leave|try|set|change|create|update|delete|"
    r"check|call|return|rename|move|test|implement|stop|start|skip|ignore|include|exclude"
)
_IMPERATIVE = re.compile(
    r"\b(?:do not|don't|never|must|mustn't|should|shouldn't|only|always|avoid|make sure|ensure|"
    r"please|no longer|stop|keep|prefer|instead|required?|without)\b"
    r"|^\s*(?:" + _VERBS + r")\b",
    re.IGNORECASE,
)
_IMPERATIVE_START = re.compile(r"\s*(?:" + _VERBS + r")\b", re.IGNORECASE)
"""``_IMPERATIVE``'s second branch: a sentence starting with a verb in the imperative."""
_IMPERATIVE_WORDS = (
    "do not", "don't", "never", "must", "should", "only", "always", "avoid", "make sure", "ensure",
    "please", "no longer", "stop", "keep", "prefer", "instead", "require", "without",
)  # fmt: skip
"""A part of every word of ``_IMPERATIVE``'s first branch, lower-cased."""


def _imperative(sentence: str, *, holds_word: bool | None = None) -> bool:
    """Whether ``_IMPERATIVE`` finds a match in ``sentence`` (a pre-check first; the answer is exact).

    A sentence whose folded form (``folded``) holds none of ``_IMPERATIVE_WORDS`` cannot match the
    first branch; the second is anchored at the start, so a match there is all that is left to try.
    ``holds_word`` is that pre-check's answer when the caller already knows it (``_imperatives``).
    """
    if holds_word is None:
        lowered = folded(sentence)
        holds_word = any(word in lowered for word in _IMPERATIVE_WORDS)
    if holds_word:
        return _IMPERATIVE.search(sentence) is not None
    return _IMPERATIVE_START.match(sentence) is not None


def _word_starts(lowered: str, words: tuple[str, ...]) -> list[int]:
    """Where every occurrence of every word starts in ``lowered``, sorted."""
    starts: list[int] = []
    for word in words:
        at = lowered.find(word)
        while at >= 0:
            starts.append(at)
            at = lowered.find(word, at + 1)
    starts.sort()
    return starts


def _imperatives(text: str) -> tuple[int, list[str]]:
    """Count the sentences of ``text[:_EXTRACT_CHARS]`` (blank ones aside); return it and the imperative ones.

    The sentences are ``SENTENCE_END.split``'s, and a sentence is imperative by ``_imperative``. Its
    pre-check runs once over the whole folded text instead of once per sentence: ``folded`` keeps every
    character in its place (only U+0130 lowers to two characters, and it is mapped first), and no word
    of ``_IMPERATIVE_WORDS`` holds a sentence end, so a sentence's folded form holds a word exactly when
    an occurrence found in the whole folded text starts inside the sentence.
    """
    head = text[:_EXTRACT_CHARS]
    parts = _SENTENCE_ENDS_KEPT.split(head)  # sentence, end, sentence, ..., sentence
    places = list(itertools.accumulate(map(len, parts), initial=0))[0::2]
    with_word = {bisect.bisect_right(places, at) - 1 for at in _word_starts(folded(head), _IMPERATIVE_WORDS)}
    sentences = [(i, s) for i, s in enumerate(parts[0::2]) if s.strip()]
    return len(sentences), [s for i, s in sentences if _imperative(s, holds_word=i in with_word)]


def instructions_of(text: str) -> list[str]:
    """Return the imperative and negative sentences of a user message, in order (``extract``'s rule).

    The sentences are clipped as the card shows them; an extraction's closing count is not one.
    """
    return [_clip(s) for s in _imperatives(text)[1] if not _LEFT_OUT.fullmatch(s.strip())]


_LEFT_OUT = re.compile(r"\[\d+ (?:other sentences left out|sentences; extract: none imperative)\]")


def extract(text: str) -> str:
    """Keep the imperative and negative sentences of a long user message verbatim, in order.

    A sentence is kept when it says ``do not``, ``never``, ``must``, ``only``, ``always``,
    ``avoid``... or starts with a verb in the imperative (``use``, ``add``, ``keep``...). The
    result ends with a count of the sentences left out; with none kept, the first 300 characters.
    """
    count, sentences = _imperatives(text)
    kept = [_clip(s) for s in sentences]
    if not kept:
        return _clip(text) + f" [{count} sentences; extract: none imperative]"
    return " ".join(kept) + f" [{count - len(kept)} other sentences left out]"
