"""The example agents' tools: read a file (its output can be large) and run a shell command."""

# ruff: noqa: INP001 - a helper of the example scripts, not part of a package

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import contextledger

__all__ = ["SYSTEM_PROMPT", "TOOL_SPECS", "run_tool"]

SYSTEM_PROMPT = (
    "You are a careful coding agent. Use read_file to read files and run to run shell commands. "
    "When the task is done, answer without calling a tool."
)

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Return the whole text of a file (it may be long).",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file to read."}},
            "required": ["path"],
        },
    },
    {
        "name": "run",
        "description": "Run a shell command; return its exit code, stdout and stderr.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line."}},
            "required": ["command"],
        },
    },
]
"""Name, description and JSON-schema parameters of each tool (each example puts them in its SDK's shape)."""


def run_tool(call: contextledger.ToolCallRequest) -> tuple[str, bool]:
    """Run the tool ``call`` names; return its output and whether it failed.

    Arguments that are not a JSON object (a reply cut off inside the call) fail the call, told to the model.
    """
    name = call.name
    try:
        arguments = call.input
        if name == "read_file":
            return Path(str(arguments["path"])).read_text(encoding="utf-8", errors="replace"), False
        if name == "run":
            done = subprocess.run(  # noqa: S602 - a shell tool is what this example demonstrates
                str(arguments["command"]), shell=True, capture_output=True, text=True, timeout=60, check=False
            )
            return f"exit code {done.returncode}\n{done.stdout}{done.stderr}", done.returncode != 0
    except contextledger.InvalidMessageError as error:
        return str(error), True
    except (OSError, KeyError, subprocess.TimeoutExpired) as error:
        return f"{type(error).__name__}: {error}", True
    return f"unknown tool {name!r}", True
