"""What ``why`` answers: a fact's fate call by call, the verdict, and the reducer each rule belongs to."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from contextledger.domain.events import (
    AssistantMessageAdded,
    ItemPinned,
    Recorded,
    ToolResultRecorded,
    UserMessageAdded,
)

__all__ = ["TURN_ENDED", "CallFate", "WhyAnswer", "reducer_of", "smallest_change"]

TURN_ENDED = "turn-ended (signed reasoning goes back only within its own tool-use turn)"
"""The rule of a text in signed reasoning that a call no longer sends: a new user message ended its turn."""
_NOT_SENT = {
    False: "nothing in the policy: this part of the event (reasoning, say) is never sent to the model",
    True: "nothing in the policy: a wire sends signed reasoning back only within its own tool-use turn",
}
"""The smallest change for a text a call does not send, by whether its turn ended (``TURN_ENDED``)."""

_REDUCERS = (
    ("retention", "tool-result retention"),
    ("truncation", "truncation"),
    ("cap", "per-message cap (a message alone above its share of the budget)"),
    ("truncated", "truncation or the per-message cap"),
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
    driver: str | None = None
    """What made a recorded call (``AgentContext``, a framework adapter, ``cli``; None: not recorded)."""
    budget: int | None = None
    """The prompt budget the call was rendered under."""
    policy: str | None = None
    """The name of the policy the call was rendered under."""
    cut_by: tuple[str, ...] = ()
    """The truncation limits that policy sets (``max_lines``, ``max_tokens``)."""


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
    caveat: str | None = None
    """What the calls could not account for: computed calls under a policy with summaries, in a session
    with none stored, show no summary (``report`` and ``simulate`` run a summarizer as they go)."""
    first_left_call: str | None = None
    first_left_position: int | None = None
    disposition: str | None = None
    rule: str | None = None
    reducer: str | None = None
    policy: str | None = None
    """The policy of the call the text first left in (the latest call's while it has not left)."""
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


@dataclass(frozen=True)
class _Wording:
    """Where a user sets what ``why`` suggests: a policy file and the CLI, or ``Policy`` and the API.

    ``driver`` is what made the recorded call (``AgentContext``, a framework adapter): such a session
    has no command line, so its fixes name the ``Policy`` field, the driver's argument and ``Ledger.pin``.
    """

    session_id: str
    position: int
    driver: str | None

    def pin(self) -> str:
        if self.driver is None:
            return f"or pin it: contextledger pin {self.session_id} {self.position}"
        return f"or pin it: ledger.pin({self.session_id!r}, {self.position})"

    def setting(self, table: str, key: str, value: object) -> str:
        if self.driver is None:
            return f"[{table}] {key} = {value}"
        head, _, tool = table.partition(".tools.")
        field = f'{head}.tools["{tool}"]' if tool else table
        return f"{field}.{key} = {value} in the Policy given to {self.driver}(policy=...)"

    def truncation(self, cut_by: tuple[str, ...]) -> str:
        limits = " and ".join(cut_by or ("max_lines", "max_tokens"))
        if self.driver is None:
            return f"[truncation] {limits} above this output's size (it was cut)"
        given = f"in the Policy given to {self.driver}(policy=...)"
        return f"truncation.{limits} above this output's size {given}".replace(
            " and max", " and truncation.max"
        )

    def cap(self) -> str:
        if self.driver is None:
            return "raise [budget] message_cap or total (it was cut to its share of the budget)"
        given = f"in the Policy given to {self.driver}(policy=...)"
        return f"budget.message_cap or the budget above this message's size {given} (it was cut to its share)"

    def budget(self, tokens: int | None) -> str:
        was = f" above {tokens:,} tokens" if tokens else ""
        if self.driver is None:  # --budget sets the prompt's limit itself; [budget] total only without it
            where = "--budget, or [budget] total without one"
            return f"raise the prompt budget{was} ({where}; it was dropped to fit)"
        return f"raise the budget given to {self.driver}(budget=...){was} (it was dropped to fit)"


def smallest_change(
    later: list[Recorded], session_id: str, position: int, tool_name: str | None, left: CallFate
) -> str:
    """The least config change (or action) that would have kept the event at ``position`` at that call.

    ``later`` are the session's events after it up to the call; ``left`` is the call's fate of it.
    Named where the user sets it (``_Wording``): for calls an agent loop recorded, its ``Policy``
    and arguments; otherwise a policy file's keys and the ``contextledger`` commands.
    """
    words = _Wording(session_id, position, left.driver if left.driver != "cli" else None)
    if left.disposition == "not-sent":
        return _NOT_SENT[left.rule == TURN_ENDED]
    if left.disposition == "summarized":
        return f"keep it out of summaries (a policy whose window keeps it), {words.pin()}"
    if left.rule.startswith("truncation"):
        return f"{words.truncation(left.cut_by)}, {words.pin()}"
    if left.rule == "cap" or (left.disposition == "truncated" and left.rule == "truncated"):
        return f"{words.cap()}, {words.pin()}"
    if left.rule.startswith("retention"):
        return f"{words.setting(*_retention_setting(tool_name, left.rule, later))} {words.pin()}"
    pinned = any(isinstance(r.event, ItemPinned) and r.event.position == position for r in later)
    return words.budget(left.budget) + ("" if pinned else f", {words.pin()}")


def _retention_setting(tool_name: str | None, rule: str, later: list[Recorded]) -> tuple[str, str, int]:
    """The retention table, key and value that would have kept the result at that call."""
    table = f"retention.tools.{tool_name or 'default'}"
    if "last" in rule or rule.endswith(":count"):  # keep_last's rule is retention:count
        same_tool = sum(
            isinstance(r.event, ToolResultRecorded) and r.event.tool_name == tool_name for r in later
        )
        return table, "keep_last", same_tool + 1
    if "turn" in rule:
        return table, "keep_turns", 1 + sum(isinstance(r.event, UserMessageAdded) for r in later)
    return table, "keep_steps", 1 + sum(isinstance(r.event, AssistantMessageAdded) for r in later)
