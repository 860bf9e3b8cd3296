"""Helpers for the projection tests: a word counter, random sessions and policies, invariant checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextledger.domain.content import InlineText, Text
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    SessionStarted,
    SummaryRecorded,
    ToolCall,
    ToolResultRecorded,
    ToolSchema,
    UserMessageAdded,
)
from contextledger.domain.ports import TokenCounter
from contextledger.projections.context import RenderedContext
from contextledger.projections.counting import CountedEvent, count_with
from contextledger.projections.policy import Policy
from hypothesis import event, target
from hypothesis import strategies as st

TOOLS = ("bash", "read_file", "search")


class Words:
    """A deterministic fake tokenizer: one token per whitespace-separated word."""

    name = "words"

    def count(self, text: str) -> int:
        """Return the number of words."""
        return len(text.split())

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return word counts."""
        return [self.count(t) for t in texts]


class RecordingWords(Words):
    """``Words`` without a lower bound, recording every text it is asked to count."""

    def __init__(self) -> None:
        """Start with no text counted."""
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        """Return the number of words; remember the text."""
        self.counted.append(text)
        return super().count(text)


def words(n: int, tag: str) -> str:
    """Return ``n`` words in lines of five, tagged so texts differ."""
    parts = [f"{tag}{i}" for i in range(n)]
    return "\n".join(" ".join(parts[i : i + 5]) for i in range(0, len(parts), 5))


def resolve(text: Text) -> str:
    """Resolve inline texts (the generated sessions hold no blobs)."""
    assert isinstance(text, InlineText)
    return text.text


_op = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 40)),
    st.tuples(st.just("assistant"), st.integers(0, 30), st.integers(0, 3)),
    st.tuples(st.just("step"), st.integers(0, 20), st.lists(st.integers(0, 80), min_size=1, max_size=3)),
    st.tuples(st.just("step"), st.integers(0, 20), st.lists(st.integers(0, 80), min_size=1, max_size=3)),
    st.tuples(st.just("step"), st.integers(0, 20), st.lists(st.integers(0, 80), min_size=1, max_size=3)),
    st.tuples(st.just("result"), st.integers(0, 60), st.integers(0, 10)),
    st.tuples(st.just("result"), st.integers(0, 60), st.integers(0, 10)),
    st.tuples(st.just("huge"), st.integers(300, 3000), st.integers(0, 10)),
    st.tuples(st.just("pin"), st.integers(0, 1000)),
    st.tuples(st.just("unpin"), st.integers(0, 1000)),
    st.tuples(st.just("summary"), st.integers(0, 1000), st.integers(0, 1000), st.integers(1, 80)),
    st.tuples(st.just("compacted"), st.integers(0, 1000), st.integers(1, 80)),
    st.tuples(st.just("compacted"), st.integers(0, 1000), st.integers(1, 80)),
)
"""Session operations; ``compacted`` is what the worker produces: a summary of an older span of the log."""


@st.composite
def sessions(draw: st.DrawFn, max_ops: int = 80) -> list[tuple[int, AnyEvent]]:  # noqa: C901, PLR0912 - a branch per op
    """Draw a valid session as (seq, event) pairs; summaries carry seq = produced_at."""
    ops = draw(st.lists(_op, min_size=min(12, max_ops), max_size=max_ops))
    system = words(draw(st.integers(0, 20)), "sys")
    tools = tuple(ToolSchema(name=t, description=f"the {t} tool") for t in TOOLS[: draw(st.integers(0, 3))])
    out: list[tuple[int, AnyEvent]] = [(1, SessionStarted(session_id="s", system_prompt=system, tools=tools))]
    seq = 1
    pending: list[tuple[str, str]] = []
    calls = 0
    for op in ops:
        kind = op[0]
        event: AnyEvent | None = None
        if kind == "user":
            event = UserMessageAdded(content=InlineText(words(op[1], f"u{seq}_")))
        elif kind == "assistant":
            made = []
            for _ in range(op[2]):
                calls += 1
                tool = TOOLS[calls % len(TOOLS)]
                made.append(ToolCall(id=f"call_{calls}", name=tool, arguments=f'{{"arg": "a{calls}"}}'))
            text = InlineText(words(op[1], f"a{seq}_")) if op[1] or not made else None
            event = AssistantMessageAdded(content=text, tool_calls=tuple(made))
            pending += [(c.id, c.name) for c in made]
        elif kind == "step":
            made = []
            for _ in op[2]:
                calls += 1
                made.append(ToolCall(id=f"call_{calls}", name=TOOLS[calls % len(TOOLS)], arguments="{}"))
            seq += 1
            text = InlineText(words(op[1], f"a{seq}_")) if op[1] else None
            out.append((seq, AssistantMessageAdded(content=text, tool_calls=tuple(made))))
            for call, size in zip(made, op[2], strict=True):
                seq += 1
                result = ToolResultRecorded(
                    call_id=call.id, tool_name=call.name, content=InlineText(words(size, f"r{seq}_"))
                )
                out.append((seq, result))
            continue
        elif kind in ("result", "huge") and pending:
            call_id, tool = pending.pop(op[2] % len(pending) if op[2] > 7 else 0)  # mostly in order
            event = ToolResultRecorded(
                call_id=call_id,
                tool_name=tool,
                content=InlineText(words(op[1], f"r{seq}_")),
                is_error=op[2] == 3,
            )
        elif kind == "pin" and seq > 1:
            event = ItemPinned(position=1 + op[1] % seq)
        elif kind == "unpin" and seq > 1:
            event = ItemUnpinned(position=1 + op[1] % seq)
        elif kind == "summary" and seq > 1:
            first = 1 + op[1] % seq
            out.append((seq, _summary(len(out), seq, first, first + op[2] % (seq - first + 1), op[3])))
            continue
        elif kind == "compacted" and seq > 4:
            # The worker's shape: from after the first turn up to an older position, arriving late.
            out.append((seq, _summary(len(out), seq, 2, 3 + op[1] % (seq - 3), op[2])))
            continue
        if event is not None:
            seq += 1
            out.append((seq, event))
    return out


def _summary(number: int, seq: int, first: int, through: int, size: int) -> SummaryRecorded:
    """A summary artifact of ``first..through`` with ``size`` words, produced at ``seq``."""
    return SummaryRecorded(
        summary_id=f"sum{number}",
        session_id="s",
        covers_from=first,
        covers_through=through,
        content=InlineText(words(size, f"s{seq}_")),
        produced_at=seq,
    )


def count_all(session: list[tuple[int, AnyEvent]], counter: TokenCounter) -> list[CountedEvent]:
    """Count every event of a generated session."""
    return [count_with(counter, seq, event) for seq, event in session]


_fraction = st.floats(0.05, 1.0, allow_nan=False)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    """Draw a random valid policy with a small budget (in words)."""
    high = draw(st.floats(0.3, 1.0, allow_nan=False))
    low = draw(st.floats(0.1, 1.0, allow_nan=False)) * high
    budget: dict[str, Any] = {
        "total": draw(st.integers(250, 1500)),
        "output_reserve": draw(st.integers(0, 40)),
        "injection_reserve": draw(st.integers(0, 40)),
        "safety_margin": draw(st.integers(0, 20)),
        "high_water": high,
        "low_water": max(low, 0.01),
        "headroom": draw(st.none() | st.integers(0, 400)),
        "tool_results_cap": draw(st.none() | _fraction),
        "head_cap": draw(st.floats(0.05, 0.6, allow_nan=False)),
        "message_cap": draw(st.floats(0.05, 0.6, allow_nan=False)),
    }
    small = st.none() | st.integers(1, 6)
    rule = st.fixed_dictionaries(
        {"keep_turns": small, "keep_steps": small, "keep_last": small, "never_evict": st.booleans()}
    )
    retention = {
        "enabled": draw(st.booleans()),
        "default": draw(rule),
        "tools": draw(st.dictionaries(st.sampled_from(TOOLS), rule, max_size=2)),
    }
    truncation = {
        "enabled": draw(st.booleans()),
        "max_lines": draw(st.none() | st.integers(1, 20)),
        "max_tokens": draw(st.none() | st.integers(10, 200)),
    }
    summary = {
        "enabled": draw(st.sampled_from([True, True, True, False])),
        "mode": draw(st.sampled_from(["latest", "clip"])),
        "clip_first": draw(st.integers(0, 2)),
        "clip_last": draw(st.integers(1, 2)),
        "max_tokens": draw(st.none() | st.integers(10, 200)),
        "on_arrival": draw(st.booleans()),
        "clip_within_room": draw(st.booleans()),
        "latest_within_room": draw(st.booleans()),
    }
    window = {
        "keep_first": draw(st.integers(0, 3)),
        "keep_first_unit": draw(st.sampled_from(["turns", "steps"])),
        "keep_recent": draw(st.none() | st.integers(1, 12)),
        "keep_recent_unit": draw(st.sampled_from(["turns", "steps", "messages", "tokens"])),
        "scope_turns": draw(st.none() | st.integers(0, 4)),
        "head_cap_strict": draw(st.booleans()),
        "pin_whole_request": draw(st.booleans()),
    }
    guarantee = {"protect_newest": draw(st.booleans())}
    card = {  # the card in the stable prefix (the tail placement breaks the prefix by design)
        "enabled": draw(st.booleans()),
        "max_fraction": draw(st.floats(0.05, 0.5, allow_nan=False)),
        "max_tokens": draw(st.integers(20, 400)),
    }
    summary["exact_cover"] = draw(st.booleans())  # drawn last: the earlier draws stay those of before it
    data = {
        "name": "random",
        "budget": budget,
        "retention": retention,
        "truncation": truncation,
        "summary": summary,
        "window": window,
        "guarantee": guarantee,
        "card": card,
    }
    return Policy.parse(data)


def orphans(context: RenderedContext) -> list[str]:
    """Return every orphaned call or result of a rendered context (empty when all are paired)."""
    problems: list[str] = []
    open_calls: list[str] = []
    for i, message in enumerate(context.messages):
        if message.role == "tool" and message.kind != "injection":
            if message.tool_call_id not in open_calls:
                problems.append(f"result {message.tool_call_id} at {i} answers no preceding call")
            else:
                open_calls.remove(message.tool_call_id)
            continue
        if open_calls:
            problems.append(f"calls {open_calls} unanswered before message {i}")
            open_calls = []
        if message.role == "assistant":
            open_calls = [c.id for c in message.tool_calls]
    if open_calls:
        problems.append(f"calls {open_calls} unanswered at the end")
    return problems


def stable_part(context: RenderedContext) -> tuple[Any, ...]:
    """Return the messages up to the first pending-result placeholder (what later renders must keep)."""
    out = []
    for message in context.messages:
        if message.kind == "stub" and not message.sources:
            break
        out.append(message)
    return tuple(out)


class Builder:
    """Builds a session by hand: ``user``, ``step`` (assistant + results), ``pin``, ``summary``."""

    def __init__(self, system: str = "be brief") -> None:
        """Start a session with a system prompt."""
        self.events: list[tuple[int, AnyEvent]] = [(1, SessionStarted(session_id="s", system_prompt=system))]
        self.position = 1
        self.calls = 0

    def _add(self, event: AnyEvent) -> int:
        self.position += 1
        self.events.append((self.position, event))
        return self.position

    def user(self, n: int = 5) -> int:
        """Add a user message of ``n`` words; return its position."""
        return self._add(UserMessageAdded(content=InlineText(words(n, f"u{self.position + 1}_"))))

    def step(self, *results: int, tool: str = "bash", text: int = 3, answer: bool = True) -> int:
        """Add an assistant message calling ``tool`` once per result size, then the results."""
        calls = []
        for _ in results:
            self.calls += 1
            calls.append(ToolCall(id=f"call_{self.calls}", name=tool, arguments="{}"))
        start = self._add(
            AssistantMessageAdded(
                content=InlineText(words(text, f"a{self.position + 1}_")), tool_calls=tuple(calls)
            )
        )
        if answer:
            for call, size in zip(calls, results, strict=True):
                self.result(call.id, size, tool=tool)
        return start

    def result(self, call_id: str, size: int, *, tool: str = "bash") -> int:
        """Add the result of ``call_id`` with ``size`` words."""
        return self._add(
            ToolResultRecorded(
                call_id=call_id, tool_name=tool, content=InlineText(words(size, f"r{self.position + 1}_"))
            )
        )

    def pin(self, position: int) -> int:
        """Pin a position."""
        return self._add(ItemPinned(position=position))

    def unpin(self, position: int) -> int:
        """Unpin a position."""
        return self._add(ItemUnpinned(position=position))

    def summary(self, covers_from: int, covers_through: int, n: int = 10, summary_id: str = "sum") -> None:
        """Make a summary artifact available after the current position."""
        event = SummaryRecorded(
            summary_id=summary_id,
            session_id="s",
            covers_from=covers_from,
            covers_through=covers_through,
            content=InlineText("summary " + words(n - 1, "s")),
            produced_at=self.position,
        )
        self.events.append((self.position, event))

    def counted(self, counter: TokenCounter | None = None, upto: int | None = None) -> list[CountedEvent]:
        """Return the counted events up to position ``upto`` (summaries produced up to it included)."""
        chosen = [(s, e) for s, e in self.events if upto is None or s <= upto]
        return count_all(chosen, counter or Words())


class Exercise:
    """What one generated example exercised: renders, refusals, compactions, summaries shown.

    ``report`` tells hypothesis: ``event`` gives the share of examples that compact or show a summary
    in ``--hypothesis-show-statistics``; ``target`` steers generation towards them.
    """

    def __init__(self) -> None:
        """Nothing seen yet."""
        self.renders = 0
        self.pinned_over_budget = 0
        self.with_summary = 0
        self.compactions = 0

    def rendered(self, context: RenderedContext | None, compactions: int) -> None:
        """Count one render (None: refused as pinned over budget) at a state with ``compactions``."""
        self.renders += 1
        self.compactions = compactions
        if context is None:
            self.pinned_over_budget += 1
        elif context.summary_id is not None or any(m.kind == "summary" for m in context.messages):
            self.with_summary += 1

    @property
    def compacts(self) -> bool:
        """Whether the example reached at least one compaction point."""
        return self.compactions > 0

    @property
    def shows_summary(self) -> bool:
        """Whether at least one render of the example showed a summary."""
        return self.with_summary > 0

    def report(self) -> None:
        """Record this example's outcome as hypothesis events and targets."""
        event("example compacts" if self.compacts else "example never compacts")
        event("example renders a summary" if self.shows_summary else "example renders no summary")
        share = self.pinned_over_budget / self.renders if self.renders else 0.0
        event(f"renders refused as pinned over budget: {_bucket(share)}")
        target(float(min(self.compactions, 10)), label="compaction points (capped at 10)")
        target(float(min(self.with_summary, 10)), label="renders with a summary (capped at 10)")


def _bucket(share: float) -> str:
    """A share as one of five coarse buckets (hypothesis events are counted per distinct value)."""
    if share == 0:
        return "none"
    for limit in (0.25, 0.5, 0.75):
        if share <= limit:
            return f"<= {limit:.0%}"
    return "> 75%"
