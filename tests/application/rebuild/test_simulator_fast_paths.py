"""`simulate`'s fast paths give what their definitions give: the same JSON, units, prefix keys and texts."""

from __future__ import annotations

import hashlib
from pathlib import Path

import contextledger
import msgspec
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.audit.session_replay import replay_calls
from contextledger.application.rebuild.fact_tracking import _context_text, _NormalizedParts
from contextledger.application.rebuild.simulator import Simulation, simulate
from contextledger.application.render.renderer import Renderer
from contextledger.domain.content import InlineText, content_address
from contextledger.domain.events import ToolSchema
from contextledger.projections.cache_metrics import UnitMemo, units_of
from contextledger.projections.card_config import CardConfig
from contextledger.projections.context import RenderedContext, RenderedMessage, RenderedToolCall
from contextledger.projections.counting import counted_texts
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS
from contextledger.projections.provider_cache import _chain, provider_cache
from hypothesis import given, settings
from hypothesis import strategies as st

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
NAMES = (
    "mini-swe-agent__django__django-16560.traj.json",
    "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl",
    "aider__afi-core.aider.chat.history.md",
)
FACTS = ("seems like a typo in the description", "error", "no such text 42")
BEFORE_SHA256 = "4d112d550d5e5bba7e6b62f3790237a327712a197e3b8570e118d5d66419ea9e"
"""This simulation's JSON (568 calls) as the code before the fast paths (ADR 0038) wrote it, but evictions.

Since ADR 0087 the evictions count each position once, at the first call that shows it evicted, by its
fate: 923 where the decisions' ranges counted 1,022 (verbatim calls of stubbed groups, a pinned first turn
inside a summary's span, a position once per rule that took it). Only the calls' ``evictions`` and the
totals' differ from that code's (``3ac34008...``).

Since stop 75 the extractive summaries and their checks differ (a file edited then read stays changed, a
passing result that mentions an error is none, a shell's own failure words are one, a clip's mark is no fact,
a done todo item is not owed): with the summarizer, fidelity and card check of ``671aacd`` this simulation
still hashes ``ca96f737...``. Since stop 76 an extractive summary's Pending Work keeps each todo item's mark
(``[~]`` in progress) and, past its limit, the items in progress and the list's head, counting the rest: with
the summarizer of ``a8c5c72`` this simulation hashed ``b4e7f1db...``. Since stop 77 its Completed Work keeps
the most changed files (counting each file's changes over the rounds) and names a removed file ``deleted``:
with the summarizer of ``57402ad`` this simulation hashed ``ec496bf2...``."""


def _source():
    ledger = contextledger.open_ledger("memory://")
    for name in NAMES:
        assert import_file(ledger, TRANSCRIPTS / name).ok
    return ledger


def _as_before(policy: Policy) -> Policy:
    """The preset as it was when the golden was written: no history note, the head as it was (ADRs 90, 92)."""
    window = policy.window.model_copy(update={"head_cap_strict": False, "pin_whole_request": False})
    summary = policy.summary.model_copy(
        update={"clip_within_room": False, "latest_within_room": False, "exact_cover": False}
    )
    return policy.model_copy(update={"card": CardConfig(), "window": window, "summary": summary})


def _simulation(source) -> Simulation:
    return simulate(
        source,
        [info.session_id for info in source.sessions()],
        [("default", _as_before(PRESETS["default"])), ("nexus", _as_before(PRESETS["nexus"]))],
        cache=provider_cache("anthropic", "5m"),
        new_scratch=lambda: contextledger.open_ledger("memory://"),
        budget=32_000,
        make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
        facts=FACTS,
    )


def test_simulation_json_is_byte_identical_to_before_the_fast_paths_cold_and_warm():
    """Three real sessions, two policies, facts: the JSON equals the one recorded before the fast paths.

    On the first run (nothing counted yet) and on a second over the same source (every token count
    found in the source's store).
    """
    source = _source()
    first = msgspec.json.encode(_simulation(source))
    second = msgspec.json.encode(_simulation(source))
    assert hashlib.sha256(first).hexdigest() == BEFORE_SHA256
    assert second == first


def test_renders_reusing_messages_per_entry_equal_fresh_renders_at_every_call():
    """At every call point of a real session the renderer's context equals a fresh render.

    The renderer reuses the last render's messages by entry; ``Projector.render`` of the same state
    builds them all: both encode byte for byte the same.
    """
    source = contextledger.open_ledger("memory://")
    assert import_file(source, TRANSCRIPTS / NAMES[0]).ok
    [info] = source.sessions()
    policy = PRESETS["nexus"]
    with contextledger.open_ledger("memory://") as scratch:
        renderer = Renderer(scratch)
        projector = renderer.projector(policy, budget=8_000)
        compared = 0
        for _call in replay_calls(
            source, info.session_id, scratch, policy, budget=8_000, make_summarizer=None
        ):
            fast = renderer.render(info.session_id, policy, budget=8_000)
            slow = projector.render(renderer.state(info.session_id, projector), renderer.reader.resolve)
            assert msgspec.json.encode(fast) == msgspec.json.encode(slow)
            compared += 1
    assert compared > 100


_texts = st.text(alphabet=st.sampled_from("ab ß\u0130Σς\n\t\x1c\u2028x"), max_size=12)
_calls = st.lists(
    st.builds(RenderedToolCall, id=st.sampled_from("12"), name=st.sampled_from("fg"), arguments=_texts),
    max_size=2,
).map(tuple)
_messages = st.builds(
    RenderedMessage,
    role=st.sampled_from(["user", "assistant", "tool"]),
    text=_texts,
    tokens=st.integers(0, 50),
    kind=st.sampled_from(["message", "stub"]),
    tool_calls=_calls,
    tool_call_id=st.none() | st.sampled_from(["1", "2"]),
    is_error=st.booleans(),
)


_TOOLS = (ToolSchema(name="f", parameters={"type": "object", "properties": {"x": {"type": "string"}}}),)


def _context(system: str, messages: list[RenderedMessage]) -> RenderedContext:
    return RenderedContext(
        session_id="s",
        position=1,
        policy="p",
        tokenizer="t",
        system=system,
        system_tokens=3,
        tools=_TOOLS if system == "other" else (),
        tools_tokens=0,
        messages=tuple(messages),
        stable_prefix=0,
        tokens=0,
        budget=100,
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["sys", "other"]), st.lists(st.integers(0, 5), max_size=6)), max_size=6
    ),
    st.lists(_messages, min_size=6, max_size=6),
)
def test_unit_memo_and_prefix_chain_equal_their_definitions_over_consecutive_contexts(prompts, pool):
    """``UnitMemo`` and ``_chain`` extending the last prompt's keys equal their definitions.

    Over consecutive contexts sharing message objects (and equal copies of them), with and without
    tool schemas (whose JSON-schema dicts cannot be dictionary keys).
    """
    memo = UnitMemo()
    known = None
    for system, picks in prompts:
        messages = [pool[i] if i % 2 else msgspec.structs.replace(pool[i]) for i in picks]
        ctx = _context(system, messages)
        units = units_of(ctx, memo)
        assert units == units_of(ctx)
        keys = _chain(units, known)
        assert keys == _chain(units)
        known = (units, keys)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_texts, st.lists(_messages, max_size=4)), max_size=5))
def test_normalized_parts_equal_the_normalized_whole_context(contexts):
    """The fact tracker's per-part normalization joins to ``_context_text`` of each context.

    In any order of contexts, with casefold expansions, Unicode whitespace and empty parts.
    """
    parts = _NormalizedParts()
    for system, messages in contexts:
        ctx = _context(system, messages)
        assert parts.text(ctx) == _context_text(ctx)


def test_counts_of_a_simulation_land_in_the_source_store_once_it_is_done():
    """The replays' token counts are written to the source ledger's store at the end (one batch).

    A later simulation, of any policy, finds them there instead of tokenizing again.
    """
    source = contextledger.open_ledger("memory://")
    assert import_file(source, TRANSCRIPTS / NAMES[1]).ok
    [info] = source.sessions()
    texts = [text for recorded in source.events(info.session_id) for text in counted_texts(recorded.event)]
    keys = [content_address(t.text) for t in texts if isinstance(t, InlineText)]
    assert keys
    assert source.ports.token_counts.load_token_counts("cl100k_base", keys) == {}
    simulate(
        source,
        [info.session_id],
        [("default", PRESETS["default"])],
        cache=provider_cache("anthropic", "5m"),
        new_scratch=lambda: contextledger.open_ledger("memory://"),
    )
    stored = source.ports.token_counts.load_token_counts("cl100k_base", keys)
    assert len(stored) > len(set(keys)) // 2  # every event a call showed (not those after the last)
