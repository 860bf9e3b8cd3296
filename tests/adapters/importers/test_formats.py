"""Format features the real corpus lacks, detection by content, and deterministic ids, on small inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import contextledger
import pytest
from contextledger import AssistantMessageAdded, ToolResultRecorded, TranscriptImportError, UserMessageAdded
from contextledger.adapters.importers.base import SessionDraft, prepare
from contextledger.adapters.importers.detect import detect_format
from contextledger.adapters.importers.service import import_file, parse_file
from contextledger.adapters.importers.source import Source

ANTHROPIC = {
    "model": "claude-x",
    "system": [{"type": "text", "text": "Be brief."}],
    "tools": [{"name": "get_weather", "description": "Weather now", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I need the tool.", "signature": "c2ln"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "18C"},
                        {"type": "image", "source": {"data": "..."}},
                    ],
                },
                {"type": "text", "text": "Thanks"},
            ],
        },
        {"role": "assistant", "content": "It is 18C."},
    ],
}

OPENHANDS_LOG = {
    "messages": [{"role": "user", "content": "text-protocol duplicate"}],
    "response": {"choices": []},
    "fncall_messages": [
        {"role": "system", "content": "You are OpenHands."},
        {"role": "user", "content": "List files"},
        {
            "role": "assistant",
            "content": "Listing.",
            "tool_calls": [
                {
                    "id": "toolu_01",
                    "type": "function",
                    "function": {"name": "execute_bash", "arguments": '{"command":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_01", "name": "execute_bash", "content": "a.py"},
    ],
    "fncall_response": {
        "id": "chatcmpl-9",
        "model": "claude-3-5-sonnet",
        "choices": [{"message": {"role": "assistant", "content": "There is a.py."}}],
        "usage": {"prompt_tokens": 10},
    },
    "kwargs": {
        "tools": [
            {"type": "function", "function": {"name": "execute_bash", "description": "Run", "parameters": {}}}
        ]
    },
    "timestamp": 1.5,
    "cost": 0.01,
}


def _write(tmp_path: Path, name: str, content: object) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def _events(ledger: contextledger.Ledger, session_id: str):
    return [r.event for r in ledger.events(session_id)]


def test_anthropic_request_maps_blocks_to_events(tmp_path, ledger):
    """Thinking -> reasoning, tool_use -> call, tool_result -> result; the image block is only reported."""
    outcome = import_file(ledger, _write(tmp_path, "request.json", ANTHROPIC))
    assert outcome.ok, outcome.error
    assert outcome.format == "anthropic"
    report = outcome.sessions[0]
    started, user, reply, result, thanks, final = _events(ledger, report.session_id)
    assert started.system_prompt == "Be brief."
    assert started.tools[0].parameters == {"type": "object"}
    assert isinstance(user, UserMessageAdded)
    assert isinstance(reply, AssistantMessageAdded)
    assert reply.reasoning == "I need the tool."
    assert json.loads(reply.tool_calls[0].arguments) == {"city": "Paris"}
    assert isinstance(result, ToolResultRecorded)
    assert ledger.text(result.content) == "18C"
    assert ledger.text(thanks.content) == "Thanks"
    assert ledger.text(final.content) == "It is 18C."
    assert any("image" in note for note in report.notes)
    assert (report.tool_calls, report.tool_results, report.unpaired_calls) == (1, 1, 0)


def test_openhands_completion_log_appends_the_final_response(tmp_path, ledger):
    """fncall_messages plus fncall_response make the session; the text-protocol copy is ignored."""
    outcome = import_file(ledger, _write(tmp_path, "completion.json", OPENHANDS_LOG))
    assert outcome.ok, outcome.error
    assert outcome.format == "openai"
    report = outcome.sessions[0]
    events = _events(ledger, report.session_id)
    assert events[0].system_prompt == "You are OpenHands."
    assert [t.name for t in events[0].tools] == ["execute_bash"]
    assert ledger.text(events[-1].content) == "There is a.py."
    assert events[-1].meta["usage"] == {"prompt_tokens": 10}
    assert report.source_messages == 5
    assert (report.messages, report.tool_calls, report.tool_results) == (4, 1, 1)


def test_openai_jsonl_result_for_an_unissued_call_is_reported_not_invented(tmp_path, ledger):
    """A tool message naming a call nobody issued is dropped with a note; no call is made up for it."""
    lines = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan output"},
        {"role": "assistant", "content": "hello"},
    ]
    path = _write(tmp_path, "chat.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    outcome = import_file(ledger, path)
    assert outcome.ok, outcome.error
    report = outcome.sessions[0]
    assert (report.messages, report.tool_calls, report.tool_results) == (2, 0, 0)
    assert any("no message issued" in note for note in report.notes)
    started = _events(ledger, report.session_id)[0]
    assert started.metadata["dropped_results"] == [{"source_ref": "line 2", "call_id": "ghost"}]


def _calc_call(n: int, call_id: str = "call_x") -> dict:
    """An OpenAI assistant message calling ``calc`` once with id ``call_id``."""
    tool = {"id": call_id, "type": "function", "function": {"name": "calc", "arguments": f'{{"n": {n}}}'}}
    return {"role": "assistant", "content": None, "tool_calls": [tool]}


def test_reused_call_ids_are_stored_as_given_and_each_result_pairs_with_its_call(tmp_path, ledger):
    """An id issued again after its result is stored as given; each result answers the latest call."""
    messages = [
        {"role": "user", "content": "go"},
        _calc_call(1),
        {"role": "tool", "tool_call_id": "call_x", "content": "one"},
        _calc_call(2),
        {"role": "tool", "tool_call_id": "call_x", "content": "two"},
    ]
    outcome = import_file(ledger, _write(tmp_path, "chat.json", messages))
    assert outcome.ok, outcome.error
    events = _events(ledger, outcome.sessions[0].session_id)
    results = [(e.call_id, ledger.text(e.content)) for e in events if isinstance(e, ToolResultRecorded)]
    assert results == [("call_x", "one"), ("call_x", "two")]
    assert [c.id for e in events if isinstance(e, AssistantMessageAdded) for c in e.tool_calls] == [
        "call_x",
        "call_x",
    ]
    assert not any("renamed_calls" in e.meta for e in events)
    assert outcome.sessions[0].unpaired_calls == 0


def test_a_call_id_reused_while_its_call_awaits_a_result_fails_the_file(tmp_path, ledger):
    """The ledger's rule holds for imports too: the file fails at the second call and writes nothing."""
    messages = [{"role": "user", "content": "go"}, _calc_call(1), _calc_call(2)]
    outcome = import_file(ledger, _write(tmp_path, "chat.json", messages))
    assert not outcome.ok
    assert outcome.error.location == "$[2]"
    assert "'call_x' is issued again while a call with that id awaits its result" in outcome.error.problem
    assert ledger.sessions() == []


def test_a_synthesized_call_id_never_takes_an_id_the_source_used(tmp_path, ledger):
    """A legacy function_call gets the next free ``call_<n>``, not one a real call of the source carries."""
    messages = [
        {"role": "user", "content": "go"},
        _calc_call(1, "call_1"),
        {"role": "assistant", "content": None, "function_call": {"name": "calc", "arguments": "{}"}},
        {"role": "tool", "tool_call_id": "call_1", "content": "one"},
        {"role": "function", "name": "calc", "content": "two"},
    ]
    outcome = import_file(ledger, _write(tmp_path, "chat.json", messages))
    assert outcome.ok, outcome.error
    events = _events(ledger, outcome.sessions[0].session_id)
    assert [c.id for e in events if isinstance(e, AssistantMessageAdded) for c in e.tool_calls] == [
        "call_1",
        "call_2",
    ]
    assert [e.call_id for e in events if isinstance(e, ToolResultRecorded)] == ["call_1", "call_2"]


def test_claude_code_sidechain_records_become_their_own_session(tmp_path, ledger):
    """Sub-agent (isSidechain) records form their own session, linked by metadata.sidechain_of."""
    base = {"sessionId": "s1", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w", "version": "1.0.0"}
    records = [
        base | {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "explore"}},
        base
        | {
            "type": "assistant",
            "uuid": "a1",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "m",
                "content": [
                    {"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {"prompt": "look"}}
                ],
            },
        },
        base
        | {"type": "user", "uuid": "s-u1", "isSidechain": True, "agentId": "ag1"}
        | {"message": {"role": "user", "content": "look"}},
        base
        | {"type": "assistant", "uuid": "s-a1", "isSidechain": True, "agentId": "ag1"}
        | {
            "message": {"id": "msg_s", "role": "assistant", "content": [{"type": "text", "text": "found it"}]}
        },
        base
        | {"type": "user", "uuid": "u2", "toolUseResult": {"status": "completed", "content": "x" * 500}}
        | {
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "found it"}],
            }
        },
    ]
    path = _write(tmp_path, "session.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    outcome = import_file(ledger, path)
    assert outcome.ok, outcome.error
    main, side = outcome.sessions
    assert (main.messages, main.tool_calls, main.tool_results, side.messages) == (3, 1, 1, 2)
    side_started = _events(ledger, side.session_id)[0]
    assert side_started.metadata["sidechain_of"] == "s1"
    assert side_started.metadata["agent_id"] == "ag1"
    result = _events(ledger, main.session_id)[-1]
    assert result.meta["tool_use_result"] == {"keys": ["content", "status"], "status": "completed"}


def test_aider_file_without_trailing_breaks_still_splits_roles(tmp_path, ledger):
    """An Aider history whose trailing spaces were stripped falls back to the '####' and '>' prefixes."""
    text = (
        "\n# aider chat started at 2025-01-01 10:00:00\n\n> Main model: gpt-4o with diff edit format\n\n"
        "#### fix the bug\n\nDone, see the edit.\n\n> Tokens: 1k sent, 10 received.\n"
        "> Applied edit to a.py\n"
    )
    outcome = import_file(ledger, _write(tmp_path, "history.md", text))
    assert outcome.ok, outcome.error
    report = outcome.sessions[0]
    assert (report.user_messages, report.assistant_messages, report.tool_calls, report.tool_results) == (
        1,
        1,
        1,
        0,
    )
    started = _events(ledger, report.session_id)[0]
    assert started.model == "gpt-4o"


def test_a_swe_agent_trajectory_with_its_history_only_is_detected_and_imported(tmp_path, ledger):
    """SWE-agent's demonstrations (``trajectories/demonstrations/*.traj``) keep ``history`` alone.

    The shape of its ``function_calling_simple.traj`` (no ``trajectory``): each entry has SWE-agent's
    ``agent`` and ``message_type``; the tool call and its result pair by id.
    """
    document = {
        "history": [
            {"role": "system", "content": "You are an autonomous programmer.", "agent": "main",
             "message_type": "system_prompt"},
            {"role": "user", "content": "ISSUE: SyntaxError in missing_colon.py", "agent": "main",
             "message_type": "observation"},
            {"role": "assistant", "content": "Let me find the file.", "thought": "Let me find the file.",
             "action": "find_file missing_colon.py", "agent": "main", "message_type": "action",
             "tool_calls": [{"function": {"arguments": '{"file_name":"a.py"}', "name": "find_file"},
                             "id": "call_1", "type": "function"}]},
            {"role": "tool", "content": "Found 1 matches for missing_colon.py", "agent": "main",
             "message_type": "observation", "tool_call_ids": ["call_1"]},
        ]
    }  # fmt: skip
    path = _write(tmp_path, "demo.traj", json.dumps(document))
    assert detect_format(Source.read(path)) == "swe-agent"
    outcome = import_file(ledger, path)
    assert outcome.ok, outcome.error
    report = outcome.sessions[0]
    counts = (report.user_messages, report.assistant_messages, report.tool_calls, report.tool_results)
    assert counts == (1, 1, 1, 1)
    result = next(e for e in _events(ledger, report.session_id) if isinstance(e, ToolResultRecorded))
    assert (result.call_id, result.tool_name) == ("call_1", "find_file")


def test_every_real_file_is_detected_by_content_not_by_name(transcripts, tmp_path):
    """Renamed to a neutral name, each real transcript is still recognised as its format."""
    expected = {"aider": "aider", "claude-code": "claude-code", "mini-swe-agent": "mini-swe-agent"}
    expected |= {"openhands-events": "openhands", "swe-agent": "swe-agent", "tau-bench": "tau-bench"}
    for original in sorted(transcripts.glob("*__*")):
        neutral = tmp_path / "transcript.data"
        shutil.copyfile(original, neutral)
        assert detect_format(Source.read(neutral)) == expected[original.name.split("__")[0]], original.name


def test_session_ids_are_deterministic_and_follow_content_not_path(transcripts, tmp_path):
    """Same content anywhere gives the same ids; changing one message gives a new id for that session only."""
    original = transcripts / "openhands-events__wrong_initial_state.json"
    copy = tmp_path / "elsewhere.json"
    shutil.copyfile(original, copy)
    first = [s.session_id for s in parse_file(original)[1]]
    assert first == [s.session_id for s in parse_file(copy)[1]]
    events = json.loads(original.read_text(encoding="utf-8"))
    events[0]["args"]["content"] = "Please rename it to 4096.py"
    copy.write_text(json.dumps(events), encoding="utf-8")
    changed = [s.session_id for s in parse_file(copy)[1]]
    assert changed != first
    assert changed[0].startswith("openhands-")


def test_explicit_format_that_does_not_fit_fails_with_the_json_path(transcripts, ledger):
    """--format mini-swe-agent on a SWE-agent file names the missing field instead of guessing."""
    outcome = import_file(ledger, transcripts / "swe-agent__swe-agent__test-repo-i1.traj", "mini-swe-agent")
    assert not outcome.ok
    assert outcome.error.location == "$"
    assert "messages" in outcome.error.problem
    assert ledger.sessions() == []


def test_prepare_refuses_a_result_for_a_call_never_issued():
    """The last guard before writing applies the domain's pairing rule and names the message."""
    draft = SessionDraft("openai", "x.json", "n1")
    draft.messages = [{"role": "tool", "call_id": "c1", "content": "x", "meta": {"source_ref": "$[0]"}}]
    with pytest.raises(TranscriptImportError, match=r"x\.json: \$\[0\]: tool result for call 'c1'"):
        prepare(draft)


def test_unknown_format_name_is_a_config_error(tmp_path):
    """A format name no importer has is refused before the file is read."""
    with pytest.raises(contextledger.ConfigError, match="unknown transcript format"):
        parse_file(tmp_path / "missing.json", "yaml")


def test_an_unknown_role_names_the_allowed_ones(tmp_path, ledger):
    """An enum-like field with a wrong value reports its JSON path and the values it accepts."""
    messages = [{"role": "user", "content": "hi"}, {"role": "robot", "content": "?"}]
    path = _write(tmp_path, "chat.json", messages)
    outcome = import_file(ledger, path)
    assert outcome.error is not None
    assert outcome.error.location == "$[1].role"
    assert "expected one of: assistant, developer, function, system, tool, user" in outcome.error.problem
