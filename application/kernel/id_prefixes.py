"""Ids by unique prefix: the one rule that names a session or a call by its first characters, and shows it so.

A given id names what it equals; otherwise the one id it starts. Several ids starting with it is an
``AmbiguousIdError`` listing them; none is the caller's own not-found error. Tables show each id as
its shortest prefix that no other id shares, keeping ``SHORT_ID`` characters past its label at least
(``call-``, ``swe-agent-``: leading words of letters and dashes), so what a narrow terminal prints is
whole and every command accepts it (``short_ids``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from contextledger.application.kernel.ledger import Ledger
from contextledger.domain.errors import AmbiguousIdError, SessionNotFoundError

__all__ = ["SHORT_ID", "match_prefix", "resolve_session", "short_ids"]

SHORT_ID = 8
"""Characters a shown id keeps past its label at least (more when another id shares them)."""

_LABEL = re.compile(r"^(?P<label>[A-Za-z][A-Za-z_]*(?:-[A-Za-z][A-Za-z_]*)*-)")
"""An id's label: leading words of letters, each ending in a dash (``call-``, ``swe-agent-``)."""


def _minimum(value: str, past_label: int) -> int:
    found = _LABEL.match(value)
    return past_label + (len(found.group("label")) if found else 0)


def match_prefix(kind: str, given: str, ids: Iterable[str]) -> str | None:
    """The id ``given`` names among ``ids``: itself, else the one it is a prefix of (None: no id).

    Raises:
        AmbiguousIdError: ``given`` starts several ids (and equals none).
    """
    matches: list[str] = []
    for candidate in ids:
        if candidate == given:
            return candidate
        if given and candidate.startswith(given):
            matches.append(candidate)
    if len(matches) > 1:
        raise AmbiguousIdError(kind, given, sorted(matches))
    return matches[0] if matches else None


def resolve_session(ledger: Ledger, given: str) -> str:
    """The session ``given`` names: an id, or a unique prefix of one (forks included).

    Raises:
        SessionNotFoundError: no session has this id or starts with it.
        AmbiguousIdError: several sessions start with it.
    """
    if ledger.log.version(given) > 0:
        return given
    found = match_prefix("session", given, (info.session_id for info in ledger.sessions()))
    if found is None:
        raise SessionNotFoundError(given)
    return found


def short_ids(ids: Iterable[str], among: Iterable[str] = (), *, minimum: int = SHORT_ID) -> dict[str, str]:
    """Each of ``ids`` as its shortest prefix no other id shares, ``minimum`` characters past its label.

    Uniqueness is among ``ids`` and ``among`` together (pass every id a command may be given, so that
    the prefix shown is one ``match_prefix`` resolves back). An id as short as its prefix is shown whole.
    """
    shown = list(dict.fromkeys(ids))
    ordered = sorted({*shown, *among})
    result: dict[str, str] = {}
    for index, value in enumerate(ordered):
        length = _minimum(value, minimum)
        for neighbour in (
            ordered[index - 1] if index else "",
            ordered[index + 1] if index + 1 < len(ordered) else "",
        ):
            common = next((i for i, (a, b) in enumerate(zip(value, neighbour, strict=False)) if a != b), None)
            shared = min(len(value), len(neighbour)) if common is None else common
            length = max(length, shared + 1)
        result[value] = value[:length]
    return {value: result[value] for value in shown}
