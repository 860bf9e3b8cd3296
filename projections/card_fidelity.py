"""Whether a summary kept what the session-state card holds: the user's instructions and the latest todo."""

from __future__ import annotations

import math
import re

import msgspec
from contextledger.domain.events import Fidelity
from contextledger.projections.card_extract import instructions_of
from contextledger.projections.card_state import CardState

__all__ = ["CardCheck", "check_against_card", "with_card_check"]

KEPT_WORDS = 0.8
"""An instruction counts as kept when the summary has it verbatim or this share of its words."""

_WORD = re.compile(r"[a-z0-9_]+")


class CardCheck(msgspec.Struct, frozen=True, kw_only=True):
    """What a summary kept of the card: fractions of instructions and todo items, and what it lost."""

    constraints: float = 1.0
    todo: float = 1.0
    lost: tuple[str, ...] = ()

    @property
    def low(self) -> bool:
        """True when the summary lost an instruction or a todo item (low-fidelity)."""
        return bool(self.lost)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _kept(sentence: str, flat: str, words: set[str]) -> bool:
    """Verbatim (case and spacing aside), or enough of its words (``don't`` and ``not`` both count)."""
    own = _words(sentence)
    if not own or " ".join(own) in flat:
        return True
    return sum(w in words for w in own) >= math.ceil(KEPT_WORDS * len(own))


def check_against_card(card: CardState, covers_from: int, covers_through: int, text: str) -> CardCheck:
    """Return which of the card's instructions and latest todo items a summary of the span keeps.

    The instructions are the imperative and negative sentences (``instructions_of``) of every user
    message at positions ``covers_from..covers_through``; the todo items are those of the card's
    latest plan or todo list when its message is inside the span (a later list is still verbatim).
    """
    flat = " ".join(_words(text))
    words = set(flat.split())
    owed = [
        (seq, sentence)
        for seq, said, _ in card.users
        if covers_from <= seq <= covers_through
        for sentence in instructions_of(said)
    ]
    lost = [f"instruction (seq {seq}): {s}" for seq, s in owed if not _kept(s, flat, words)]
    constraints = 1.0 - len(lost) / len(owed) if owed else 1.0
    todo = 1.0
    if card.todo is not None and covers_from <= card.todo[0] <= covers_through:
        seq, items = card.todo
        # open items only: a done one ("[x]") is no work left, and a summary need not carry it
        texts = [item.split("] ", 1)[-1] for item in items if not item.startswith("[x]")]
        gone = [t for t in texts if " ".join(_words(t)) not in flat]
        lost += [f"todo item (seq {seq}): {t}" for t in gone]
        todo = 1.0 - len(gone) / len(texts) if texts else 1.0
    return CardCheck(constraints=constraints, todo=todo, lost=tuple(lost))


def with_card_check(report: Fidelity, check: CardCheck) -> Fidelity:
    """Return the fidelity report with the card check's fractions and losses added."""
    return msgspec.structs.replace(report, constraints=check.constraints, todo=check.todo, lost=check.lost)
