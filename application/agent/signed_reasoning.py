"""What a request sends back beyond the render: signed reasoning and hosted tool items of the current turn."""

from __future__ import annotations

from contextledger.application.agent.agent_types import StoredReasoning
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.wire_shapes import HOSTED_ITEMS, THINKING_BLOCKS
from contextledger.domain.events import AssistantMessageAdded
from contextledger.projections.context import RenderedContext

__all__ = ["signed_reasoning"]

_WITH_REASONING = frozenset({"message", "truncated"})
"""Kinds of an assistant message that go back with their signed reasoning: whole, or with its text cut.

The reasoning is not the text: a message cut to the per-message cap still carries its thinking unchanged,
and Anthropic refuses a tool-use turn whose assistant message lost the thinking it began with."""


def signed_reasoning(
    ledger: Ledger,
    session_id: str,
    context: RenderedContext,
    known: dict[int, StoredReasoning | None] | None = None,
) -> dict[int, StoredReasoning]:
    """Signed reasoning of the assistant messages after the last user message, by message index.

    It includes the items of tools the provider ran (``meta[HOSTED_ITEMS]``), which go back with it.

    A function of the log and the rendered context only, so a recorded call's payload is rebuilt
    with the very reasoning its request sent (``replay_call``). ``known`` (position -> reasoning or
    None) is a caller's memory across requests: each position is read once, in one ranged read.
    """
    last_user = max(
        (i for i, m in enumerate(context.messages) if m.role == "user" and m.kind == "message"),
        default=-1,
    )
    wanted = {
        index: message.sources[0]
        for index in range(last_user + 1, len(context.messages))
        if (message := context.messages[index]).role == "assistant"
        and message.kind in _WITH_REASONING
        and message.sources
    }
    memory: dict[int, StoredReasoning | None] = {} if known is None else known
    _read(ledger, session_id, set(wanted.values()), memory)
    return {
        index: reasoning
        for index, position in wanted.items()
        if (reasoning := memory.get(position)) is not None
    }


def _imported_signature(event: AssistantMessageAdded) -> str | None:
    """The signature of the one thinking block an import kept before ADR 0088 (``meta.thinking_signatures``).

    Such an import joined its thinking texts and kept their signatures apart: one signature goes with the
    whole reasoning text; several cannot be told apart, and are not sent (a new import keeps the blocks).
    """
    signatures = event.meta.get(_IMPORTED_SIGNATURES)
    if isinstance(signatures, list) and len(signatures) == 1 and isinstance(signatures[0], str):
        return signatures[0]
    return None


_IMPORTED_SIGNATURES = "thinking_signatures"


def _read(
    ledger: Ledger, session_id: str, positions: set[int], memory: dict[int, StoredReasoning | None]
) -> None:
    """Learn the signed reasoning at ``positions`` not in ``memory`` yet, in one ranged read.

    Positions before the oldest one asked for are forgotten (a later user message moves the window).
    """
    if not positions:
        return
    oldest = min(positions)
    for seen in [p for p in memory if p < oldest]:
        del memory[seen]
    missing = sorted(p for p in positions if p not in memory)
    if not missing:
        return
    found: dict[int, StoredReasoning | None] = dict.fromkeys(missing)
    for recorded in ledger.events(session_id, after=missing[0] - 1, upto=missing[-1]):
        event = recorded.event
        if recorded.position not in found or not isinstance(event, AssistantMessageAdded):
            continue
        if event.reasoning_signature or event.meta.get(THINKING_BLOCKS) or event.meta.get(HOSTED_ITEMS):
            # signed reasoning whose text is empty goes back too: an encrypted item with no summary (the
            # Responses default) or a thinking block whose text the provider left out
            found[recorded.position] = StoredReasoning(
                text=event.reasoning or "",
                signature=event.reasoning_signature or "",
                meta=dict(event.meta),
            )
        elif (signature := _imported_signature(event)) is not None:
            found[recorded.position] = StoredReasoning(
                text=event.reasoning or "", signature=signature, meta=dict(event.meta)
            )
    memory.update(found)
