"""SWE-agent trajectories (``*.traj``): 0.x text actions and 1.x function calling, from ``history``."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from contextledger.adapters.importers.base import CallBook, SessionDraft, small_fields
from contextledger.adapters.importers.openai_chat import OAToolCall
from contextledger.adapters.importers.source import Source

__all__ = ["parse_swe_agent"]


class SweMessage(msgspec.Struct, kw_only=True):
    """One ``history`` entry (both 0.x and 1.x fields; unknown fields ignored)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]]
    agent: str | None = None
    thought: str | None = None
    action: str | None = None
    is_demo: bool = False
    message_type: str | None = None
    tool_calls: list[OAToolCall] | None = None
    tool_call_ids: list[str] | None = None


class SweStep(msgspec.Struct, kw_only=True):
    """One ``trajectory`` step (the per-step ``messages`` snapshot is not decoded)."""

    action: str = ""
    observation: str = ""


class SweTrajectory(msgspec.Struct, kw_only=True):
    """The whole ``.traj`` file."""

    history: list[SweMessage]
    trajectory: list[SweStep] = []
    info: dict[str, Any] = {}
    environment: str | None = None
    replay_config: dict[str, Any] | str | None = None


def _text(source: Source, message: SweMessage, ref: str) -> str:
    if isinstance(message.content, str):
        return message.content
    texts = [p.get("text") for p in message.content if p.get("type") == "text"]
    if not all(isinstance(t, str) for t in texts) or len(texts) != len(message.content):
        raise source.error(f"{ref}.content", "expected text content: a string or a list of text parts")
    return "\n".join(str(t) for t in texts)


def _agent_config(trajectory: SweTrajectory) -> dict[str, Any]:
    config = trajectory.replay_config
    if isinstance(config, str):
        try:
            config = msgspec.json.decode(config)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return {}
    agent = config.get("agent") if isinstance(config, dict) else None
    return agent if isinstance(agent, dict) else {}


def _instance(trajectory: SweTrajectory) -> str:
    """The run's instance id when the file names one (1.x replay configs do; 0.x files do not)."""
    found = trajectory.info.get("instance_id") or _agent_config(trajectory).get("name")
    return found if isinstance(found, str) else ""


def _model(trajectory: SweTrajectory) -> str | None:
    model = _agent_config(trajectory).get("model")
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


def _metadata(trajectory: SweTrajectory) -> dict[str, Any]:
    info = trajectory.info
    meta: dict[str, Any] = {"environment": trajectory.environment}
    meta |= small_fields({k: v for k, v in info.items() if k != "submission"}, 4000)
    if isinstance(info.get("submission"), str):
        meta["submission_chars"] = len(info["submission"])
    meta["trajectory_steps"] = len(trajectory.trajectory)
    return meta


def _result(call_id: str, name: str, content: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"role": "tool", "call_id": call_id, "tool_name": name, "content": content, "meta": meta}


def parse_swe_agent(source: Source) -> list[SessionDraft]:
    """Parse a SWE-agent trajectory into one session (see ``_build``)."""
    trajectory = source.convert(source.document, SweTrajectory, "$")
    return [_build(source, trajectory)]


def _assistant(draft: SessionDraft, book: CallBook, message: SweMessage, text: str, ref: str) -> str | None:
    """Append an assistant entry; return the id of a 0.x text action's call (answered by position)."""
    calls: list[dict[str, Any]] = []
    pending = None
    for call in message.tool_calls or []:
        call_id = book.issue(call.id, call.function.name)
        calls.append({"id": call_id, "name": call.function.name, "arguments": call.function.arguments})
    if not calls and message.action and message.action.strip():
        pending = book.issue(None, "bash")
        calls.append({"id": pending, "name": "bash", "arguments": {"command": message.action}})
    draft.messages.append(
        {"role": "assistant", "content": text, "tool_calls": calls, "meta": {"source_ref": ref}}
    )
    return pending


def _observation(draft: SessionDraft, book: CallBook, message: SweMessage, text: str, ref: str) -> None:
    """Append a 1.x ``role: tool`` entry, paired by ``tool_call_ids[0]``."""
    ids = message.tool_call_ids or []
    call_id = book.resolve(ids[0]) if ids else None
    if call_id is None:
        draft.metadata.setdefault("dropped_results", []).append({"source_ref": ref, "call_id": ids[:1]})
        draft.note("observations naming no open tool call cannot be stored: dropped, see metadata")
        return
    if len(ids) > 1:
        draft.note("observations naming several tool_call_ids were paired with the first one only")
    draft.messages.append(_result(call_id, book.name_of(call_id), text, {"source_ref": ref}))


def _build(source: Source, trajectory: SweTrajectory) -> SessionDraft:
    """Map ``history`` onto one session.

    system -> system prompt; 1.x ``tool_calls``/``tool_call_ids`` pair natively; a 0.x ``action``
    issues a ``bash`` call ``call_<n>`` answered by the next non-demo user message. The final
    action's observation is not in ``history`` (the run stops after ``submit``); it is taken from
    ``trajectory[-1].observation`` when that step's action is the same.
    """
    draft = SessionDraft("swe-agent", source.path, _instance(trajectory), model=_model(trajectory))
    if draft.model is None:
        draft.note("the model is not recorded in the trajectory")
    draft.metadata = _metadata(trajectory)
    draft.source_messages = len(trajectory.history)
    book = CallBook()
    pending: tuple[str, str] | None = None
    for index, message in enumerate(trajectory.history):
        ref = f"$.history[{index}]"
        text = _text(source, message, ref)
        if message.role == "system":
            if draft.messages or draft.system_prompt:
                raise source.error(f"{ref}.role", "expected the system message first and only once")
            draft.system_prompt = text
        elif message.role == "assistant":
            call_id = _assistant(draft, book, message, text, ref)
            pending = (call_id, str(message.action)) if call_id else None
        elif message.role == "tool":
            _observation(draft, book, message, text, ref)
        elif message.is_demo:
            draft.messages.append(
                {"role": "user", "content": text, "meta": {"source_ref": ref, "is_demo": True}}
            )
            draft.note(
                "in-context demonstrations (is_demo) are user messages tagged meta.is_demo, not live turns"
            )
        elif pending is not None:
            draft.messages.append(
                _result(book.resolve(pending[0]) or pending[0], "bash", text, {"source_ref": ref})
            )
            pending = None
        else:
            draft.messages.append({"role": "user", "content": text, "meta": {"source_ref": ref}})
    _close_last(draft, trajectory, book, pending)
    _notes(draft, trajectory, native=any(m.tool_calls for m in trajectory.history))
    return draft


def _close_last(
    draft: SessionDraft, trajectory: SweTrajectory, book: CallBook, pending: tuple[str, str] | None
) -> None:
    if pending is None or not trajectory.trajectory:
        return
    last = trajectory.trajectory[-1]
    if last.action.strip() == pending[1].strip():
        ref = f"$.trajectory[{len(trajectory.trajectory) - 1}].observation"
        draft.messages.append(_result(pending[0], "bash", last.observation, {"source_ref": ref}))
        book.resolve(pending[0])
        draft.note(
            "the last action's observation is not in history: it was taken from trajectory[-1].observation"
        )


def _notes(draft: SessionDraft, trajectory: SweTrajectory, *, native: bool) -> None:
    if native:
        draft.note(
            "1.x function calling: tool_calls and tool_call_ids pair natively; no tool schemas in the file"
        )
    else:
        draft.note(
            "0.x text actions: each assistant 'action' became a 'bash' tool call with a synthesized id "
            "call_<n> (ACI commands run in the agent's shell); the next user message is its observation"
        )
    stats = trajectory.info.get("model_stats")
    if isinstance(stats, dict) and stats.get("api_calls") == 0:
        draft.note(
            "model_stats.api_calls is 0: the assistant turns were not produced by a model (demonstration)"
        )
    if draft.model == "replay":
        draft.note(
            "the 'replay' model replays scripted actions: observations are real, actions team-authored"
        )
    if trajectory.trajectory:
        draft.note(
            "trajectory[] steps (and their per-step message snapshots) duplicate history: not imported"
        )
