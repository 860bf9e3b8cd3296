"""What a version's comparison needs of each session's render, written beside its row as the build folds.

Comparing a candidate version with the live one used to read every row of both back, decode it
(reading the session's events again) and render it: after a rebuild that was a second decode of
the whole log plus two renders per session. The context view renders each session it writes from
the state it already holds and stores a small digest (tokens, evictions by rule, a hash of the
messages) under ``digests_of(version)`` in the same transaction as the row, so a comparison reads
digests only. A session whose digest is missing or of another ``DIGEST_FORMAT`` (a version written
before digests existed, or before this format) is rendered from its row.

In the hashed messages a text stored as a blob stands in by its content address (``by_address``):
the address is the SHA-256 of the text, so two renders hash alike exactly when they show the same
texts, and no blob is read (or hashed whole) to digest a session. A message showing its event's
inline text as the log keeps it stands in by that event's position (the render's ``stand_in``): an
entry's inline content is always its event's own (the row codec leaves it out for that reason), so
within a session the position names the text, and the render's largest texts are neither encoded nor
hashed. A session whose render shows the log as it is (nothing left out, summarized, cut or added: most
sessions) is not rendered at all: within its session, the number of logged messages it shows names it
(``messages_as_logged``, ADR 0069 and 0070).
"""

from __future__ import annotations

import hashlib

import msgspec
from contextledger.domain.content import InlineText, Text
from contextledger.projections.decisions import eviction_counts
from contextledger.projections.fold import Projector
from contextledger.projections.render import check_fits, messages_as_logged
from contextledger.projections.state import RenderState

__all__ = [
    "DIGEST_FORMAT",
    "EVICTING",
    "RenderDigest",
    "by_address",
    "decode_digest",
    "digest_of_messages",
    "digests_of",
    "encode_digest",
    "failed_digest",
    "state_digest",
]

EVICTING = frozenset({"stubbed", "truncated", "summarized", "dropped"})
"""Decision actions that take an event out of the context verbatim (counted per rule)."""

_SUFFIX = "#renders"

DIGEST_FORMAT = 6
"""What a digest's ``messages`` hash: 1, the rendered texts; 2, blob texts stood for by their addresses;
3, as 2, and texts shown as logged stood for by their positions, hashed with SHA-256 (its first 16
bytes) instead of BLAKE2b (``digest_of_messages``); 4, as 3, and a render that shows the log as it is
named by each message's sources, tokens, tool call id and blob address; 5, as 3, and a render that shows the
log as it is named by the number of logged messages it shows and the tokenizer (``messages_as_logged``);
6, as 5 without the tokenizer (a render that shows the log as it is sends the same messages under every
tokenizer), and evictions that count each logged position once (``eviction_counts``)."""

_BLOB = "\x00blob:"
"""Starts a blob's stand-in in a digest's messages (a NUL: no text the log keeps is written this way)."""
_AT = "\x00at:"
"""Starts the stand-in of a text shown as its event logged it, followed by the event's position."""
_AS_LOGGED = b"\x00as logged"
"""Heads the hashed key of a render shown as logged (a render's messages hash as an array of messages)."""


def digests_of(version: str) -> str:
    """The name of a version's digest rows (committed with its rows, without a checkpoint of their own)."""
    return version + _SUFFIX


class RenderDigest(msgspec.Struct, frozen=True, array_like=True):
    """One session's render under a version: tokens, events evicted per rule, a hash of its messages.

    ``failed`` holds why the session could not be rendered (then the rest is empty). ``format`` is the
    ``DIGEST_FORMAT`` it was made under (rows written before the field read as 1).
    """

    tokens: int = 0
    evictions: dict[str, int] = msgspec.field(default_factory=dict)
    messages: bytes = b""
    failed: str = ""
    format: int = 1


def failed_digest(reason: str) -> RenderDigest:
    """The digest of a session that could not be rendered, and why (this format: not rendered again)."""
    return RenderDigest(failed=reason, format=DIGEST_FORMAT)


def by_address(text: Text) -> str:
    """The text a digest hashes for a logged text: an inline one itself, a blob its content address."""
    return text.text if isinstance(text, InlineText) else _BLOB + text.sha256


def state_digest(projector: Projector, state: RenderState) -> RenderDigest:
    """The digest of ``projector.render(state, by_address)``: its tokens, evictions by rule, messages hashed.

    The evictions are the logged positions the render takes out with an ``EVICTING`` action, each counted
    once under its rule (``eviction_counts``, from the state's ranges and entries): the decisions' details,
    about half of a render, are never written for a digest.

    A state shown as logged (nothing left out, summarized, cut or added: most sessions of a rebuild) is
    not rendered: it shows the session's first ``messages_as_logged`` message events whole, so two such
    renders of a session show the same messages exactly when they show as many, under any tokenizer, and
    never hash like a render that changed one. (A render that changed one hashes its messages with their
    token counts: the same texts counted by another tokenizer hash apart.)

    Raises:
        PinnedOverBudgetError: as ``render`` does.
    """
    shown = messages_as_logged(state)
    if shown is not None:
        check_fits(state, projector.budget)
        named = digest_of_messages(_ENCODER.encode((_AS_LOGGED, shown)))
        return RenderDigest(state.total, {}, named, format=DIGEST_FORMAT)
    context = projector.render(state, by_address, with_decisions=False, stand_in=_at)
    messages = digest_of_messages(_ENCODER.encode(context.messages))
    return RenderDigest(context.tokens, eviction_counts(state, EVICTING), messages, format=DIGEST_FORMAT)


def _at(position: int) -> str:
    """The stand-in of the text an event logged, shown as logged: injective (no logged text holds a NUL).

    So two renders of a session hash alike exactly when they show the same texts.
    """
    return f"{_AT}{position}"


def digest_of_messages(encoded: bytes) -> bytes:
    """The hash a digest keeps of a render's messages (msgpack): the first 16 bytes of their SHA-256.

    SHA-256 runs on the CPU's SHA instructions where it has them (x86 since 2017, ARMv8): twice
    BLAKE2b's pace on the machines measured (ADR 0062). What is hashed is what the stand-ins leave:
    cut forms, stubs, summaries, the card, the system prompt, tool calls.
    """
    return hashlib.sha256(encoded).digest()[:16]


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(RenderDigest)


def encode_digest(digest: RenderDigest) -> bytes:
    """A digest as row bytes."""
    return _ENCODER.encode(digest)


def decode_digest(data: bytes) -> RenderDigest | None:
    """A digest from row bytes; None when unreadable or of another format (the session is rendered again)."""
    try:
        digest = _DECODER.decode(data)
    except msgspec.DecodeError:
        return None
    return digest if digest.format == DIGEST_FORMAT else None
