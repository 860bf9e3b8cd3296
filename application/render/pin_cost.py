"""What a pin costs: the tokens it brings back and the recent messages it displaces, before it is written."""

from __future__ import annotations

import msgspec
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.pins import check_pinnable, pin_meta, span_pins
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AnyEvent, ItemPinned
from contextledger.projections.context import RenderedContext
from contextledger.projections.counting import CountedEvent
from contextledger.projections.policy import Policy
from contextledger.projections.presets import as_policy

__all__ = ["PinCost", "pin_cost", "pin_with_cost", "warn_if_displacing"]

log = get_logger(__name__)


class PinCost(msgspec.Struct, frozen=True, kw_only=True):
    """The next render with the pin against the one without it, under one policy and budget.

    ``displaced`` are the log positions shown verbatim without the pin and not shown verbatim with
    it (the pinned positions aside); ``brought_back`` the positions the pin makes verbatim: the pinned
    ones and the rest of their step groups (a call comes back with its results), ``pinned_tokens``
    their messages' tokens, each message counted once.
    """

    session_id: str
    positions: tuple[int, ...]
    policy: str
    budget: int
    tokens_before: int
    tokens_after: int
    brought_back: tuple[int, ...]
    pinned_tokens: int
    displaced: tuple[int, ...]
    displaced_tokens: int

    @property
    def displaces(self) -> bool:
        """Whether the pin pushes recent context out."""
        return bool(self.displaced)

    def describe(self) -> str:
        """One line: what the pin brings back and what it displaces."""
        what = ", ".join(map(str, self.positions))
        line = f"pinning {what} brings back {self.pinned_tokens:,} tokens"
        if not self.displaced:
            return line + f" and displaces nothing (policy {self.policy}, budget {self.budget:,})"
        return (
            line + f" and displaces {len(self.displaced)} message(s) shown now "
            f"({self.displaced_tokens:,} tokens; positions {_ranges(self.displaced)}) "
            f"under policy {self.policy}, budget {self.budget:,}"
        )


def _ranges(positions: tuple[int, ...]) -> str:
    runs: list[list[int]] = []
    for position in positions:
        if runs and position == runs[-1][1] + 1:
            runs[-1][1] = position
        else:
            runs.append([position, position])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _verbatim(context: RenderedContext) -> dict[int, tuple[int, int]]:
    """Each position shown in a whole message: that message's index and tokens."""
    shown: dict[int, tuple[int, int]] = {}
    for index, message in enumerate(context.messages):
        if message.kind == "message":
            for position in message.sources:
                shown[position] = (index, message.tokens)
    return shown


def _tokens(shown: dict[int, tuple[int, int]], positions: tuple[int, ...]) -> int:
    """The tokens of the messages showing ``positions``, each message once."""
    return sum(dict(shown[p] for p in positions).values())


def pin_cost(
    renderer: Renderer,
    session_id: str,
    first: int,
    last: int | None = None,
    *,
    policy: Policy | str,
    budget: int | None = None,
    reason: str = "",
) -> PinCost:
    """Return what pinning ``first`` (or every message of ``first..last``) would cost; nothing is written.

    The pin events are folded into the session's current state in memory, exactly as ``Ledger.pin``
    (or ``pin_span``) would write them, and the two renders compared.

    Raises:
        PinnedOverBudgetError: the pinned items alone would exceed the budget.
        InvalidMessageError: ``first`` alone is outside the session or holds no message (as ``Ledger.pin``).
        ValidationError: ``first..last`` reaches outside the session (as ``Ledger.pin_span``).
    """
    ledger = renderer.ledger
    policy = as_policy(policy)  # a preset's name, as every other call takes it
    if last is None:
        check_pinnable(ledger, session_id, first)  # what ``Ledger.pin`` would refuse, refused here too
    projector = renderer.projector(policy, budget=budget)
    state = renderer.state(session_id, projector)
    before = projector.render(state, renderer.reader.resolve)
    head = state.position
    events: list[AnyEvent]
    if last is None:
        events = [ItemPinned(position=first, reason=reason, meta=pin_meta(ledger, session_id, first))]
    else:
        events = span_pins(ledger, session_id, first, last, reason)
    pinned_state = projector.fold(
        [CountedEvent(position=head + i, event=e) for i, e in enumerate(events, start=1)], state
    )
    after = projector.render(pinned_state, renderer.reader.resolve)
    positions = tuple(e.position for e in events if isinstance(e, ItemPinned))
    shown_before, shown_after = _verbatim(before), _verbatim(after)
    brought = tuple(sorted(p for p in shown_after if p not in shown_before))
    displaced = tuple(sorted(p for p in shown_before if p not in shown_after and p not in positions))
    return PinCost(
        session_id=session_id,
        positions=positions,
        policy=policy.name,
        budget=before.budget,
        tokens_before=before.tokens,
        tokens_after=after.tokens,
        brought_back=brought,
        pinned_tokens=_tokens(shown_after, brought),
        displaced=displaced,
        displaced_tokens=_tokens(shown_before, displaced),
    )


def warn_if_displacing(cost: PinCost) -> None:
    """Log a warning (``pin_displaces_context``) when the pin pushes recent context out."""
    if cost.displaces:
        log.warning(
            "pin_displaces_context",
            session_id=cost.session_id,
            positions=list(cost.positions),
            displaced=list(cost.displaced),
            displaced_tokens=cost.displaced_tokens,
            message=cost.describe(),
        )


def pin_with_cost(
    renderer: Renderer,
    session_id: str,
    first: int,
    last: int | None = None,
    *,
    policy: Policy,
    budget: int | None = None,
    reason: str = "",
) -> tuple[tuple[int, ...], PinCost]:
    """Pin ``first`` (or ``first..last``) and return the pin positions with the cost, warned if it displaces.

    The cost is computed before writing (``pin_cost``); a pin that pushes recent context out logs
    ``pin_displaces_context`` (the library stays quiet unless the host configures logging).
    """
    cost = pin_cost(renderer, session_id, first, last, policy=policy, budget=budget, reason=reason)
    ledger = renderer.ledger
    if last is None:
        written: tuple[int, ...] = (ledger.pin(session_id, first, reason),)
    else:
        written = tuple(ledger.pin_span(session_id, first, last, reason))
    warn_if_displacing(cost)
    return written, cost
