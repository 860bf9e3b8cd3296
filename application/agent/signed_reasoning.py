"""The signed reasoning a request sends back: thinking blocks and reasoning items of the current turn."""

from __future__ import annotations

from contextledger.application.agent.agent_types import StoredReasoning
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.wire_shapes import THINKING_BLOCKS
from contextledger.domain.events import AssistantMessageAdded
from contextledger.projections.context import RenderedContext

__all__ = ["signed_reasoning"]


def signed_reasoning(ledger: Ledger, session_id: str, context: RenderedContext) -> dict[int, StoredReasoning]:
    """Signed reasoning of the assistant messages after the last user message, by message index.

    A function of the log and the rendered context only, so a recorded call's payload is rebuilt
    with the very reasoning its request sent (``replay_call``).
    """
    last_user = max(
        (i for i, m in enumerate(context.messages) if m.role == "user" and m.kind == "message"),
        default=-1,
    )
    out: dict[int, StoredReasoning] = {}
    for index in range(last_user + 1, len(context.messages)):
        message = context.messages[index]
        if message.role != "assistant" or message.kind != "message" or not message.sources:
            continue
        position = message.sources[0]
        for recorded in ledger.events(session_id, after=position - 1, upto=position):
            event = recorded.event
            if not isinstance(event, AssistantMessageAdded):
                continue
            if (event.reasoning_signature and event.reasoning) or event.meta.get(THINKING_BLOCKS):
                out[index] = StoredReasoning(
                    text=event.reasoning or "",
                    signature=event.reasoning_signature or "",
                    meta=dict(event.meta),
                )
    return out
