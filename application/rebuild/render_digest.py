"""What a version's comparison needs of each session's render, written beside its row as the build folds.

Comparing a candidate version with the live one used to read every row of both back, decode it
(reading the session's events again) and render it: after a rebuild that was a second decode of
the whole log plus two renders per session. The context view renders each session it writes from
the state it already holds and stores a small digest (tokens, evictions by rule, a hash of the
messages) under ``digests_of(version)`` in the same transaction as the row, so a comparison reads
digests only. A session whose digest is missing (a version written before digests existed) is
rendered from its row as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import msgspec
from contextledger.domain.content import Text
from contextledger.projections.fold import Projector
from contextledger.projections.render import eviction_counts
from contextledger.projections.state import RenderState

__all__ = [
    "EVICTING",
    "RenderDigest",
    "decode_digest",
    "digests_of",
    "encode_digest",
    "state_digest",
]

EVICTING = frozenset({"stubbed", "truncated", "summarized", "dropped"})
"""Decision actions that take an event out of the context verbatim (counted per rule)."""

_SUFFIX = "#renders"


def digests_of(version: str) -> str:
    """The name of a version's digest rows (committed with its rows, without a checkpoint of their own)."""
    return version + _SUFFIX


class RenderDigest(msgspec.Struct, frozen=True, array_like=True):
    """One session's render under a version: tokens, events evicted per rule, a hash of its messages.

    ``failed`` holds why the session could not be rendered (then the rest is empty).
    """

    tokens: int = 0
    evictions: dict[str, int] = msgspec.field(default_factory=dict)
    messages: bytes = b""
    failed: str = ""


def state_digest(projector: Projector, state: RenderState, resolve: Callable[[Text], str]) -> RenderDigest:
    """The digest of ``projector.render(state, resolve)``: its tokens, evictions by rule, messages hashed.

    The evictions are those of the render's decisions with an ``EVICTING`` action (``last - first + 1``
    per rule, by first eviction), counted from the state's ranges (``eviction_counts``): the decisions'
    details, about half of a render, are never written for a digest.

    Raises:
        PinnedOverBudgetError: as ``render`` does.
    """
    context = projector.render(state, resolve, with_decisions=False)
    encoded = _ENCODER.encode(context.messages)
    return RenderDigest(
        context.tokens, eviction_counts(state, EVICTING), hashlib.blake2b(encoded, digest_size=16).digest()
    )


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(RenderDigest)


def encode_digest(digest: RenderDigest) -> bytes:
    """A digest as row bytes."""
    return _ENCODER.encode(digest)


def decode_digest(data: bytes) -> RenderDigest | None:
    """A digest from row bytes; None when unreadable (derived: the session is rendered again instead)."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError:
        return None
