"""Session and call ids in the CLI: every command takes a unique prefix, every table shows one whole.

Resolving and shortening follow the one rule of ``application.kernel.id_prefixes``; this module only
opens the ledger with the session resolved and builds the table columns ids go in (``fold``: a
column narrower than its id breaks it over lines, never cuts it to an ellipsis).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from contextledger.adapters.cli.common import ledger_for

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger
    from rich.table import Column

__all__ = ["id_column", "session_ledger", "short_call_ids", "short_session_ids"]


@contextmanager
def session_ledger(db: str | None, given: str) -> Iterator[tuple[Ledger, str]]:
    """Open the ledger with ``given`` resolved: a session id or a unique prefix of one (forks too).

    Raises:
        SessionNotFoundError: no session has this id or starts with it.
        AmbiguousIdError: several sessions start with it (they are listed).
    """
    from contextledger.application.kernel.id_prefixes import resolve_session  # noqa: PLC0415 - on use

    with ledger_for(db) as ledger:
        yield ledger, resolve_session(ledger, given)


def short_session_ids(ledger: Ledger, ids: Iterable[str]) -> dict[str, str]:
    """Each session id as its shortest prefix no other session shares (8 characters past its label)."""
    from contextledger.application.kernel.id_prefixes import short_ids  # noqa: PLC0415 - on use

    return short_ids(ids, (info.session_id for info in ledger.sessions()))


def short_call_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each call id as the shortest prefix (its ``call-`` label and 8 more at least) no other one shares."""
    from contextledger.application.kernel.id_prefixes import short_ids  # noqa: PLC0415 - on use

    return short_ids(ids)


_WIDEST = 24
"""An id column asks for no more room than this; a longer id folds over lines."""


def id_column(header: str, shown: Iterable[str] = ()) -> Column:
    """A table column for ids: as wide as the longest shown (up to 24), folded (never cut) when squeezed."""
    from rich.table import Column  # noqa: PLC0415 - rich loads only when a command prints

    widest = max((len(s) for s in shown), default=None)
    return Column(header, overflow="fold", min_width=None if widest is None else min(widest, _WIDEST))
