"""What ``doctor`` reports: the store, its schema, tokenizers, projection versions with their lag, leases."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.context_versions import CONTEXT_VIEW
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.ports import LeaseHolder

__all__ = ["Health", "SummaryLease", "TokenizerState", "ViewLag", "health", "masked_url"]


class TokenizerState(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a tokenizer counts on this machine with no network, and why not."""

    name: str
    available: bool
    problem: str | None = None


class ViewLag(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpointed view (or one of its shards): how far it folded and how far behind the log's head."""

    checkpoint: str
    position: int
    behind: int
    active: bool
    """It is the active context version (the one ``render --from-projection`` serves)."""


class SummaryLease(msgspec.Struct, frozen=True, kw_only=True):
    """A compaction request a summary worker holds: who, until when, and whether it may still run."""

    session_id: str
    request_id: str
    holder: str
    expires: datetime | None
    alive: bool


class Health(msgspec.Struct, frozen=True, kw_only=True):
    """The ``doctor`` report; ``schema_version`` None: the store records none (memory)."""

    store_url: str
    schema_version: int | None
    tokenizers: tuple[TokenizerState, ...]
    head: int
    """The newest notification id: the log's head that views catch up to."""
    active_context: str | None
    views: tuple[ViewLag, ...]
    projection_leases: tuple[LeaseHolder, ...]
    summary_leases: tuple[SummaryLease, ...]


_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@]*):[^/?#]*@")
"""A URL's ``scheme://user:password@`` start (the password runs to the last ``@`` before the path)."""


def masked_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (``postgresql://me:***@host/db``)."""
    return _PASSWORD.sub(r"\g<head>:***@", url, count=1)


def _tokenizers(ledger: Ledger, names: Sequence[str]) -> tuple[TokenizerState, ...]:
    states: list[TokenizerState] = []
    for name in names:
        try:
            ledger.ports.tokenizers(name).count("ok")
        except ContextLedgerError as error:
            states.append(TokenizerState(name=name, available=False, problem=str(error)))
        else:
            states.append(TokenizerState(name=name, available=True))
    return tuple(states)


def _summary_leases(ledger: Ledger, holder_alive: Callable[[str], bool]) -> tuple[SummaryLease, ...]:
    """Requests an attempt holds; alive while its lease runs and ``holder_alive`` does not deny it."""
    now = ledger.clock.now()
    found: list[SummaryLease] = []
    for info in ledger.sessions():
        for status in SummaryStream(ledger.log, info.session_id).requests().values():
            if status.lease_holder is None or status.status(now) != "running":
                continue
            until = status.lease_until
            found.append(
                SummaryLease(
                    session_id=info.session_id,
                    request_id=status.request.request_id,
                    holder=status.lease_holder,
                    expires=until,
                    alive=(until is None or until > now) and holder_alive(status.lease_holder),
                )
            )
    return tuple(found)


def health(ledger: Ledger, *, tokenizers: Sequence[str], holder_alive: Callable[[str], bool]) -> Health:
    """Say what the ledger's store holds and who works on it.

    Args:
        ledger: The opened ledger.
        tokenizers: The tokenizer names to try offline (each counts a word, or says why it cannot).
        holder_alive: Whether a summary lease's holder may still run (its process on this host).
    """
    ports = ledger.ports
    views, reader, store = ports.projections, ports.notifications, ports.health
    head = reader.head() if reader is not None else 0
    active = views.active(CONTEXT_VIEW) if views is not None else None
    lags = tuple(
        ViewLag(checkpoint=name, position=position, behind=max(0, head - position), active=name == active)
        for name, position in (views.checkpoints().items() if views is not None else ())
    )
    return Health(
        store_url=masked_url(ledger.store_url),
        schema_version=store.schema_version() if store is not None else None,
        tokenizers=_tokenizers(ledger, tokenizers),
        head=head,
        active_context=active,
        views=lags,
        projection_leases=tuple(store.leases()) if store is not None else (),
        summary_leases=_summary_leases(ledger, holder_alive),
    )
