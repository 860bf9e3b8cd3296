"""What ``why`` answers: a fact's fate call by call, the verdict, and the reducer each rule belongs to."""

from __future__ import annotations

import msgspec

__all__ = ["CallFate", "WhyAnswer", "reducer_of"]

_REDUCERS = (
    ("retention", "tool-result retention"),
    ("truncation", "truncation"),
    ("summary", "summary"),
    ("window", "sliding window"),
    ("low-water", "guarantee (compaction down to the low-water mark)"),
    ("guarantee", "guarantee (hard budget)"),
)


def reducer_of(rule: str) -> str:
    """The reducer a disposition's rule belongs to, by name (the rule itself when none matches)."""
    for prefix, name in _REDUCERS:
        if rule.startswith(prefix):
            return name
    return rule


class CallFate(msgspec.Struct, frozen=True, kw_only=True):
    """The fact's fate in one model call.

    ``shown`` says how the text shows in the payload (``verbatim``, ``truncated`` — in the kept
    head —, ``stub``, ``summary``, ``injected``, ``system``, ``pinned``, joined by ``+``), None when
    no message of the call holds it. ``disposition`` and ``rule`` are the fate, at this call, of the
    event the text is followed through (``event``); ``summary_id`` is the summary applied at the call.
    """

    call_id: str
    position: int
    disposition: str
    rule: str
    summary_id: str | None = None
    shown: str | None = None
    event: int | None = None
    shown_from: tuple[int, ...] = ()
    """The carrying events whose rendered message (or the summary covering them) shows the text."""


class WhyAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """Why a fact is (or is not) in the context, call by call, with a verdict and the smallest fix."""

    session_id: str
    query: str
    verdict: str
    entered_at: int | None
    entered_kind: str | None = None
    snippet: str | None = None
    calls_source: str = "recorded"
    """``recorded`` audit records (re-rendered to search their text), or ``computed``: the calls the
    policy would have made."""
    calls: tuple[CallFate, ...] = ()
    first_left_call: str | None = None
    first_left_position: int | None = None
    disposition: str | None = None
    rule: str | None = None
    reducer: str | None = None
    policy: str | None = None
    summary_id: str | None = None
    """The summary applied at the first-left call (None: none was)."""
    summary_contains: str | None = None
    """Whether that summary holds the text: ``exact``, ``normalized`` (same words, other case or spacing)
    or ``no``."""
    smallest_change: str | None = None
    carried_by: tuple[int, ...] = ()
    """Every log position whose event holds the text."""
    left_event: int | None = None
    """The carrying event the text was last shown from before it left."""
    later_summary_id: str | None = None
    """A summary produced after the text left that holds it (None: none does)."""
    later_summary_call: str | None = None
    """The first call that applied ``later_summary_id`` (None: no call has applied it yet)."""
    later_summary_position: int | None = None
    back_at_call: str | None = None
    """The first call after it left whose payload holds the text again, in any form."""
    calls_differ: int = 0
    """Recorded calls whose re-render no longer hashes as recorded (searched as re-rendered all the same)."""
