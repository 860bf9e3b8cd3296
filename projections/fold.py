"""The fold: ``evolve(state, counted_event) -> state``, with compaction points decided inside it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec
from contextledger.domain.content import BlobText, Text
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    SessionStarted,
    SummaryRecorded,
    ToolResultRecorded,
    UserMessageAdded,
    said_by_user,
)
from contextledger.domain.ports import TokenCounter, TokenFloor
from contextledger.projections.budget import Budget
from contextledger.projections.cache_aware import cache_expired
from contextledger.projections.card import CardView, fit_card
from contextledger.projections.card_state import observe_assistant, observe_result, observe_user
from contextledger.projections.context import MESSAGE_OVERHEAD, RenderedContext
from contextledger.projections.counting import CountedEvent, system_tokens
from contextledger.projections.groups import add_result, extend_request, leave_head
from contextledger.projections.ingest import EntryBuilder
from contextledger.projections.policy import Policy
from contextledger.projections.reducers.base import Reducer
from contextledger.projections.reducers.guarantee import GuaranteeReducer
from contextledger.projections.reducers.retention import RetentionReducer
from contextledger.projections.reducers.summary import (
    SummaryReducer,
    select_summaries,
    shown_room,
)
from contextledger.projections.reducers.truncation import TruncationReducer
from contextledger.projections.reducers.window import WindowReducer
from contextledger.projections.render import MessageMemo, render, summary_framing
from contextledger.projections.restore import restore_pinned, unrestore
from contextledger.projections.state import Entry, Group, PendingCall, Removed, RenderState, SummaryRef

__all__ = ["FORK_START", "Projector"]

FORK_START = "fork_start"
"""``SummaryRecorded.meta`` key of the artifact a forked session starts from: applied on arrival, always."""


class Projector:
    """Folds counted events into a ``RenderState`` and renders it, for one policy, budget and tokenizer.

    ``evolve`` and ``fold`` are pure: they return a new state and leave the one they are given
    unchanged (``fold`` copies it once, O(window), then folds every event into its private copy,
    so catching up is linear in the events). Compaction points are decided inside the fold, so
    rendering at any position is a pure function of the events and summary artifacts folded up to
    it: an incrementally caught-up state equals a full replay.

    Per-item caps apply under pressure only: a message enters the window whole unless it alone
    exceeds the target; its form cut to ``Budget.message_cap`` is precomputed on arrival and
    shown from the next compaction point on, like the truncation short forms. A context far
    below its budget reaches the model unchanged.

    Args:
        policy: The render policy.
        counter: The tokenizer port; used only for derived texts (stubs, truncations, placeholders).
        budget: Overrides the policy's budget (e.g. a ``--budget`` given on the command line).
    """

    def __init__(self, policy: Policy, counter: TokenCounter, *, budget: Budget | None = None) -> None:
        """Build the reducer pipeline for ``policy``."""
        self.policy = policy
        self.counter = counter
        self.budget = budget or policy.budget.build()
        whole = msgspec.structs.replace(self.budget, message_cap=1.0)
        self.entries = EntryBuilder(whole, policy.truncation, counter)
        """Builds entries on arrival, cut only when a message alone exceeds the target."""
        self.capped = EntryBuilder(self.budget, policy.truncation, counter)
        """Builds the form cut to the per-message cap, shown from the next compaction point on."""
        self.key: tuple[str, str, str] = (policy.fingerprint(), str(self.budget.total), counter.name)
        """Identifies what a folded state depends on: policy content, budget and tokenizer."""
        self.summary = SummaryReducer(policy.summary)
        self.guarantee = GuaranteeReducer(policy.guarantee, policy.retention, counter)
        card = policy.card
        self.card_view = CardView(files=card.files, decisions=card.decisions, errors=card.errors)
        """The richest card the policy asks for; ``fit_card`` shrinks it to the cap."""
        self.at_least = counter.tokens_at_least if isinstance(counter, TokenFloor) else None
        self._card = card.enabled
        """Whether the card's state is kept (read once here: ``_step`` runs for every event)."""
        self._history_note = card.history_wording
        self._card_tail = card.enabled and card.placement == "tail"
        self._cache_expiry = self.budget.cache_expiry_seconds is not None
        """The tokenizer's count lower bound, if it has one: ``fit_card`` skips views that cannot fit."""
        self._message_tokens = self.budget.message_tokens
        """The per-message cap (``_over_cap``), read once: every message is checked against it."""
        self._high_mark, self._target = self.budget.high_mark, self.budget.target
        self._tool_cap = self.budget.tool_cap
        """The budget's marks ``_maybe_compact`` checks after every event, read once."""
        self.pipeline: tuple[Reducer, ...] = (
            RetentionReducer(policy.retention, counter),
            TruncationReducer(policy.truncation),
            self.summary,
            WindowReducer(policy.window),
            self.guarantee,
        )

    @property
    def tokenizer(self) -> str:
        """The tokenizer's name."""
        return self.counter.name

    def start(self) -> RenderState:
        """Return the state before any event."""
        return RenderState(pending_tokens=self.entries.pending_tokens())

    def needs_text(self, counted: CountedEvent) -> bool:
        """Return whether the adapter must put the blob's text in ``counted.full_text``.

        With the session-state card, a long user or assistant message is read too (the card keeps
        the user's words and the assistant's decisions); tool output only when it must be cut.
        """
        if self.policy.card.enabled and isinstance(
            event := counted.event, UserMessageAdded | AssistantMessageAdded
        ):
            return isinstance(event.content, BlobText)
        return self.capped.needs_text(counted)

    def fold(self, events: Iterable[CountedEvent], state: RenderState | None = None) -> RenderState:
        """Return the state after ``events``, from ``state`` (left unchanged) or a fresh one."""
        current = self.start() if state is None else state.copy()
        for counted in events:
            self._step(current, counted)
        return current

    def evolve(self, state: RenderState, counted: CountedEvent) -> RenderState:
        """Return the state after one counted event; ``state`` is unchanged (copied, O(window))."""
        current = state.copy()
        self._step(current, counted)
        return current

    def _step(self, state: RenderState, counted: CountedEvent) -> None:
        """Fold one counted event into ``state``, which the caller owns (mutated in place).

        The branches run most frequent first (assistant messages, tool results, user messages); the
        event types are disjoint, so the order changes nothing but the number of checks.
        """
        event = counted.event
        if isinstance(event, AssistantMessageAdded):
            self._assistant(state, counted, event)
        elif isinstance(event, ToolResultRecorded):
            self._result(state, counted, event)
            state.position = counted.position
            if self._card:
                observe_result(state.card, counted.position, event, counted.full_text)
        elif isinstance(event, UserMessageAdded):
            self._user(state, counted, event)
        elif isinstance(event, SummaryRecorded):
            self._summary(state, counted, event)
            return
        else:
            if isinstance(event, SessionStarted):
                state.session_id = event.session_id
                state.system = event.system_prompt
                state.system_tokens = system_tokens(counted.tokens[0], event.system_prompt)
                state.tools = event.tools
                state.tools_tokens = counted.tokens[1] if event.tools else 0
            elif isinstance(event, ItemPinned | ItemUnpinned):
                self._pin(state, event)
            state.position = counted.position
            self._maybe_compact(state, event)
            return
        if self._card_tail:
            self._refresh_card(state)
        self._maybe_compact(state, event)

    def _user(self, state: RenderState, counted: CountedEvent, event: UserMessageAdded) -> None:
        position = counted.position
        state.turns += 1
        entry = self.entries.user(counted, event)
        if self._over_cap(entry):
            entry = self._with_cut(entry, self.capped.user(counted, event))
        self._add_group(state, entry, ())
        state.position = position
        said = said_by_user(event)
        if self.policy.window.pin_whole_request:  # a note inside the request is pinned with it: counted too
            extend_request(
                state, position, state.window.groups[-1].tokens, self.budget.message_tokens, opens=said
            )
        if not said:  # the agent's note in the user's place: shown, never the task
            return
        state.first_user = position if state.first_user is None else state.first_user
        state.latest_user = position
        if self._card:
            observe_user(state.card, position, event, counted.full_text, counted.card)

    def _assistant(self, state: RenderState, counted: CountedEvent, event: AssistantMessageAdded) -> None:
        position = counted.position
        state.steps += 1
        entry = self.entries.assistant(counted, event)
        if self._over_cap(entry):
            entry = self._with_cut(entry, self.capped.assistant(counted, event))
        calls = event.tool_calls
        self._add_group(state, entry, tuple(PendingCall(c.id, c.name) for c in calls) if calls else ())
        owners = state.owners
        for call in calls:
            owners[call.id] = position
        state.position = position
        if self._card:
            observe_assistant(state.card, position, event, counted.full_text, counted.card)

    def _pin(self, state: RenderState, event: ItemPinned | ItemUnpinned) -> None:
        """Count a pin or unpin; restoring (or undoing) a message is a compaction point of its own."""
        changed = False
        if isinstance(event, ItemPinned):
            state.pins[event.position] = state.pins.get(event.position, 0) + 1
            changed = restore_pinned(state, event, self.counter, self.entries)
        elif event.position in state.pins:
            left = state.pins.pop(event.position) - 1
            if left > 0:
                state.pins[event.position] = left
            else:
                changed = unrestore(state, event.position)
        if changed:
            state.compactions += 1  # a deliberate prefix change

    def render(
        self,
        state: RenderState,
        resolve: Callable[[Text], str],
        *,
        memo: MessageMemo | None = None,
        with_decisions: bool = True,
        stand_in: Callable[[int], str] | None = None,
    ) -> RenderedContext:
        """Render the context of ``state``; ``resolve`` reads the texts of messages in the window only.

        ``memo`` (the last render's messages by entry) lets a render after new events reuse the
        messages of entries still shown; the output is the same with or without it.
        ``with_decisions=False`` leaves the context's ``decisions`` empty, and ``stand_in`` names the
        texts shown as logged by their positions (``projections.render``).
        """
        return render(
            state,
            resolve,
            budget=self.budget,
            policy=self.policy.name,
            tokenizer=self.tokenizer,
            card_tail=self.policy.card.placement == "tail",
            memo=memo,
            with_decisions=with_decisions,
            stand_in=stand_in,
        )

    # -- folding messages ------------------------------------------------------------------

    def _over_cap(self, entry: Entry) -> bool:
        """Whether ``entry`` is over the per-message cap and gets a cut form (a stub never does)."""
        return entry.tokens > self._message_tokens and entry.kind != "stub"

    def _with_cut(self, entry: Entry, capped: Entry) -> Entry:
        """Return ``entry`` (``_over_cap``) carrying ``capped``, its cut form, as its short form.

        The cut form (for a tool result, its truncation short form when it has one) is shown at the next
        compaction point (``TruncationReducer``), never on arrival; callers build it only when over the cap.
        A cut form no shorter than the entry (a cap too small for the cut's marker) is not carried: it
        would grow the message, and a head group past its cap, at the compaction point.
        """
        if capped.short_text is not None:
            text, tokens = capped.short_text, capped.short_tokens
        elif capped.text is not None:
            text, tokens = capped.text, capped.tokens - MESSAGE_OVERHEAD
        else:
            return entry
        if tokens + MESSAGE_OVERHEAD >= entry.tokens:
            return entry
        return msgspec.structs.replace(entry, short_text=text, short_tokens=tokens)

    def _add_group(self, state: RenderState, entry: Entry, pending: tuple[PendingCall, ...]) -> None:
        window = state.window
        tokens = entry.tokens + len(pending) * state.pending_tokens
        group = Group(
            start=entry.position,
            turn=state.turns,
            step=state.steps,
            entries=(entry,),
            pending=pending,
            tokens=tokens,
            tool_tokens=0,
        )
        if state.head_open and (state.window.summaries or state.window.card):
            # A summary (or the card) already stands for the session's beginning: a later first turn is
            # not the head (it would render before them and break the cached prefix without a compaction).
            state.head_open = False
        if state.head_open:
            fits = state.head_tokens + tokens <= self.budget.head_tokens
            if self.policy.window.in_head(state.turns, state.steps) and fits:
                group = msgspec.structs.replace(group, head=True)
                state.head_tokens += tokens
                state.head_end = entry.position
            else:
                state.head_open = False
        window.index[group.start] = len(window.groups)
        window.groups.append(group)
        window.tokens += tokens

    def _result(self, state: RenderState, counted: CountedEvent, event: ToolResultRecorded) -> None:
        window = state.window
        start = state.owners.pop(event.call_id, None)
        index = None if start is None else window.index.get(start)
        if index is None:
            window.removed.append(
                Removed(
                    first=counted.position,
                    last=counted.position,
                    action="dropped",
                    rule="orphan-result",
                    messages=1,
                    tokens=0,
                )
            )
            return
        group = window.groups[index]
        entry = self.entries.result(counted, event, head=group.head)
        if self._over_cap(entry):
            entry = self._with_cut(entry, self.capped.result(counted, event, head=group.head))
        call_id = event.call_id
        pending = tuple(p for p in group.pending if p.call_id != call_id)
        add_result(window, index, entry, state.pending_tokens, pending)
        if group.head:
            state.head_tokens += window.groups[index].tokens - group.tokens
            state.head_end = max(state.head_end, counted.position)
            if state.head_tokens > self.budget.head_tokens:
                state.head_open = False
                if self.policy.window.head_cap_strict:
                    leave_head(state, index)

    def _summary(self, state: RenderState, counted: CountedEvent, event: SummaryRecorded) -> None:
        config = self.policy.summary
        ref = SummaryRef(
            summary_id=event.summary_id,
            covers_from=event.covers_from,
            covers_through=event.covers_through,
            produced_at=event.produced_at,
            content=event.content,
            tokens=0,
        )
        ref = msgspec.structs.replace(
            ref,
            tokens=counted.tokens[0]
            + summary_framing(self.counter.count, ref.covers_from, ref.covers_through),
        )
        if not config.enabled or event.withheld or not config.fits(ref, self.budget):
            return  # a withheld summary lost what the card holds: recorded, never applied
        if config.mode == "latest":  # kept: those reaching further, and (bounded by room) smaller ones
            state.available = [
                s
                for s in state.available
                if s.covers_through > ref.covers_through
                or (config.latest_within_room and s.tokens < ref.tokens)
            ]
        state.available.append(ref)
        if (config.on_arrival or event.meta.get(FORK_START) is True) and select_summaries(
            config,
            state.available,
            state.head_end,
            shown_room(config, state, self.budget),
        ) != state.window.summaries:
            self._run(state, "summary", (self.summary, self.guarantee))
        self._maybe_compact(state)

    def _refresh_card(self, state: RenderState, *, estimate: bool = False, limit: int | None = None) -> None:
        """Rebuild the card's text from its state and the window, within its cap and the room left.

        With ``estimate`` (before the reducers run) the room left is not checked and the card is
        counted at its whole cap: that is what the reducers make room for (the card grows with what
        they evict; counted at its size before them, it left the context above the low-water mark
        after each compaction, so the next one came sooner: ADR 26). The refresh after them fits what
        is left under the target (or under ``limit``, e.g. the low-water mark).
        """
        window = state.window
        cap = self.policy.card.cap(self.budget)
        ceiling = self.budget.target if limit is None else limit
        room = cap if estimate else ceiling - (state.total - window.card_tokens)
        newest = window.groups[-1].start if window.groups else None
        pending = [  # the newest step's calls are the last thing the context shows: not repeated here
            f"{p.tool_name} {p.call_id} (seq {g.start})"
            for g in window.groups
            if g.start != newest
            for p in g.pending
        ]
        text, size = fit_card(
            state.card,
            window,
            state.position,
            pending,
            cap=min(cap, room) - MESSAGE_OVERHEAD,
            count=self.counter.count,
            first=self.card_view,
            at_least=self.at_least,
            history=self._history_note,
        )
        tokens = size + MESSAGE_OVERHEAD if text else 0
        if estimate and text:  # reserve the whole cap: the card refreshed after the reducers may fill it
            tokens = max(tokens, cap)
        window.card_after = 0
        for group in window.groups[:-1]:  # never after the newest: the context ends with what it answers
            if not (group.head or group.is_user):
                break
            window.card_after = group.start
        window.tokens += tokens - window.card_tokens
        window.card, window.card_tokens = text, tokens

    # -- compaction points -------------------------------------------------------------------

    def _maybe_compact(self, state: RenderState, event: AnyEvent | None = None) -> None:
        budget = self.budget
        if self._cache_expiry and event is not None and cache_expired(budget, state, event):  # cache_aware.py
            self._run(state, "tokens", self.pipeline)
            return
        total = state.total
        high = self._high_mark
        if total > high and (state.after_compaction <= high or total > self._target):  # else stuck above it
            self._run(state, "tokens", self.pipeline)
            return
        cap = self._tool_cap
        if cap is not None and state.window.tool_tokens > cap and state.after_tool <= cap:
            self._run(state, "tool_tier", self.pipeline)

    def _run(self, state: RenderState, reason: str, reducers: tuple[Reducer, ...]) -> None:
        state.reason = reason
        window = state.window
        card = self.policy.card
        if card.enabled:  # the reducers make room for the card at its cap; refreshed after them
            self._refresh_card(state, estimate=True)
        for reducer in reducers:
            window, state = reducer.reduce(window, self.budget, state)
        state.window = window
        if card.enabled:
            self._refresh_card(state)
            for _ in range(2):  # the card grew with what was just evicted: evict down to low water again
                if reason != "tokens" or state.total <= self.budget.low_mark:
                    break
                state.window, state = self.guarantee.reduce(state.window, self.budget, state)
                self._refresh_card(state)

        state.reason = ""
        state.compactions += 1
        state.after_compaction = state.total
        state.after_tool = window.tool_tokens
