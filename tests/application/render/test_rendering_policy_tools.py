"""A policy naming a tool the session does not have is reported, not silently ignored."""

from __future__ import annotations

import logging

import contextledger
import pytest
from contextledger.application.render.context_rows import decode_row
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import ConfigError
from contextledger.projections.policy import Policy


def _policy(tool: str) -> Policy:
    return Policy.parse({"name": "mine", "base": "default", "retention": {"tools": {tool: {"keep_last": 1}}}})


def _session(ledger: contextledger.Ledger, *, schemas: bool) -> str:
    tools = [{"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}]
    session = ledger.start_session(system_prompt="be brief", tools=tools if schemas else [])
    ledger.add_user_message(session, "read it")
    ledger.add_assistant_message(
        session, None, tool_calls=[{"id": "call_1", "name": "read_file", "arguments": '{"path": "a"}'}]
    )
    ledger.add_tool_result(session, "call_1", "contents")
    return session


def test_a_misspelt_tool_is_a_config_error_when_the_session_declares_its_tools(ledger):
    """With tool schemas, ``[retention.tools.read_fiel]`` is refused, naming the key and the fix."""
    session = _session(ledger, schemas=True)
    renderer = Renderer(ledger)
    with pytest.raises(
        ConfigError, match=r"policy 'mine': retention\.tools\.read_fiel: .*did you mean 'read_file'"
    ):
        renderer.render(session, _policy("read_fiel"))
    assert renderer.render(session, _policy("read_file")).messages


def test_without_schemas_an_unmatched_tool_warns_and_the_policy_still_renders(ledger, caplog):
    """Without schemas only called tools are known: an unmatched name warns once; a match is silent."""
    session = _session(ledger, schemas=False)
    renderer = Renderer(ledger)
    with caplog.at_level(logging.INFO, logger="contextledger"):
        assert renderer.render(session, _policy("bash")).messages
        renderer.render(session, _policy("bash"))
        renderer.render(session, _policy("read_file"))
    logs = [record.structlog for record in caplog.records if hasattr(record, "structlog")]
    warnings = [entry for entry in logs if entry["event"] == "policy_names_unknown_tools"]
    assert len(warnings) == 1
    assert "retention.tools.bash: no tool of this name in the session" in warnings[0]["problem"]
    assert [r.levelname for r in caplog.records if "policy_names_unknown_tools" in r.getMessage()] == [
        "WARNING"
    ]


def test_a_row_keeps_the_called_tool_names_for_the_policy_that_checks_them_and_only_for_it(ledger, caplog):
    """Rows under a policy naming tools keep the tools called; a policy naming none gathers no names.

    Read back by another renderer, which folds no event, the row's names still let the policy's check
    find the called tool: the render is silent (without them it would warn that none is known).
    """
    session = _session(ledger, schemas=False)
    rows = {}
    for name, policy in (("checks", _policy("read_file")), ("plain", "default")):
        renderer = Renderer(ledger)
        rows[name] = renderer.fold_row(session, renderer.projector(policy), 4, None)
    assert decode_row(ledger, session, rows["checks"]).tool_names == ["read_file"]
    assert decode_row(ledger, session, rows["plain"]).tool_names == []
    reader = Renderer(ledger)
    reader.fold_row(session, reader.projector(_policy("read_file")), 4, rows["checks"])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="contextledger"):
        assert reader.render(session, _policy("read_file")).messages
    assert not [r for r in caplog.records if "policy_names_unknown_tools" in r.getMessage()]
