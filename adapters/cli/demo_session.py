"""A realistic multi-turn, tool-using coding session that the demo records."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DEMO_SYSTEM_PROMPT", "DEMO_TOOLS", "demo_messages"]

DEMO_SYSTEM_PROMPT = (
    "You are a careful coding agent working in a Python repository. Use the tools to read files, "
    "run commands and edit code. Explain what you change and why."
)

DEMO_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "run",
        "description": "Run a shell command in the repository and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace text in a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"],
        },
    },
]

_SOURCE = '''"""Money amounts in cents."""


def parse_amount(text: str) -> int:
    """Parse "12.34" into 1234 cents."""
    units, _, cents = text.partition(".")
    return int(units) * 100 + int(cents)


def format_amount(cents: int) -> str:
    """Format 1234 cents as "12.34"."""
    return f"{cents // 100}.{cents % 100}"
'''

_PYTEST_FAIL = "\n".join(
    [
        "============================= test session starts ==============================",
        "collected 48 items",
        "",
        *[f"tests/test_money.py::test_case_{i:02d} PASSED" for i in range(1, 46)],
        "tests/test_money.py::test_parse_single_digit_cents FAILED",
        "tests/test_money.py::test_format_pads_cents FAILED",
        "tests/test_money.py::test_parse_negative FAILED",
        "",
        "=================================== FAILURES ===================================",
        "________________________ test_parse_single_digit_cents _________________________",
        "    def test_parse_single_digit_cents():",
        ">       assert parse_amount('3.5') == 350",
        "E       AssertionError: assert 305 == 350",
        "___________________________ test_format_pads_cents ____________________________",
        "    def test_format_pads_cents():",
        ">       assert format_amount(305) == '3.05'",
        "E       AssertionError: assert '3.5' == '3.05'",
        "_____________________________ test_parse_negative _____________________________",
        "    def test_parse_negative():",
        ">       assert parse_amount('-1.25') == -125",
        "E       AssertionError: assert -75 == -125",
        "=========================== 3 failed, 45 passed in 0.41s ======================",
    ]
    + [f"DEBUG trace line {i}: money.py:{i % 12 + 1} locals={{'text': '{i}.{i % 100}'}}" for i in range(400)]
)

_PYTEST_PASS = (
    "collected 48 items\n\n"
    + "\n".join(f"tests/test_money.py::test_case_{i:02d} PASSED" for i in range(1, 49))
    + "\n\n============================== 48 passed in 0.39s =============================="
)


def _call(call_id: str, name: str, **arguments: str) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def demo_messages() -> list[dict[str, Any]]:
    """Return the session's messages after its start, in order, as append-API dicts."""
    return [
        {
            "role": "user",
            "content": "The money tests fail since yesterday. Please find out why and fix money.py.",
        },
        {
            "role": "assistant",
            "content": "I'll run the tests first to see what fails.",
            "tool_calls": [_call("call_1", "run", command="pytest -q tests/test_money.py")],
        },
        {"role": "tool", "call_id": "call_1", "content": _PYTEST_FAIL, "is_error": True},
        {
            "role": "assistant",
            "content": "Three failures, all about cents. Let me read the module.",
            "tool_calls": [_call("call_2", "read_file", path="money.py")],
        },
        {"role": "tool", "call_id": "call_2", "content": _SOURCE},
        {
            "role": "assistant",
            "content": "`parse_amount` treats '3.5' as 3 units and 5 cents, and ignores the sign. "
            "`format_amount` does not pad cents. I'll fix both.",
            "tool_calls": [
                _call(
                    "call_3",
                    "edit_file",
                    path="money.py",
                    old="    return int(units) * 100 + int(cents)",
                    new="    sign = -1 if units.startswith('-') else 1\n"
                    "    cents = (cents + '00')[:2]\n"
                    "    return sign * (abs(int(units)) * 100 + int(cents))",
                ),
                _call(
                    "call_4",
                    "edit_file",
                    path="money.py",
                    old='    return f"{cents // 100}.{cents % 100}"',
                    new='    return f"{cents // 100}.{cents % 100:02d}"',
                ),
            ],
        },
        {"role": "tool", "call_id": "call_3", "content": "Edited money.py (1 replacement)."},
        {"role": "tool", "call_id": "call_4", "content": "Edited money.py (1 replacement)."},
        {
            "role": "assistant",
            "content": "Running the tests again.",
            "tool_calls": [_call("call_5", "run", command="pytest -q tests/test_money.py")],
        },
        {"role": "tool", "call_id": "call_5", "content": _PYTEST_PASS},
        {
            "role": "assistant",
            "content": "All 48 tests pass. The parser now pads single-digit cents and keeps the sign; "
            "the formatter pads cents to two digits.",
        },
        {"role": "user", "content": "Thanks. Does format_amount handle negative amounts too?"},
        {
            "role": "assistant",
            "content": "Let me check with a quick script.",
            "tool_calls": [
                _call("call_6", "run", command="python -c 'import money; print(money.format_amount(-125))'")
            ],
        },
        {"role": "tool", "call_id": "call_6", "content": "-2.75"},
        {
            "role": "assistant",
            "content": "No: -125 cents prints as -2.75 because floor division rounds down. "
            "It should format the absolute value and add the sign.",
        },
    ]
