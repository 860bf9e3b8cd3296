"""Importers after a probe against the source files: a reply per model response, formats refused or found."""

from __future__ import annotations

import json

from contextledger import AssistantMessageAdded, ToolResultRecorded
from contextledger.adapters.importers.service import import_file


def _response(calls: list[tuple[str, str]]) -> dict:
    tool_calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": "execute_bash", "arguments": json.dumps({"command": c})},
        }
        for i, c in calls
    ]
    message = {"role": "assistant", "content": "I'll run two commands.", "tool_calls": tool_calls}
    return {
        "id": "chatcmpl-R1",
        "model": "m",
        "choices": [{"message": message}],
        "usage": {"prompt_tokens": 10},
    }


def _openhands_parallel() -> list[dict]:
    response = _response([("tc1", "ls"), ("tc2", "pwd")])
    events: list[dict] = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "List and pwd"}}
    ]
    for n, (call, command, output) in enumerate((("tc1", "ls", "a.txt"), ("tc2", "pwd", "/w"))):
        meta = {"function_name": "execute_bash", "tool_call_id": call, "model_response": response}
        action = 1 + 2 * n
        events.append(
            {
                "id": action,
                "source": "agent",
                "action": "run",
                "args": {"command": command},
                "tool_call_metadata": meta,
            }
        )
        events.append(
            {"id": action + 1, "source": "agent", "observation": "run", "content": output, "cause": action}
        )
    return events


def test_an_openhands_response_with_two_calls_is_one_assistant_message(tmp_path, ledger):
    """OpenHands runs a response's calls one a step, each after the last one's observation: one reply.

    Each call became an assistant message of its own, with the response's text and usage copied.
    """
    path = tmp_path / "parallel.json"
    path.write_text(json.dumps(_openhands_parallel()))
    [report] = import_file(ledger, path).sessions
    events = [r.event for r in ledger.events(report.session_id)]
    replies = [e for e in events if isinstance(e, AssistantMessageAdded)]
    assert len(replies) == 1
    assert [c.arguments for c in replies[0].tool_calls] == ['{"command": "ls"}', '{"command": "pwd"}']
    results = [ledger.text(e.content) for e in events if isinstance(e, ToolResultRecorded)]
    assert results == ["a.txt", "/w"]
    kinds = [type(e).__name__ for e in events[1:]]
    assert kinds == ["UserMessageAdded", "AssistantMessageAdded", "ToolResultRecorded", "ToolResultRecorded"]


def test_a_mini_swe_agent_trajectory_with_tool_messages_is_imported(tmp_path, ledger):
    """``role: tool`` trajectories were refused: "expected 'tool_call_id'", read from a struct without it."""
    call = {
        "id": "call_abc",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
    }
    trajectory = {
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "demo__demo-1",
        "info": {"config": {"model": {"model_name": "gpt-5"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "<returncode>0</returncode>\na.py"},
            {"role": "assistant", "content": "Done."},
        ],
    }
    path = tmp_path / "v2.traj.json"
    path.write_text(json.dumps(trajectory))
    done = import_file(ledger, path)
    assert done.error is None, done.error
    events = [r.event for r in ledger.events(done.sessions[0].session_id)]
    [issued] = [c for e in events if isinstance(e, AssistantMessageAdded) for c in e.tool_calls]
    [result] = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert (issued.name, issued.arguments) == ("bash", '{"command": "ls"}')
    assert result.call_id == issued.id
    assert ledger.text(result.content).endswith("a.py")


def test_an_openhands_output_jsonl_with_several_instances_gives_a_session_each(tmp_path, ledger):
    """Detected as OpenHands, then read as one JSON document: "line 2, column 1: invalid JSON"."""
    lines = [
        {"instance_id": f"repo__{n}", "history": [*_openhands_parallel()[:1], *_openhands_parallel()[1:3]]}
        for n in range(2)
    ]
    lines[1]["history"][0]["args"] = {"content": "Another task"}
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = import_file(ledger, path)
    assert done.error is None, done.error
    assert done.format == "openhands"
    assert len(done.sessions) == 2
    firsts = [
        ledger.text(next(iter(ledger.events(s.session_id, after=1, upto=2))).event.content)
        for s in done.sessions
    ]
    assert firsts == ["List and pwd", "Another task"]


def test_a_claude_code_file_opening_with_many_summaries_is_detected(tmp_path, ledger):
    """A resumed session opens with ``summary`` records (``leafUuid`` only): "cannot detect the format"."""
    summaries = [{"type": "summary", "summary": f"part {n}", "leafUuid": f"u{n}"} for n in range(60)]
    base = {"sessionId": "s1", "cwd": "/w", "timestamp": "2026-01-01T00:00:00Z", "parentUuid": None}
    user = base | {"type": "user", "uuid": "a1", "message": {"role": "user", "content": "hello"}}
    reply = {
        "role": "assistant",
        "id": "msg_1",
        "content": [{"type": "text", "text": "hi"}],
        "model": "claude",
    }
    assistant = base | {"type": "assistant", "uuid": "a2", "parentUuid": "a1", "message": reply}
    path = tmp_path / "resumed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [*summaries, user, assistant]) + "\n")
    done = import_file(ledger, path)
    assert done.error is None, done.error
    assert done.format == "claude-code"


def test_an_anthropic_file_imported_as_openai_is_refused_not_stripped(tmp_path, ledger):
    """``--format openai`` kept the texts and dropped every call, result and thinking block, exit 0."""
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "18C"}]},
    ]
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps(messages))
    done = import_file(ledger, path, "openai")
    assert done.error is not None
    assert "--format anthropic" in str(done.error)
    assert "$[1].content" in str(done.error)
    assert ledger.sessions() == []
    assert import_file(ledger, path).format == "anthropic"


def test_a_file_that_fails_to_parse_still_reports_the_format_it_was_detected_as(tmp_path, ledger):
    """A Claude Code file with a corrupt line past the detector's peek reported its format as ``null``."""
    records = [
        {
            "type": "user",
            "sessionId": "s1",
            "uuid": f"a{n}",
            "message": {"role": "user", "content": f"hi {n}"},
        }
        for n in range(60)
    ]
    lines = [json.dumps(r) for r in records]
    lines[55] = lines[55][:-9]
    path = tmp_path / "corrupt.jsonl"
    path.write_text("\n".join(lines) + "\n")
    done = import_file(ledger, path)
    assert done.error is not None
    assert done.format == "claude-code"
