"""The extractive summarizer: deterministic, seed 004's template, verbatim facts, bounded across rounds."""

from __future__ import annotations

import json

from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer, _Limits
from contextledger.adapters.tokenizers import get_counter
from contextledger.domain.events import ToolCall
from contextledger.projections.fidelity import facts_of, fidelity
from contextledger.projections.summary_requests import SpanEntry, SummaryRequest

TASK = "Fix the failing money tests in src/money.py; keep the public API."


def _call(position: int, name: str, **arguments: object) -> SpanEntry:
    call = ToolCall(id=f"c{position}", name=name, arguments=json.dumps(arguments))
    return SpanEntry(position=position, role="assistant", text="", tool_calls=(call,))


def _span(start: int = 2) -> tuple[SpanEntry, ...]:
    return (
        SpanEntry(position=start, role="user", text=TASK),
        _call(start + 1, "read_file", path="src/money.py"),
        SpanEntry(position=start + 2, role="tool", text="def add(a, b): ...", tool_name="read_file"),
        _call(start + 3, "bash", command="pytest tests/test_money.py -x"),
        SpanEntry(
            position=start + 4,
            role="tool",
            text="FAILED tests/test_money.py::test_add - AssertionError: 0.30000000000000004",
            tool_name="bash",
            is_error=True,
        ),
        SpanEntry(
            position=start + 5,
            role="assistant",
            text="The cause is float arithmetic. I'll use decimal.Decimal instead of float.",
        ),
        _call(
            start + 6,
            "TodoWrite",
            todos=[
                {"content": "Switch Money to Decimal", "status": "completed"},
                {"content": "Add a rounding test for 0.005", "status": "pending"},
            ],
        ),
    )


def _request(entries, *, previous=None, round_=1, max_tokens=800) -> SummaryRequest:
    return SummaryRequest(
        session_id="s",
        covers_from=entries[0].position,
        covers_through=entries[-1].position,
        round=round_,
        original_task=TASK,
        entries=tuple(entries),
        previous=previous,
        max_tokens=max_tokens,
    )


def test_same_request_gives_the_same_text():
    """Deterministic: no clock, no randomness, no model."""
    summarizer = ExtractiveSummarizer()
    assert summarizer.summarize(_request(_span())).text == summarizer.summarize(_request(_span())).text


def test_template_sections_hold_the_verbatim_facts():
    """Original task verbatim, touched file, command run, error and its resolution, decision, open todo."""
    text = ExtractiveSummarizer().summarize(_request(_span())).text
    assert text.startswith("## Session Summary (Compaction Round 1)")
    for section in ("Original Task", "Completed Work", "Commands Run", "Key Technical Decisions"):
        assert f"### {section}" in text
    assert TASK in text
    assert "| src/money.py | read_file |" in text
    assert "`pytest tests/test_money.py -x`" in text
    assert "FAILED tests/test_money.py::test_add" in text
    assert "decimal.Decimal" in text
    assert "- [ ] Add a rounding test for 0.005" in text
    assert "Switch Money to Decimal" not in text.split("### Pending Work")[1]


def test_paths_and_commands_of_the_span_all_survive():
    """Fidelity of paths and commands is complete for a span within the section limits."""
    entries = _span()
    text = ExtractiveSummarizer().summarize(_request(entries)).text
    kept = fidelity(facts_of(entries), text)
    assert kept.paths == 1.0
    assert kept.commands == 1.0
    assert "src/money.py" in facts_of(entries).paths


def test_rounds_integrate_without_growth():
    """Round N = round N-1's text + the new span; size stays under the bound over many rounds."""
    summarizer = ExtractiveSummarizer()
    counter = get_counter("cl100k_base")
    previous = None
    sizes = []
    for round_ in range(1, 9):
        start = 2 + (round_ - 1) * 40
        entries = [*_span(start)]
        entries += [_call(start + 10 + i, "edit_file", path=f"src/module_{round_}_{i}.py") for i in range(25)]
        draft = summarizer.summarize(_request(entries, previous=previous, round_=round_, max_tokens=600))
        sizes.append(counter.count(draft.text))
        previous = draft.text
    assert max(sizes) <= 600
    assert sizes[-1] <= sizes[1] * 1.5  # bounded, not growing round over round
    assert TASK in previous
    assert "src/module_8_24.py" in previous  # the newest files are kept


def test_a_tiny_bound_is_still_respected():
    """Even a bound far below the natural size gives a text within it."""
    draft = ExtractiveSummarizer().summarize(_request(_span(), max_tokens=60))
    assert get_counter("cl100k_base").count(draft.text) <= 60


def test_a_todo_inside_a_viewed_file_is_never_pending_work():
    """A `# TODO` or a checklist inside tool output (a file the agent read) is not its pending work."""
    entries = (
        SpanEntry(position=2, role="user", text=TASK),
        _call(3, "read_file", path="src/legacy.py"),
        SpanEntry(
            position=4,
            role="tool",
            text="def f():\n    # TODO: rewrite everything in Rust\n    pass\n- [ ] delete the database",
            tool_name="read_file",
        ),
        SpanEntry(position=5, role="assistant", text="Noted. TODO: add a test for f"),
    )
    text = ExtractiveSummarizer().summarize(_request(entries)).text
    pending = text.split("### Pending Work")[1].split("###")[0]
    assert "Rust" not in pending
    assert "delete the database" not in pending
    assert "- [ ] add a test for f" in pending  # the assistant's own TODO is its work


def test_shell_edits_are_files_touched():
    """Edits made through shell commands (sed -i, heredoc, patch, python - <<) are listed as changed files."""
    commands = [
        'sed -i "s/float/Decimal/" src/money.py',
        "cat > tests/test_round.py <<'EOF'\ndef test_round(): ...\nEOF",
        "patch -p1 <<EOF\n--- a/src/api.py\n+++ b/src/api.py\n@@ -1 +1 @@\n-a\n+b\nEOF",
        "python - <<'PY'\nopen('setup.cfg', 'w').write('[x]')\nPY",
    ]
    entries = (
        SpanEntry(position=2, role="user", text=TASK),
        *(_call(3 + i, "bash", command=c) for i, c in enumerate(commands)),
    )
    text = ExtractiveSummarizer().summarize(_request(entries)).text
    assert "(no files touched)" not in text
    for path in ("src/money.py", "tests/test_round.py", "src/api.py", "setup.cfg"):
        assert f"| {path} | bash | changed at position" in text
    assert text.splitlines()[1] == "Covers log positions 2-6."


def test_the_mark_of_a_clipped_text_is_no_fact_of_the_span():
    """A long message clipped for the request keeps a mark ("[… 1,646 characters omitted …]").

    Its digits were read as numbers the span states: the summary listed "646" under Key Facts, a number no
    event holds, and fidelity counted it as kept.
    """
    from contextledger.projections.summary_requests import clip_text  # noqa: PLC0415

    long = "Please fix the parser; see the notes. " + "lorem ipsum dolor sit amet " * 200 + "Port 8080 stays."
    entry = SpanEntry(position=2, role="user", text=clip_text(long, 4_000))
    assert "characters omitted" in entry.text
    assert facts_of([entry]).numbers == ("8080",)


def test_a_file_edited_then_read_stays_changed():
    """Edit, then check: the later read replaced the file's "changed" row (the summary said "only read")."""
    entries = (
        SpanEntry(position=2, role="user", text=TASK),
        _call(3, "bash", command='sed -i "s/float/Decimal/" src/money.py'),
        _call(4, "bash", command="sed -n '1,5p' src/money.py"),
    )
    text = ExtractiveSummarizer().summarize(_request(entries)).text
    assert "| src/money.py | bash | changed at position 3 |" in text
    assert "read at position 4" not in text
    later = (
        ExtractiveSummarizer()
        .summarize(
            _request(
                (SpanEntry(position=5, role="user", text=TASK), _call(6, "bash", command="cat src/money.py")),
                previous=text,
                round_=2,
            )
        )
        .text
    )
    assert "| src/money.py | bash | changed at position 3 |" in later  # across rounds too


def test_a_passing_result_that_mentions_an_error_is_no_error():
    """Output naming an error (a class, "0 failed") is not a failure: the card's rule, not any mention."""
    outputs = ["class ValidationError(Exception):\n    pass", "===== 12 passed, 0 failed in 0.3s ====="]
    entries: list[SpanEntry] = [SpanEntry(position=2, role="user", text=TASK)]
    for i, output in enumerate(outputs):
        entries += [
            _call(3 + 3 * i, "bash", command=f"step {i}"),
            SpanEntry(position=4 + 3 * i, role="tool", text=output, tool_name="bash"),
            SpanEntry(position=5 + 3 * i, role="assistant", text=f"Looked at step {i}."),
        ]
    text = ExtractiveSummarizer().summarize(_request(entries)).text
    errors = text.split("Errors & Resolutions")[1].split("###")[0]
    assert "ValidationError" not in errors
    assert "0 failed" not in errors
    assert (
        "AssertionError" in ExtractiveSummarizer().summarize(_request(_span())).text
    )  # a real failure still is


def test_a_shell_failure_without_the_error_flag_is_an_error():
    """A harness reporting the exit code in the text leaves ``is_error`` unset: the shell's words tell."""
    entries = (
        SpanEntry(position=2, role="user", text=TASK),
        _call(3, "bash", command="pytset"),
        SpanEntry(position=4, role="tool", text="bash: pytset: command not found", tool_name="bash"),
        SpanEntry(position=5, role="assistant", text="A typo; running pytest."),
    )
    text = ExtractiveSummarizer().summarize(_request(entries)).text
    assert "command not found" in text.split("Errors & Resolutions")[1].split("###")[0]


def _pending(text: str) -> list[str]:
    return text.split("### Pending Work\n", 1)[1].split("\n###", 1)[0].splitlines()


def test_a_long_todo_list_keeps_the_item_in_progress_and_its_head_and_counts_the_rest():
    """Thirty items, the first in progress: the summary kept items 15-29 as open, lost 00 and said nothing.

    Peers' complaints deepagents#4161 and KunAgent#747 (todo lists lost or collapsed by a summary). The
    list is in plan order: its head is what is being worked on; the rest are counted, and the count is
    carried to the next round.
    """
    todos = [
        {"content": f"migrate module {i:02d}", "status": "in_progress" if i == 0 else "pending"}
        for i in range(30)
    ]
    todos[3]["status"] = "completed"
    entries = [SpanEntry(position=2, role="user", text=TASK), _call(3, "TodoWrite", todos=todos)]
    summarizer = ExtractiveSummarizer()
    first = summarizer.summarize(_request(entries, max_tokens=2_000)).text
    lines = _pending(first)
    assert lines[0] == "- [~] migrate module 00"
    assert lines[1:3] == ["- [ ] migrate module 01", "- [ ] migrate module 02"]
    assert "migrate module 03" not in first  # done
    assert len(lines) == 16
    assert lines[-1] == "- ... and 14 more open item(s), later in the list"
    later = [SpanEntry(position=4, role="assistant", text="migrating module 00 now")]
    second = summarizer.summarize(_request(later, previous=first, round_=2, max_tokens=2_000)).text
    assert _pending(second) == lines


def test_the_most_changed_file_stays_and_scratch_files_removed_say_deleted():
    """A file edited 46 times gave way to six scratch files made and removed at the span's end.

    The rows kept were the newest, each scratch file said ``changed`` though it was gone (the django
    fixture, span 2-288). The count of changes is carried to the next round.
    """
    sed = "sed -i 's/a{0}/b{0}/' django/db/models/constraints.py"
    edits = [_call(10 + i, "bash", command=sed.format(i)) for i in range(46)]
    scratch = [f"scratch{i}.py" for i in range(6)]
    made = [_call(60 + i, "bash", command=f"touch {name}") for i, name in enumerate(scratch)]
    removed = _call(70, "bash", command="rm " + " ".join(scratch))
    text = ExtractiveSummarizer(_Limits(files=6)).summarize(_request([*edits, *made, removed])).text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "position" in line]
    assert rows[0] == "| django/db/models/constraints.py | bash | changed at position 55 (46 changes) |"
    assert len(rows) == 6
    assert all(row.endswith("| bash | deleted at position 70 |") for row in rows[1:])
    later = _request([_call(80, "bash", command="ls")], previous=text, round_=2)
    again = ExtractiveSummarizer(_Limits(files=1)).summarize(later).text
    assert "| django/db/models/constraints.py | bash | changed at position 55 (46 changes) |" in again
