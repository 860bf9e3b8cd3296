"""The policy-free persistent views by name: summaries, model_calls and the search index."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.application.audit.calls_view import CALLS_VIEW, CallsView
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.search.search_view import SEARCH_VIEW, SearchView
from contextledger.application.summaries.summary_view import SUMMARIES_VIEW, SummariesView
from contextledger.application.views.view_runner import View
from contextledger.domain.errors import ConfigError
from contextledger.domain.ports import ProjectionStore

__all__ = ["AUDIT_VIEWS", "audit_views"]

AUDIT_VIEWS = ("summaries", "calls", "search")
"""The names ``audit_views`` accepts."""


def audit_views(
    ledger: Ledger, store: ProjectionStore, names: Sequence[str], *, suffix: str = ""
) -> list[View]:
    """Return the views named (any of ``AUDIT_VIEWS``), in that order, their rows named + ``suffix``."""
    unknown = sorted(set(names) - set(AUDIT_VIEWS))
    if unknown:
        raise ConfigError(f"unknown views {unknown}: choose from {list(AUDIT_VIEWS)}")
    return [_build(ledger, store, name, suffix) for name in names]


def _build(ledger: Ledger, store: ProjectionStore, name: str, suffix: str) -> View:
    if name == "summaries":
        return SummariesView(store, name=SUMMARIES_VIEW + suffix)
    if name == "calls":
        return CallsView(store, name=CALLS_VIEW + suffix)
    return SearchView(ledger, store, name=SEARCH_VIEW + suffix)
