"""Rebuild a recorded call's exact payload in its wire (Chat, Responses, Messages, reasoning too)."""

from __future__ import annotations

from typing import Any

import msgspec
from contextledger.adapters.providers.agent import provider_format
from contextledger.application.agent.signed_reasoning import signed_reasoning
from contextledger.application.audit.call_recorder import CallRecorder, payload_sha
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import ReplayMismatchError
from contextledger.domain.events import ModelCallRecorded
from contextledger.projections.reasoning_back import reasoning_rules_of

__all__ = ["ReplayedPayload", "replay_call"]


class ReplayedPayload(msgspec.Struct, frozen=True, kw_only=True):
    """A recorded call rebuilt from the log: its record, the payload and that payload's hash."""

    record: ModelCallRecorded
    payload: dict[str, Any]
    payload_sha: str

    @property
    def verified(self) -> bool:
        """The rebuilt payload hashes as the one recorded (always, once returned; False if none was)."""
        return bool(self.record.payload_sha) and self.payload_sha == self.record.payload_sha


def _tokenizer_name(recorded: str) -> str:
    """The name to ask the tokenizer factory for, from the name a counter records (heuristic variants)."""
    return "heuristic" if recorded.startswith("heuristic") else recorded


def replay_call(ledger: Ledger, call_id: str, session_id: str | None = None) -> ReplayedPayload:
    """Rebuild the payload a recorded call sent, in its wire, and check it hashes as recorded.

    The context is rendered again at the call's position under its registered policy and budget;
    the wire the record names (``openai``, ``openai-responses``, ``anthropic``) turns it into the
    request arguments, with the signed reasoning (thinking blocks, encrypted reasoning items) the
    request sent back, read from the same log. ``call_id`` and ``session_id`` may be unique
    prefixes of ids (``CallRecorder.resolve``).

    Raises:
        ValidationError: No session has the call.
        AmbiguousIdError: Several calls (or sessions) start with the prefix given.
        ReplayMismatchError: The context or the payload differs from the one recorded.
    """
    recorder = CallRecorder(ledger)
    session, call_id = recorder.resolve(call_id, session_id)
    tokenizer = recorder.call(session, call_id).record.tokenizer
    renderer = Renderer(ledger, tokenizer=_tokenizer_name(tokenizer))
    record, context = recorder.rerender(renderer, session, call_id)
    rules = reasoning_rules_of(record.meta)  # a record made before the rules were kept was built under 1
    reasoning = signed_reasoning(ledger, session, context, rules=rules)
    wire = provider_format(record.wire_format).payload(context, reasoning)
    sha = payload_sha(wire.arguments)
    if record.payload_sha and sha != record.payload_sha:
        raise ReplayMismatchError(
            f"call {call_id}: the {record.wire_format} payload differs from the one recorded"
        )
    return ReplayedPayload(record=record, payload=wire.arguments, payload_sha=sha)
