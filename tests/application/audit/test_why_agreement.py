"""`why`'s first-left call is the one a plain string search over the re-rendered payloads finds, everywhere.

Run as a script to print the agreement count (all 200 facts per transcript and preset)::

    .venv/bin/python tests/application/audit/test_why_agreement.py [--facts 200]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import contextledger
import pytest
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.importers.service import import_file
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.forensics import why
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import (
    AssistantMessageAdded,
    SessionStarted,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.context import RenderedContext
from contextledger.projections.presets import PRESETS

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
FILES = sorted(p for p in TRANSCRIPTS.iterdir() if "__" in p.name)
BUDGET = 16_000
PRESET_NAMES = ("default", "blocks")
LONG = os.environ.get("CONTEXTLEDGER_LONG") == "1"
FACTS = 200 if LONG else 16
"""Facts per transcript and preset: all 200 under CONTEXTLEDGER_LONG=1 (and from the script)."""
_SKIPPED_KEYS = {"role", "tool_call_id", "id", "type"}


def _strings(value: Any, key: str = "") -> Iterator[str]:
    """Every string of a wire payload's messages, keys naming roles and ids left out."""
    if isinstance(value, str):
        if key not in _SKIPPED_KEYS:
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)


def _raw_texts(ledger: contextledger.Ledger, event: Any) -> list[str]:
    """An event's texts as logged (independent of the search code): content, reasoning, tool calls."""
    if isinstance(event, SessionStarted):
        return [event.system_prompt]
    if isinstance(event, UserMessageAdded | ToolResultRecorded):
        return [ledger.text(event.content)]
    if isinstance(event, AssistantMessageAdded):
        calls = [f"{c.name}({c.arguments})" for c in event.tool_calls]
        return [ledger.text(event.content), event.reasoning or "", *calls]
    return []


class Session:
    """An imported transcript: its events' texts and, per preset, each call's payload as one folded string."""

    def __init__(self, ledger: contextledger.Ledger, session_id: str) -> None:
        self.ledger = ledger
        self.session_id = session_id
        self.texts = {r.position: _raw_texts(ledger, r.event) for r in ledger.events(session_id)}
        self.calls = [
            r.position - 1 for r in ledger.events(session_id) if isinstance(r.event, AssistantMessageAdded)
        ]
        self.payloads: dict[str, list[tuple[int, str, list[str]]]] = {}
        renderer = Renderer(ledger, tokenizer="heuristic")
        for name in PRESET_NAMES:
            rendered = []
            for at in self.calls:
                context = renderer.render(session_id, PRESETS[name], at=at, budget=BUDGET)
                heads = [m.text for m in context.messages if m.kind == "truncated"]
                folded = "\x00".join(_strings(to_openai(context)["messages"])).casefold()
                rendered.append((at, folded, heads))
            self.payloads[name] = rendered

    def expected(self, preset: str, fact: str) -> int | None:
        """The first call after the fact entered the log whose payload does not hold it (plain search)."""
        needle = fact.casefold()
        entered = next(p for p, texts in self.texts.items() if any(needle in t.casefold() for t in texts))
        return next(
            (at for at, folded, _ in self.payloads[preset] if at >= entered and needle not in folded), None
        )


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if 16 <= len(line.strip()) <= 160]


def choose_facts(session: Session, preset: str, count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` facts (text, why chosen): a third repeated texts, a third kept heads, the rest any line."""
    rng = random.Random(seed)
    owners: dict[str, set[int]] = {}
    for position, texts in session.texts.items():
        for text in texts[:1]:
            for line in _lines(text):
                owners.setdefault(line, set()).add(position)
    every = sorted(owners)
    repeated = sorted(line for line, at in owners.items() if len(at) > 1)
    heads = sorted(
        {line for _, _, kept in session.payloads[preset] for text in kept for line in _lines(text)}
        & set(every)
    )
    chosen: dict[str, str] = {}
    for kind, pool in (("repeated", repeated), ("kept-head", heads), ("any", every)):
        share = count // 3 if kind != "any" else count - len(chosen)
        for line in rng.sample(pool, min(share, len(pool))):
            chosen.setdefault(line, kind)
    for line in rng.sample(every, len(every)):  # too few repeated or kept heads: fill with any line
        if len(chosen) >= count:
            break
        chosen.setdefault(line, "any")
    return list(chosen.items())[:count]


def agreement(path: Path, count: int) -> Counter[str]:
    """Compare why with the plain search for ``count`` facts per preset; return agreed/disagreed counts.

    A transcript holding several sessions shares the facts among them.
    """
    tally: Counter[str] = Counter()
    with contextledger.open_ledger("memory://") as ledger:
        assert import_file(ledger, path).ok
        infos = [i for i in ledger.sessions() if ledger.version(i.session_id) > 1]
        renderer = Renderer(ledger, tokenizer="heuristic")
        for number, info in enumerate(infos):
            session = Session(ledger, info.session_id)
            share = count // len(infos) + (number < count % len(infos))
            for index, preset in enumerate(PRESET_NAMES):
                for fact, kind in choose_facts(session, preset, share, seed=index):
                    answer = why(
                        ledger,
                        info.session_id,
                        fact,
                        renderer=renderer,
                        policy=PRESETS[preset],
                        budget=BUDGET,
                    )
                    expected = session.expected(preset, fact)
                    same = answer.first_left_position == expected
                    tally["agree" if same else "disagree"] += 1
                    tally[f"{kind}:{'agree' if same else 'disagree'}"] += 1
                    if not same:
                        found = answer.first_left_position
                        tally[f"! {path.name} {preset} {fact!r}: why {found}, search {expected}"] += 1
    return tally


@pytest.mark.parametrize("path", FILES, ids=[p.name.split("__")[0] + "/" + p.stem[-12:] for p in FILES])
def test_why_first_left_call_is_the_first_payload_without_the_text(path: Path) -> None:
    """Seeded facts (repeated texts, lines in kept heads, any line), at 16k, default and blocks presets."""
    tally = agreement(path, FACTS)
    assert tally["disagree"] == 0, [k for k in tally if k.startswith("!")]
    assert tally["agree"] > 0


def main() -> None:
    """Print the agreement count of every transcript, and the total."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=200)
    args = parser.parse_args()
    total: Counter[str] = Counter()
    for path in FILES:
        tally = agreement(path, args.facts)
        total.update(tally)
        sys.stdout.write(f"{path.name}: {tally['agree']} agree, {tally['disagree']} disagree\n")
        sys.stdout.flush()
        for key in (k for k in tally if k.startswith("!")):
            sys.stdout.write(f"    {key}\n")
    kinds = ", ".join(f"{k}={v}" for k, v in sorted(total.items()) if ":" in k and not k.startswith("!"))
    sys.stdout.write(f"total: {total['agree']} of {total['agree'] + total['disagree']} agree ({kinds})\n")
    sys.exit(0 if total["disagree"] == 0 else 1)


if __name__ == "__main__":
    main()


def _record_every_call(ledger: Ledger) -> tuple[str, Session, list[RenderedContext]]:
    """Import pylint-6528 and record each of its model calls under the default preset; return the contexts."""
    assert import_file(ledger, TRANSCRIPTS / "mini-swe-agent__pylint-dev__pylint-6528.traj.json").ok
    [info] = ledger.sessions()
    session = Session(ledger, info.session_id)
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    contexts = []
    for at in session.calls:
        context = renderer.render(info.session_id, PRESETS["default"], at=at, budget=BUDGET)
        recorder.record(context, PRESETS["default"], payload=to_openai(context), call_id=f"c{at}")
        contexts.append(context)
    return info.session_id, session, contexts


def test_why_over_recorded_calls_agrees_too():
    """Recorded calls (read from records, rendered again only when a record cannot decide) agree too."""
    with contextledger.open_ledger("memory://") as ledger:
        session_id, session, _ = _record_every_call(ledger)
        facts = choose_facts(session, "default", FACTS * 2, seed=7)
        sources: Counter[str] = Counter()
        for fact, _ in facts:
            answer = why(ledger, session_id, fact, renderer=Renderer(ledger, tokenizer="heuristic"))
            sources[answer.calls_source] += 1
            assert answer.calls_differ == 0
            assert answer.first_left_position == session.expected("default", fact), fact
        assert sources["recorded"] >= len(facts) * 3 // 4  # a fact entering after the last call has none


def test_why_over_recorded_calls_sees_a_text_only_the_card_still_quotes():
    """A failed result's first line, quoted by the session-state card after the result leaves, stays "in".

    The record's dispositions say the result was stubbed; only the card (rendered again) still shows
    the line, so a recorded call must not be decided from its dispositions when its policy keeps a card.
    """
    fact = "The last command <command>pylint --recursive=y .</command> timed out and has been killed."
    with contextledger.open_ledger("memory://") as ledger:
        session_id, session, contexts = _record_every_call(ledger)
        cards = [m.text for context in contexts for m in context.messages if m.kind == "card"]
        assert any(fact.casefold() in card.casefold() for card in cards)  # the case under test
        answer = why(ledger, session_id, fact, renderer=Renderer(ledger, tokenizer="heuristic"))
        assert answer.calls_source == "recorded"
        assert answer.first_left_position == session.expected("default", fact) is None
