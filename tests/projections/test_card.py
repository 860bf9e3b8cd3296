"""The session-state card: what it keeps, that it fits its cap, and that it never breaks the cached prefix."""

from __future__ import annotations

import json
import os

import pytest
from contextledger.domain.content import InlineText
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    SessionStarted,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.counting import count_context
from contextledger.projections.fold import Projector
from contextledger.projections.ingest import PENDING_TEXT
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS
from contextledger.projections.shell_files import files_of_call, files_of_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_helpers import Builder, Words, count_all, orphans, policies, resolve, sessions, stable_part

LONG = os.environ.get("CONTEXTLEDGER_LONG") == "1"
WORDS = Words()


@pytest.mark.parametrize(
    ("command", "changed"),
    [
        ('sed -i "s/old/new/g" src/app.py', "src/app.py"),
        ("sed -i.bak -e 's/a/b/' -e 's/c/d/' lib/util.py", "lib/util.py"),
        ("cat > notes/plan.md <<'EOF'\nline one > not a file\nEOF", "notes/plan.md"),
        ("patch -p1 <<EOF\n--- a/src/core.py\n+++ b/src/core.py\n@@ -1 +1 @@\n-x\n+y\nEOF", "src/core.py"),
        ("python - <<'PY'\nopen('conf/settings.ini', 'w').write('x')\nPY", "conf/settings.ini"),
        (
            'python3 - <<EOF\nfrom pathlib import Path\nPath("out/data.json").write_text("{}")\nEOF',
            "out/data.json",
        ),
        ("echo done | tee -a build.log", "build.log"),
        ("cd /repo && mv old_name.py new_name.py", "new_name.py"),
        ("cd /repo && mv old_name.py new_name.py", "old_name.py"),
        ("cp template.cfg deploy.cfg", "deploy.cfg"),
        ("rm -rf build/ dist/", "dist/"),
        ("printf 'x' >> logs/run.txt 2>/dev/null", "logs/run.txt"),
        ("perl -pi -e 's/a/b/' setup.cfg", "setup.cfg"),
        ("git mv docs/a.md docs/b.md", "docs/b.md"),
    ],
)
def test_shell_edits_are_files_changed(command, changed):
    """Each common shell form of an edit names its file among the files changed."""
    touches = files_of_command(command)
    assert changed in touches.changed
    assert "/dev/null" not in touches.changed


def test_shell_reads_are_not_changes():
    """Reading commands (cat, grep, sed without -i) change no file; a heredoc body is not a command."""
    touches = files_of_command("cat src/a.py | grep -n TODO src/b.py && sed -n 1,20p src/c.py")
    assert touches.changed == ()
    assert set(touches.read) == {"src/a.py", "src/b.py", "src/c.py"}
    heredoc = files_of_command("cat > x.txt <<EOF\nrm -rf everything/\nEOF")
    assert heredoc.changed == ("x.txt",)


@pytest.mark.parametrize(
    ("command", "read"),
    [
        ('grep -n -A 20 "def foo" src/a.py', ["src/a.py"]),
        ("grep -rn -B 3 --include '*.py' TODO src/ tests/", ["src/", "tests/"]),
        ("grep -E 'a|b' -m 5 notes.txt", ["notes.txt"]),
        ("grep -e pattern -e other lib/b.py", ["lib/b.py"]),
        ("rg -n -C 2 -g '*.ts' --type py needle app/", ["app/"]),
        ("rg -t py -- -pattern src/x.py", ["src/x.py"]),
        ("ag --depth 2 -A 4 handler web/", ["web/"]),
        ("ack --type python -C 1 parse lib/", ["lib/"]),
        ("grep -n TODO", []),
    ],
)
def test_search_patterns_and_option_values_are_not_files_read(command, read):
    """grep/rg/ag/ack: the pattern and each option's value are not files read; only path operands are."""
    touches = files_of_command(command)
    assert list(touches.read) == read
    assert touches.changed == ()


def test_editor_tool_view_reads_and_create_changes():
    """An editor tool's `view` reads its path, `create`/`str_replace` change it; write tools change theirs."""
    assert files_of_call("str_replace_based_edit_tool", {"command": "view", "path": "/r/a.py"}).read == (
        "/r/a.py",
    )
    assert files_of_call("str_replace_editor", {"command": "str_replace", "path": "/r/a.py"}).changed == (
        "/r/a.py",
    )
    assert files_of_call("write_file", {"path": "b.py", "content": "x"}).changed == ("b.py",)
    assert files_of_call("read_file", {"path": "c.py"}).read == ("c.py",)


def _session(
    late_rule: str,
    steps: int,
    *,
    tool_words: int,
    shell_command: str | None = None,
    viewed: str | None = None,
    extra: list[AnyEvent] | None = None,
    rule_after: int = 0,
) -> list[tuple[int, AnyEvent]]:
    """A task, bash steps with big outputs, a late user rule (then ``extra``) after ``rule_after`` steps."""
    out: list[tuple[int, AnyEvent]] = [(1, SessionStarted(session_id="s", system_prompt="be brief"))]

    def add(event: AnyEvent) -> None:
        out.append((len(out) + 1, event))

    add(UserMessageAdded(content=InlineText("Fix the parser bug in the repository.")))
    add(AssistantMessageAdded(content=InlineText("I'll look at the code first.")))
    for i in range(steps):
        if i == rule_after:
            add(UserMessageAdded(content=InlineText(late_rule)))
            for event in extra or ():
                add(event)
        command = shell_command if (shell_command is not None and i == 1) else f"ls dir{i}"
        call = ToolCall(id=f"c{i}", name="bash", arguments=json.dumps({"command": command}))
        add(AssistantMessageAdded(content=InlineText(f"Step {i}: running a command."), tool_calls=(call,)))
        body = (
            viewed if (viewed is not None and i == 2) else " ".join(f"out{i}_{k}" for k in range(tool_words))
        )
        add(ToolResultRecorded(call_id=call.id, tool_name="bash", content=InlineText(body)))
    return out


def _renders(policy: Policy, session: list[tuple[int, AnyEvent]]):
    projector = Projector(policy, WORDS)
    state = projector.start()
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        yield state, projector.render(state, resolve)


def _small(name: str, total: int = 2_000) -> Policy:
    return Policy.parse({"base": name, "budget": {"total": total, "output_reserve": 100, "safety_margin": 0}})


@pytest.mark.parametrize("preset", list(PRESETS))
def test_shell_edit_appears_under_files_changed_in_the_card(preset):
    """A file edited with `sed -i` is listed under "Files changed" once its step left the verbatim context."""
    session = _session(
        "Please keep it short.", 40, tool_words=300, shell_command='sed -i "s/a/b/" src/parser.py'
    )
    state, context = list(_renders(_small(preset), session))[-1]
    card = [m for m in context.messages if m.kind == "card"]
    assert state.compactions > 0
    assert card, "no card rendered after compactions"
    changed = next(line for line in card[0].text.splitlines() if line.startswith("Files changed:"))
    assert "src/parser.py" in changed


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_todo_inside_a_viewed_file_is_never_pending_work(preset):
    """A `# TODO` and a checklist inside tool output (a file the agent viewed) never become the plan."""
    viewed = (
        "def f():\n    # TODO: rewrite everything in Rust\n    pass\n- [ ] delete the database\n- [ ] ship it"
    )
    session = _session("Please keep it short.", 40, tool_words=300, viewed=viewed)
    for _, context in _renders(_small(preset), session):
        for message in context.messages:
            if message.kind == "card":
                assert "rewrite everything in Rust" not in message.text
                assert "delete the database" not in message.text
                assert "plan/todo" not in message.text


def test_the_latest_todo_revision_is_in_the_card_whole():
    """A todo tool's latest call is the card's plan, every item with its status, once it left the window."""
    old = [{"content": "write the test", "status": "pending"}]
    todos = [
        {"content": "write the test", "status": "completed"},
        {"content": "fix the bug", "status": "pending"},
    ]
    extra: list[AnyEvent] = []
    for n, items in enumerate((old, todos)):
        call = ToolCall(id=f"t{n}", name="TodoWrite", arguments=json.dumps({"todos": items}))
        extra += [
            AssistantMessageAdded(content=None, tool_calls=(call,)),
            ToolResultRecorded(call_id=call.id, tool_name="TodoWrite", content=InlineText("ok")),
        ]
    session = _session("Use tabs.", 40, tool_words=300, extra=extra)
    _, context = list(_renders(_small("default"), session))[-1]
    card = next(m.text for m in context.messages if m.kind == "card")
    assert "- [x] write the test" in card
    assert "- [ ] fix the bug" in card
    assert "- [ ] write the test" not in card


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_long_todo_list_keeps_its_items_as_items_and_counts_the_rest(preset):
    """163 todo items are never collapsed into one line: listed one per line, the rest counted with a handle.

    A peer's summary "collapsed 163 items into one line". The card lists the latest revision's items one
    per line, in order, as many as its cap allows, and says exactly how many it left out and where to
    recall them.
    """
    items = [{"content": f"migrate module {i:03d}", "status": "pending"} for i in range(163)]
    call = ToolCall(id="t0", name="TodoWrite", arguments=json.dumps({"todos": items}))
    extra: list[AnyEvent] = [
        AssistantMessageAdded(content=None, tool_calls=(call,)),
        ToolResultRecorded(call_id=call.id, tool_name="TodoWrite", content=InlineText("ok")),
    ]
    session = _session("Use tabs.", 40, tool_words=300, extra=extra)
    listed_at = next(
        p for p, e in session if isinstance(e, AssistantMessageAdded) and e.tool_calls == (call,)
    )
    _, context = list(_renders(_small(preset, total=4_000), session))[-1]
    card = next(m.text for m in context.messages if m.kind == "card").splitlines()
    shown = [line for line in card if line.startswith("- [ ] migrate module")]
    assert shown == [f"- [ ] migrate module {i:03d}" for i in range(len(shown))]
    assert len(shown) >= 8
    assert f'- … {163 - len(shown)} more items: recall {{"position": {listed_at}}}' in card


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_call_still_in_flight_after_compactions_is_named_in_the_card(preset):
    """A call whose result has not come (a background agent) stays paired and is listed as in flight.

    Peers' compactions lost track of agents still running and dispatched a second one onto the same
    work. Here, forty steps and their compactions later, the call is still in the window with its
    placeholder result and the card names it, its tool, id and position: structured state, not prose.
    """
    call = ToolCall(id="bg1", name="spawn_agent", arguments=json.dumps({"task": "run the slow tests"}))
    session = _session(
        "Please keep it short.",
        40,
        tool_words=300,
        extra=[AssistantMessageAdded(content=InlineText("Starting the tests."), tool_calls=(call,))],
    )
    started = next(p for p, e in session if isinstance(e, AssistantMessageAdded) and e.tool_calls == (call,))
    state, context = list(_renders(_small(preset), session))[-1]
    assert state.compactions > 0
    [card] = [m.text for m in context.messages if m.kind == "card"]
    [line] = [x for x in card.splitlines() if x.startswith("Calls in flight:")]
    assert line == f"Calls in flight: spawn_agent bg1 (seq {started})"  # the finished calls are not
    [waiting] = [m for m in context.messages if m.role == "tool" and m.tool_call_id == "bg1"]
    assert waiting.text == PENDING_TEXT
    assert orphans(context) == []


@settings(
    max_examples=40 if LONG else 8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    preset=st.sampled_from(list(PRESETS)),
    rule_at=st.integers(0, 4),
    total=st.sampled_from([1_200, 1_500]),
    tool_words=st.integers(250, 400),
)
def test_constraints_from_a_late_user_message_survive_200_compactions(preset, rule_at, total, tool_words):
    """A rule the user states after the first message is in every context through 200+ compactions."""
    rule = f"Do not add dependencies; use Python 3.9 syntax only (rule {rule_at})."
    session = _session(rule, 700, tool_words=tool_words, rule_after=rule_at)
    rule_seq = next(s for s, e in session if isinstance(e, UserMessageAdded) and rule in _text(e))
    state = None
    for state, context in _renders(_small(preset, total), session):  # noqa: B007 - the last state
        if context.position >= rule_seq:
            assert any(rule in m.text for m in context.messages), f"rule lost at {context.position}"
        assert context.tokens <= context.budget
    assert state is not None
    assert state.compactions >= 200


def _text(event: UserMessageAdded) -> str:
    assert isinstance(event.content, InlineText)
    return event.content.text


@settings(max_examples=600 if LONG else 120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_card_never_breaks_the_cached_prefix_between_compaction_points(session, policy):
    """The card sits inside the stable prefix and its bytes change only at compaction points."""
    projector = Projector(policy, WORDS)
    state = projector.start()
    previous = None
    compactions = -1
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        try:
            context = projector.render(state, resolve)
        except PinnedOverBudgetError:
            previous = None
            continue
        cards = [i for i, m in enumerate(context.messages) if m.kind == "card"]
        assert len(cards) <= 1
        if cards:
            assert cards[0] < context.stable_prefix
            assert count_context(context, WORDS) == context.tokens <= context.budget
            assert context.messages[cards[0]].tokens <= policy.card.cap(projector.budget)
        assert orphans(context) == []
        if previous is not None and state.compactions == compactions:
            kept = stable_part(previous)
            assert context.messages[: len(kept)] == kept
            before = [m for m in previous.messages if m.kind == "card"]
            assert [m for m in context.messages if m.kind == "card"] == before
        previous, compactions = context, state.compactions


def test_tail_card_is_rewritten_at_the_end_of_every_context():
    """With placement "tail" the card is the last message and follows every event (never cached)."""
    policy = Policy.parse(
        {
            "base": "default",
            "budget": {"total": 2_000, "output_reserve": 100, "safety_margin": 0},
            "card": {"placement": "tail"},
        }
    )
    session = _session("Never use tabs.", 30, tool_words=300)
    contexts = [c for _, c in _renders(policy, session)]
    late = [c for c in contexts if c.position > 20]
    assert all(c.messages[-1].kind == "card" for c in late)
    assert len({c.messages[-1].text for c in late}) > 1
    assert all(c.tokens <= c.budget for c in contexts)


def test_disabled_card_renders_as_before():
    """`card.enabled = false` renders no card and the same messages as a policy without card tokens."""
    policy = Policy.parse(
        {
            "base": "default",
            "budget": {"total": 2_000, "output_reserve": 100, "safety_margin": 0},
            "card": {"enabled": False},
        }
    )
    for state, context in _renders(policy, _session("Use tabs.", 20, tool_words=300)):
        assert all(m.kind != "card" for m in context.messages)
        assert state.window.card_tokens == 0


def test_card_follows_the_head_and_the_summary_in_the_stable_prefix():
    """Layout: pinned head, latest summary, then the card, all inside the stable prefix; history after."""
    builder = Builder()
    builder.user(5)
    for _ in range(6):
        builder.step(30)
    builder.summary(2, 12, n=10, summary_id="s1")
    for _ in range(20):
        builder.step(60)
    policy = Policy.parse(
        {
            "budget": {"total": 1_500, "output_reserve": 0, "high_water": 0.9, "low_water": 0.5},
            "window": {"keep_first": 1},
            "summary": {"on_arrival": False},
        }
    )
    projector = Projector(policy, WORDS)
    context = projector.render(projector.fold(builder.counted(WORDS)), resolve)
    kinds = [m.kind for m in context.messages[: context.stable_prefix]]
    assert kinds[0] == "message"  # the pinned first task
    assert kinds[-2:] == ["summary", "card"]
    assert all(m.kind != "card" for m in context.messages[context.stable_prefix :])


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_card_follows_the_pinned_task_and_latest_request_so_they_stay_cached(preset):
    """The leading user messages (the task, the latest request) render before the card, never after it.

    They are pinned and survive every compaction; a card in front of them would turn each compaction
    into a cache miss on them too (the prefix would break right after the system prompt).
    """
    session = _session("Never touch the vendored files.", 40, tool_words=300, rule_after=0)
    fronts = set()
    for _, context in _renders(_small(preset), session):
        kinds = [(m.kind, m.sources) for m in context.messages]
        if ("card", ()) not in kinds:
            continue
        card = kinds.index(("card", ()))
        assert kinds[0] == ("message", (2,)), kinds[:3]  # the task first
        assert card < context.stable_prefix
        before = tuple(m.sources for m in context.messages[:card] if m.kind == "message")
        assert (4,) in before  # the late rule is the latest request: pinned, in front of the card
        fronts.add(before)
    assert len(fronts) == 1  # the same messages stay in front of the card at every compaction
