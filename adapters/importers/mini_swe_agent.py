"""mini-swe-agent trajectories (``*.traj.json``): bash blocks in the text, observations as user turns."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
from contextledger.adapters.importers.base import CallBook, SessionDraft, small_fields
from contextledger.adapters.importers.openai_chat import OAMessage, add_openai_messages
from contextledger.adapters.importers.source import Source

__all__ = ["ACTION_REGEX", "parse_mini_swe_agent"]

ACTION_REGEX = r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```"
"""mini-swe-agent's default action pattern (v1 prompts use ``bash``, newer ones ``mswea_bash_command``)."""

_RETURNCODE = re.compile(r"^<returncode>(-?\d+)</returncode>")
_TIMEOUT = "The last command <command>"


class MiniMessage(msgspec.Struct, kw_only=True):
    """One message of a mini-swe-agent trajectory."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None
    extra: dict[str, Any] | None = None


class MiniTrajectory(msgspec.Struct, kw_only=True):
    """The whole ``.traj.json`` file."""

    messages: list[MiniMessage]
    info: dict[str, Any] = {}
    trajectory_format: str | None = None
    instance_id: str | None = None


def _response_fields(
    extra: dict[str, Any] | None,
) -> tuple[str | None, str | None, datetime | None, dict[str, Any]]:
    """Return model, reasoning, creation time and meta from the raw completion in ``extra.response``."""
    response = (extra or {}).get("response")
    if not isinstance(response, dict):
        return None, None, None, {}
    model = response.get("model") if isinstance(response.get("model"), str) else None
    created = response.get("created")
    at = datetime.fromtimestamp(created, UTC) if isinstance(created, int | float) else None
    reasoning = None
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("reasoning"), str):
            reasoning = message["reasoning"] or None
    meta = {k: response[k] for k in ("id", "provider", "usage") if response.get(k) is not None}
    return model, reasoning, at, meta


def _pattern(info: dict[str, Any], draft: SessionDraft) -> re.Pattern[str]:
    config = info.get("config")
    agent = config.get("agent") if isinstance(config, dict) else None
    custom = agent.get("action_regex") if isinstance(agent, dict) else None
    if isinstance(custom, str):
        try:
            return re.compile(custom, re.DOTALL)
        except re.error:
            draft.note("the run's action_regex does not compile in Python: the default pattern was used")
    return re.compile(ACTION_REGEX, re.DOTALL)


def _metadata(trajectory: MiniTrajectory) -> dict[str, Any]:
    info = trajectory.info
    raw_config = info.get("config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    meta: dict[str, Any] = {
        "instance_id": trajectory.instance_id,
        "trajectory_format": trajectory.trajectory_format,
    }
    meta |= small_fields({k: v for k, v in info.items() if k not in {"config", "submission"}})
    for key in ("model", "environment"):
        if isinstance(config.get(key), dict):
            meta[f"config_{key}"] = small_fields(config[key])
    if isinstance(info.get("submission"), str):
        meta["submission_chars"] = len(info["submission"])
    return meta


def _assistant(
    draft: SessionDraft, book: CallBook, message: MiniMessage, meta: dict[str, Any], pattern: re.Pattern[str]
) -> str | None:
    """Append an assistant turn; return the id of the call it issued, if it holds exactly one action."""
    text = str(message.content)
    reply_model, reasoning, at, extra = _response_fields(message.extra)
    if extra:
        meta["response"] = extra
    actions = pattern.findall(text)
    calls: list[dict[str, Any]] = []
    pending = None
    if len(actions) == 1:
        pending = book.issue(None, "bash")
        calls.append({"id": pending, "name": "bash", "arguments": {"command": actions[0]}})
    else:
        meta["action_blocks"] = len(actions)
    reply = {"role": "assistant", "content": text, "reasoning": reasoning, "tool_calls": calls}
    draft.messages.append(reply | {"model": reply_model or draft.model, "at": at, "meta": meta})
    return pending


def _observation(draft: SessionDraft, book: CallBook, call_id: str, text: str, meta: dict[str, Any]) -> None:
    returncode = _RETURNCODE.match(text)
    if returncode:
        meta["returncode"] = int(returncode.group(1))
    result = {"role": "tool", "call_id": book.resolve(call_id), "tool_name": "bash", "content": text}
    draft.messages.append(result | {"is_error": text.startswith(_TIMEOUT), "meta": meta})


def _notes(draft: SessionDraft, book: CallBook, format_errors: int) -> None:
    draft.note(
        "actions are ```bash blocks in the assistant text: each became a 'bash' tool call with a "
        "synthesized id call_<n>, paired by position with the next user message; no tool schemas in the file"
    )
    if format_errors:
        draft.note(
            f"{format_errors} assistant turn(s) held zero or several action blocks, so nothing ran: no tool "
            "call was issued and mini-swe-agent's format-error reply is a user message (meta.format_error)"
        )
    if book.pending:
        draft.note(f"{len(book.pending)} action(s) have no observation (the trajectory ends after them)")


def parse_mini_swe_agent(source: Source) -> list[SessionDraft]:
    """Parse a mini-swe-agent trajectory into one session.

    An assistant message with exactly one action block issues a ``bash`` call ``call_<n>``
    (arguments ``{"command": ...}``); the next user message is its result (pairing by position;
    the last one is the submission). A message with zero or several blocks ran nothing
    (mini-swe-agent answered with a format error), so it issues no call and the following user
    message stays a user message tagged ``meta.format_error``. Trajectories in the tool-calling
    format (``role: tool``) are read as Chat Completions messages.
    """
    trajectory = source.convert(source.document, MiniTrajectory, "$")
    config = trajectory.info.get("config")
    model_config = config.get("model") if isinstance(config, dict) else None
    model = model_config.get("model_name") if isinstance(model_config, dict) else None
    draft = SessionDraft("mini-swe-agent", source.path, trajectory.instance_id or "", model=model)
    draft.metadata = _metadata(trajectory)
    draft.source_messages = len(trajectory.messages)
    book = CallBook()
    messages = trajectory.messages
    if any(m.role == "tool" for m in messages):
        raw = source.document["messages"]  # as written: MiniMessage keeps no tool_calls or tool_call_id
        plain = [source.convert(m, OAMessage, f"$.messages[{i}]") for i, m in enumerate(raw)]
        add_openai_messages(source, draft, plain, path="$.messages", book=book)
        return [draft]
    pattern = _pattern(trajectory.info, draft)
    pending: str | None = None
    format_errors = 0
    for index, message in enumerate(messages):
        ref = f"$.messages[{index}]"
        if not isinstance(message.content, str):
            raise source.error(f"{ref}.content", "expected text content (a string)")
        meta: dict[str, Any] = {"source_ref": ref}
        if message.role == "system":
            if index != 0:
                raise source.error(f"{ref}.role", "expected a system message only at messages[0]")
            draft.system_prompt = message.content
        elif message.role == "assistant":
            pending = _assistant(draft, book, message, meta, pattern)
        elif pending is not None:
            _observation(draft, book, pending, message.content, meta)
            pending = None
        else:
            if draft.last_assistant() is not None:
                meta["format_error"] = True
                format_errors += 1
            draft.messages.append({"role": "user", "content": message.content, "meta": meta})
    _notes(draft, book, format_errors)
    return [draft]
