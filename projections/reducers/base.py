"""The reducer interface: ``reduce(context, budget, state) -> (context, state)``."""

from __future__ import annotations

from typing import Protocol

from contextledger.projections.budget import Budget
from contextledger.projections.state import RenderState, WorkingContext

__all__ = ["Reducer"]


class Reducer(Protocol):
    """One stage of the compaction pipeline, run at compaction points only.

    ``context`` is the window being reduced; ``state`` the fold's state (turn and step counters,
    pins, available summaries). A reducer may mutate the window it is given: the fold runs on its
    own copy of the caller's state (``Projector.fold``/``evolve`` are pure), so nothing outside
    sees it. It returns the window and state to hand to the next stage. The budget is a value that can
    gain fields (tier caps) without changing this signature.
    """

    @property
    def name(self) -> str:
        """The rule name decisions cite."""
        ...

    def reduce(
        self, context: WorkingContext, budget: Budget, state: RenderState
    ) -> tuple[WorkingContext, RenderState]:
        """Return the reduced window and the state."""
        ...
