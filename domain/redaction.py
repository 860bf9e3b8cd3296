r"""The one redaction rule: every form of a known secret in a text becomes ``[redacted]``, before any cut.

A provider's error body may echo the API key raw, ``\u``-escaped (JSON), ``%``-encoded (URLs), cut short, or
in the provider's own masked form (``sk-...abcd``, ``sk-proj-****abcd``). ``redact`` decodes those escapes
into a view of the text that remembers where each character came from, finds in it every run of at least
``MIN_PARTIAL`` characters that occurs in a secret (a prefix left by a cut, a tail, the whole key), and every
masked form, and replaces the original characters. Cut a text only after redacting it (``redact_then_cut``):
a cut first leaves a key's head unrecognised by a whole-key match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MIN_PARTIAL", "REDACTED", "redact", "redact_then_cut"]

REDACTED = "[redacted]"
MIN_PARTIAL = 8
"""A run of this many characters of a secret (or more) is redacted wherever it appears; a shorter secret only
whole. Eight characters of a random key are never there by chance; fewer may be a public prefix (``sk-``)."""

_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|%([0-9a-fA-F]{2})|\\x([0-9a-fA-F]{2})|\\(/)")
r"""JSON ``\uXXXX``, URL ``%XX``, ``\xXX`` and JSON's escaped slash ``\/``: each is one character."""

_MASK = re.compile(r"([A-Za-z0-9_\-]*)(\*+|\.{2,}|[\u2026\u2022]+)([A-Za-z0-9_\-]{2,})")
"""A masked key: some head characters, a run of mask characters, some tail characters."""

_MIN_MASKED = 4
"""A masked form is redacted when its head and tail show at least this many characters of a secret."""


def _decoded(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text with escapes decoded, and for each decoded character the span it occupies in ``text``."""
    chars: list[str] = []
    spans: list[tuple[int, int]] = []
    position = 0
    for match in _ESCAPE.finditer(text):
        for i in range(position, match.start()):
            chars.append(text[i])
            spans.append((i, i + 1))
        hex_code = match.group(1) or match.group(2) or match.group(3)
        chars.append(chr(int(hex_code, 16)) if hex_code else match.group(4))
        spans.append(match.span())
        position = match.end()
    for i in range(position, len(text)):
        chars.append(text[i])
        spans.append((i, i + 1))
    return "".join(chars), spans


def _partial_runs(decoded: str, secret: str) -> Iterable[tuple[int, int]]:
    """Decoded-index ranges of maximal runs that occur in ``secret`` (``MIN_PARTIAL`` long or more)."""
    shortest = min(MIN_PARTIAL, len(secret))
    grams = {secret[i : i + shortest] for i in range(len(secret) - shortest + 1)}
    i = 0
    while i <= len(decoded) - shortest:
        if decoded[i : i + shortest] not in grams:
            i += 1
            continue
        end = i + shortest
        while end < len(decoded) and decoded[i : end + 1] in secret:
            end += 1
        yield i, end
        i = end


def _masked_runs(decoded: str, secret: str) -> Iterable[tuple[int, int]]:
    """Decoded-index ranges of the secret's masked forms: a head of it, mask characters, a tail of it."""
    for match in _MASK.finditer(decoded):
        head, tail = match.group(1), match.group(3)
        while head and not secret.startswith(head):
            head = head[1:]  # the regex may have taken a word before the key's head
        if secret.endswith(tail) and len(head) + len(tail) >= _MIN_MASKED:
            yield match.end(1) - len(head), match.end()


def redact(text: str, secrets: Iterable[str]) -> str:
    """Return ``text`` with every form of every non-empty secret in ``secrets`` replaced by ``[redacted]``."""
    known = [secret for secret in secrets if secret]
    if not known or not text:
        return text
    decoded, spans = _decoded(text)
    hidden: list[tuple[int, int]] = []
    for secret in known:
        for start, end in (*_partial_runs(decoded, secret), *_masked_runs(decoded, secret)):
            hidden.append((spans[start][0], spans[end - 1][1]))
        # what looks like an escape may be a literal character before the key ('%' then '00...'):
        # the raw text is searched too, so decoding never hides a run of the key
        hidden.extend((*_partial_runs(text, secret), *_masked_runs(text, secret)))
    if not hidden:
        return text
    pieces: list[str] = []
    cursor = 0
    for first, last in sorted(hidden):
        if last <= cursor:
            continue
        if first >= cursor:
            pieces.extend((text[cursor:first], REDACTED))
        cursor = last
    pieces.append(text[cursor:])
    return "".join(pieces)


def redact_then_cut(text: str, secrets: Iterable[str], limit: int) -> str:
    """Redact ``text``, then keep its first ``limit`` characters (a marker cut in two hides nothing)."""
    return redact(text, secrets)[:limit]
