"""Injection hooks: per-turn content next to the last user message, after reduction, within reserves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import msgspec
from contextledger.domain.errors import ConfigError, InjectionOverflowError
from contextledger.domain.ports import TokenCounter
from contextledger.projections.context import MESSAGE_OVERHEAD, RenderedContext, RenderedMessage

__all__ = ["InjectionHook", "Placement", "StaticInjection", "inject"]

Placement = Literal["after_last_user", "end"]


class InjectionHook(Protocol):
    """Produces per-turn content (e.g. retrieved memories) for a rendered context.

    Hooks are a separate subsystem from reducers: they run after reduction, which never re-runs.
    A hook should return the same text for every render of one user turn, so the cached prefix
    survives between compaction points.
    """

    @property
    def name(self) -> str:
        """The hook's name, cited by ``InjectionOverflowError``."""
        ...

    @property
    def reserve(self) -> int:
        """Tokens this hook may use (message overhead included)."""
        ...

    def __call__(self, context: RenderedContext) -> str | None:
        """Return the text to inject, or None for nothing."""
        ...


class StaticInjection(msgspec.Struct, frozen=True):
    """A hook that injects a fixed text (tests, demos, pinned instructions)."""

    name: str
    text: str
    reserve: int

    def __call__(self, context: RenderedContext) -> str | None:
        """Return the fixed text."""
        del context
        return self.text


def inject(
    context: RenderedContext,
    hooks: Sequence[InjectionHook],
    counter: TokenCounter,
    *,
    injection_reserve: int,
    placement: Placement = "after_last_user",
) -> RenderedContext:
    """Return ``context`` with each hook's content added as a user message of kind ``injection``.

    The messages go right after the last user message (``after_last_user``, seed 001's layout) or
    at the very end (``end``, never moves the cached prefix even when the last user message is far
    back). Reduction is not re-run: each hook must fit its own reserve.

    Raises:
        ConfigError: The hooks' reserves add up to more than ``injection_reserve``.
        InjectionOverflowError: A hook produced more tokens than its reserve.
    """
    if not hooks:
        return context
    reserved = sum(h.reserve for h in hooks)
    if reserved > injection_reserve:
        msg = (
            f"injection hooks reserve {reserved} tokens but the budget's injection_reserve is "
            f"{injection_reserve}"
        )
        raise ConfigError(msg)
    added: list[RenderedMessage] = []
    for hook in hooks:
        text = hook(context)
        if text is None:
            continue
        tokens = counter.count(text) + MESSAGE_OVERHEAD
        if tokens > hook.reserve:
            raise InjectionOverflowError(hook.name, tokens, hook.reserve)
        added.append(RenderedMessage(role="user", text=text, tokens=tokens, kind="injection"))
    if not added:
        return context
    messages = list(context.messages)
    at = len(messages)
    if placement == "after_last_user":
        users = [i for i, m in enumerate(messages) if m.role == "user" and m.kind in ("message", "truncated")]
        if users:
            at = users[-1] + 1
    messages[at:at] = added
    return msgspec.structs.replace(
        context,
        messages=tuple(messages),
        stable_prefix=min(context.stable_prefix, at),
        tokens=context.tokens + sum(m.tokens for m in added),
    )
