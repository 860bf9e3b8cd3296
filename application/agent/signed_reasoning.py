"""What a request sends back beyond the render: signed reasoning and hosted tool items of the current turn."""

from __future__ import annotations

from contextledger.application.agent.agent_types import StoredReasoning
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.wire_shapes import HOSTED_ITEMS, THINKING_BLOCKS
from contextledger.domain.events import AssistantMessageAdded
from contextledger.projections.context import RenderedContext
from contextledger.projections.reasoning_back import REASONING_RULES, turn_replies

__all__ = ["signed_reasoning"]


def signed_reasoning(
    ledger: Ledger,
    session_id: str,
    context: RenderedContext,
    known: dict[int, StoredReasoning | None] | None = None,
    *,
    rules: int = REASONING_RULES,
) -> dict[int, StoredReasoning]:
    """Signed reasoning of the assistant messages after the last user message, by message index.

    It includes the items of tools the provider ran (``meta[HOSTED_ITEMS]``), which go back with it.

    A function of the log and the rendered context only, so a recorded call's payload is rebuilt
    with the very reasoning its request sent (``replay_call``). ``known`` (position -> reasoning or
    None) is a caller's memory across requests: each position is read once, in one ranged read.
    ``rules`` (``REASONING_RULES``): a recorded call is rebuilt under the rules it was sent under.
    """
    wanted = turn_replies(context, rules)
    memory: dict[int, StoredReasoning | None] = {} if known is None else known
    _read(ledger, session_id, set(wanted.values()), memory, rules=rules)
    return {
        index: reasoning
        for index, position in wanted.items()
        if (reasoning := memory.get(position)) is not None
    }


def _read(
    ledger: Ledger,
    session_id: str,
    positions: set[int],
    memory: dict[int, StoredReasoning | None],
    *,
    rules: int = REASONING_RULES,
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
        signed = event.reasoning_signature and (rules >= REASONING_RULES or event.reasoning)
        if signed or event.meta.get(THINKING_BLOCKS) or event.meta.get(HOSTED_ITEMS):
            # signed reasoning whose text is empty goes back too: an encrypted item with no summary (the
            # Responses default) or a thinking block whose text the provider left out
            found[recorded.position] = StoredReasoning(
                text=event.reasoning or "",
                signature=event.reasoning_signature or "",
                meta=dict(event.meta),
                rules=rules,
            )
    memory.update(found)
