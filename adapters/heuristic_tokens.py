"""A tokenizer-free token estimate: byte classes and runs counted in C, weighed, plus a safety margin."""

from __future__ import annotations

import math
from collections.abc import Sequence

from contextledger.domain.errors import TokenizerError

__all__ = ["DEFAULT_MARGIN", "HeuristicCounter"]

DEFAULT_MARGIN = 0.25
"""The margin ``get_counter("heuristic")`` adds to the estimate by default (25 %)."""


def _table(classes: dict[bytes, str], default: str) -> bytes:
    """A ``bytes.translate`` table mapping each byte in a key to that key's class letter."""
    table = bytearray(default.encode() * 256)
    for members, letter in classes.items():
        for byte in members:
            table[byte] = ord(letter)
    return bytes(table)


_LOWER = bytes(range(ord("a"), ord("z") + 1))
_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_DIGIT = b"0123456789"
_CLASSES = _table(
    {_LOWER: "l", _UPPER: "U", _DIGIT: "D", b" \t": "S", b"\r\n": "N", bytes(range(128, 256)): "X"}, "P"
)
_LETTER_RUNS = _table({_LOWER + _UPPER: "L"}, "o")
_DIGIT_RUNS = _table({_DIGIT: "L"}, "o")
_HEURISTIC_CHUNK = 1 << 20
"""Characters classified per pass (bounds the transient bytes to a few MB for any text)."""

# Tokens per feature, fitted (a linear program) so that with the default 25% margin the estimate is at
# or above cl100k on every text of the real transcripts in tests/fixtures, on 2,978 held-out files of
# Python packages (code, docs, JSON), and on scripts, emoji, JSON, CSV, logs, base64, hex and runs of
# one character. Observed before the margin: 1.10x cl100k over the transcripts' texts in total.
_PER_LETTER_RUN = 0.77
_PER_LETTER_PAST_4 = 0.44  # letters beyond the 4th of each run, in total: long or random words
_PER_DIGIT_GROUP = 1.27  # applied to digits / 3 + 2 / 3 per digit run (an upper bound of 3-digit groups)
_PER_SPACE = 0.05
_PER_NEWLINE = 1.21
_PER_PUNCTUATION = 0.61  # ASCII punctuation and control characters
_PER_NON_ASCII_BYTE = 0.64
_PER_UPPER = 0.45
_PER_TEXT = 0.94


def _runs(marks: bytes, continued: bool) -> int:
    """Runs of ``L`` in ``marks``; a run continued from the previous slice is not counted again."""
    return marks.count(b"oL") + (marks[:1] == b"L" and not continued)


class HeuristicCounter:
    """A tokenizer-free estimate with a safety margin, for models without a local tokenizer.

    Plain len/4 undercounts JSON by about 35% and CJK by about 75%. This estimate classifies the UTF-8
    bytes (lowercase, uppercase, digit, space, newline, punctuation, non-ASCII) and counts letter and
    digit runs with a few C-speed passes (``bytes.translate`` and ``bytes.count``, no regex, no Python
    loop per character), weighs them with fitted per-feature token costs, then adds ``margin``. About
    10x faster than the piece-by-piece regex estimate it replaces and than tiktoken, in bounded memory.
    """

    def __init__(self, margin: float = DEFAULT_MARGIN) -> None:
        """Configure the safety margin (0.4 adds 40%)."""
        if margin < 0:
            msg = "margin must be non-negative"
            raise TokenizerError(msg)
        self.margin = margin

    @property
    def name(self) -> str:
        """Identifies the estimate and its margin, so caches never mix counts of different settings."""
        return f"heuristic-v2+{round(self.margin * 100)}%"

    def count(self, text: str) -> int:
        """Return the estimated number of tokens of ``text``."""
        if not text:
            return 0
        return math.ceil(_estimate(text) * (1 + self.margin))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return the estimates of several texts."""
        return [self.count(t) for t in texts]


def _estimate(text: str) -> float:
    letters = upper = digits = spaces = newlines = punctuation = non_ascii = 0
    letter_runs = digit_runs = 0
    in_letters = in_digits = False
    for start in range(0, len(text), _HEURISTIC_CHUNK):
        part = text if len(text) <= _HEURISTIC_CHUNK else text[start : start + _HEURISTIC_CHUNK]
        data = part.encode("utf-8", "surrogatepass")
        classes = data.translate(_CLASSES)
        lower, caps = classes.count(b"l"), classes.count(b"U")
        numerals, blanks, breaks = classes.count(b"D"), classes.count(b"S"), classes.count(b"N")
        wide = 0 if part.isascii() else classes.count(b"X")
        letters += lower + caps
        upper += caps
        digits += numerals
        spaces += blanks
        newlines += breaks
        non_ascii += wide
        punctuation += len(data) - lower - caps - numerals - blanks - breaks - wide
        if lower or caps:
            marks = data.translate(_LETTER_RUNS)
            letter_runs += _runs(marks, in_letters)
            in_letters = marks.endswith(b"L")
        else:
            in_letters = False
        if numerals:
            marks = data.translate(_DIGIT_RUNS)
            digit_runs += _runs(marks, in_digits)
            in_digits = marks.endswith(b"L")
        else:
            in_digits = False
    return (
        _PER_LETTER_RUN * letter_runs
        + _PER_LETTER_PAST_4 * max(0, letters - 4 * letter_runs)
        + _PER_DIGIT_GROUP * (digits / 3 + 2 * digit_runs / 3)
        + _PER_SPACE * spaces
        + _PER_NEWLINE * newlines
        + _PER_PUNCTUATION * punctuation
        + _PER_NON_ASCII_BYTE * non_ascii
        + _PER_UPPER * upper
        + _PER_TEXT
    )
