"""OpenAI Chat Completions transcripts: message lists (JSON, JSONL), OpenHands completion logs, tau-bench."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import msgspec
from contextledger.adapters.importers.base import CallBook, SessionDraft, media_part, small_fields
from contextledger.adapters.importers.source import Source
from contextledger.application.kernel.media_shapes import MEDIA_PARTS

__all__ = ["OAMessage", "add_openai_messages", "parse_openai", "parse_tau_bench", "text_of_parts"]


class OAFunction(msgspec.Struct, kw_only=True):
    """The function of a tool call: its name and the arguments the model wrote."""

    name: str
    arguments: str | dict[str, Any] = "{}"


class OAToolCall(msgspec.Struct, kw_only=True):
    """One entry of an assistant message's ``tool_calls``."""

    function: OAFunction
    id: str | None = None
    type: str = "function"


class OAMessage(msgspec.Struct, kw_only=True):
    """A Chat Completions message as logs store it (unknown fields are ignored)."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[OAToolCall] | None = None
    tool_call_id: str | None = None
    function_call: OAFunction | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class OAToolSpec(msgspec.Struct, kw_only=True):
    """A tool schema in the ``{"type": "function", "function": {...}}`` form."""

    function: dict[str, Any]
    type: str = "function"


class OAChat(msgspec.Struct, kw_only=True):
    """A request-like object: messages with optional model, tools and id."""

    messages: list[OAMessage]
    model: str | None = None
    tools: list[OAToolSpec] = []
    id: str | None = None
    session_id: str | None = None


class OAChoice(msgspec.Struct, kw_only=True):
    """One choice of a completion response."""

    message: OAMessage


class OAResponse(msgspec.Struct, kw_only=True):
    """A Chat Completions response (only what the import needs)."""

    choices: list[OAChoice] = []
    id: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None


class FnCallLog(msgspec.Struct, kw_only=True):
    """An OpenHands ``log_completions`` file: the native function-calling view of the last LLM call."""

    fncall_messages: list[OAMessage]
    fncall_response: OAResponse | None = None
    kwargs: dict[str, Any] = {}
    timestamp: float | None = None
    cost: float | None = None


class TauRun(msgspec.Struct, kw_only=True):
    """One tau-bench run: a task, a trial, its reward and the chat trajectory."""

    task_id: int | str
    traj: list[OAMessage]
    trial: int | None = None
    reward: float | None = None
    info: dict[str, Any] = {}


_TEXT_PARTS = {"text", "input_text", "output_text"}


def text_of_parts(parts: list[dict[str, Any]], draft: SessionDraft) -> str:
    """Join the text parts of a multimodal content list; report the parts that are not text."""
    texts: list[str] = []
    for part in parts:
        kind = part.get("type")
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            draft.note(f"non-text content parts ({kind}) were dropped: this importer keeps text only")
    return "\n".join(texts)


def user_parts(parts: list[dict[str, Any]], draft: SessionDraft) -> tuple[str, list[dict[str, Any]]]:
    """Return a user message's text parts joined and its image and file parts as the ledger's media.

    Each media part sits after the text before it (its ``offset``); other parts are reported dropped.
    """
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in MEDIA_PARTS:
            found = media_part(part, len("\n".join(texts)), draft)
            if found is not None:
                media.append(found)
        else:
            draft.note(
                f"non-text content parts ({kind}) were dropped: the ledger keeps text, images and files"
            )
    return "\n".join(texts), media


def _text(content: str | list[dict[str, Any]] | None, draft: SessionDraft) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return text_of_parts(content, draft)


_ANTHROPIC_ONLY = {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"}
"""Content blocks of Anthropic Messages that Chat Completions has no part for: never dropped as "non-text"."""


def _refuse_anthropic_blocks(source: Source, message: OAMessage, ref: str) -> None:
    """An Anthropic message read as Chat lost every call, result and thinking block: refuse it instead."""
    if not isinstance(message.content, list):
        return
    kinds = sorted({str(p.get("type")) for p in message.content if p.get("type") in _ANTHROPIC_ONLY})
    if kinds:
        raise source.error(
            f"{ref}.content",
            f"Anthropic Messages blocks ({', '.join(kinds)}) in a Chat Completions message: import it as "
            "--format anthropic (or let the format be detected)",
        )


def add_openai_messages(
    source: Source,
    draft: SessionDraft,
    messages: list[OAMessage],
    *,
    path: str,
    book: CallBook,
    refs: list[str] | None = None,
) -> None:
    """Map Chat Completions messages onto ledger message dicts appended to ``draft``.

    ``path`` is the JSON path of the list (each message is ``path[i]``) unless ``refs`` names
    each message's place (JSON Lines: ``line n``).
    """
    system_parts: list[str] = []
    for index, message in enumerate(messages):
        ref = refs[index] if refs is not None else f"{path}[{index}]"
        meta: dict[str, Any] = {"source_ref": ref}
        _refuse_anthropic_blocks(source, message, ref)
        media: list[dict[str, Any]] = []
        if message.role == "user" and isinstance(message.content, list):
            text: str | None
            text, media = user_parts(message.content, draft)
        else:
            text = _text(message.content, draft)
        if message.role in {"system", "developer"}:
            if draft.messages:
                draft.metadata.setdefault("late_system_messages", []).append(
                    {"source_ref": ref, "content": text}
                )
                draft.note(
                    "system messages after the conversation began have no ledger event: kept in metadata"
                )
            else:
                system_parts.append(text or "")
            continue
        if message.role == "user":
            if text is None:
                draft.note("user messages without content were stored as empty text")
            user: dict[str, Any] = {"role": "user", "content": text or "", "meta": meta}
            draft.messages.append({**user, "media": media} if media else user)
        elif message.role == "assistant":
            _add_assistant(draft, message, text, meta, book)
        else:
            _add_result(source, draft, message, text=text, meta=meta, book=book)
    if system_parts:
        draft.system_prompt = "\n\n".join(system_parts)
        if len(system_parts) > 1:
            draft.note(f"{len(system_parts)} leading system messages were joined into the system prompt")


def _add_assistant(
    draft: SessionDraft, message: OAMessage, text: str | None, meta: dict[str, Any], book: CallBook
) -> None:
    calls: list[dict[str, Any]] = []
    for call in message.tool_calls or []:
        call_id = book.issue(call.id, call.function.name)
        calls.append({"id": call_id, "name": call.function.name, "arguments": call.function.arguments})
    if message.function_call is not None:
        call_id = book.issue(None, message.function_call.name)
        calls.append(
            {"id": call_id, "name": message.function_call.name, "arguments": message.function_call.arguments}
        )
        draft.note("legacy function_call messages have no call id: ids 'call_<n>' were synthesized")
    draft.messages.append(
        {
            "role": "assistant",
            "content": text,
            "reasoning": message.reasoning_content or message.reasoning,
            "tool_calls": calls,
            "model": draft.model,
            "meta": meta,
        }
    )


def _add_result(
    source: Source,
    draft: SessionDraft,
    message: OAMessage,
    *,
    text: str | None,
    meta: dict[str, Any],
    book: CallBook,
) -> None:
    ref = str(meta["source_ref"])
    if message.role == "function":
        waiting = next((c for c in book.pending if book.name_of(c) == message.name), None)
        source_id = waiting or str(message.name)
        call_id = book.resolve(source_id) if waiting else None
    else:
        if not message.tool_call_id:
            raise source.error(ref, "expected 'tool_call_id' (a string) on a tool message")
        source_id = message.tool_call_id
        call_id = book.resolve(source_id)
    if call_id is None:
        issued = book.was_issued(source_id)
        why = "a second result for an answered call" if issued else "a result for a call no message issued"
        draft.metadata.setdefault("dropped_results", []).append({"source_ref": ref, "call_id": source_id})
        draft.note(
            f"{why} cannot be stored (the ledger pairs one result per issued call): dropped, see metadata"
        )
        return
    draft.messages.append(
        {
            "role": "tool",
            "call_id": call_id,
            "content": text or "",
            "tool_name": message.name or book.name_of(call_id),
            "meta": meta,
        }
    )


def _tools(specs: list[OAToolSpec]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for spec in specs:
        function = spec.function
        if isinstance(function.get("name"), str):
            tool: dict[str, Any] = {
                "name": function["name"],
                "description": str(function.get("description") or ""),
                "parameters": function.get("parameters") or {},
            }
            if isinstance(function.get("strict"), bool):
                tool["strict"] = function["strict"]
            tools.append(tool)
    return tools


def _chat_session(source: Source, chat: OAChat, path: str, refs: list[str] | None = None) -> SessionDraft:
    draft = SessionDraft(
        "openai", source.path, chat.session_id or chat.id or "", source_ref=path, model=chat.model
    )
    draft.tools = _tools(chat.tools)
    draft.source_messages = len(chat.messages)
    book = CallBook()
    add_openai_messages(
        source, draft, chat.messages, path=f"{path}.messages" if path else "$", book=book, refs=refs
    )
    return draft


def _completion_log(source: Source, value: Any, path: str) -> SessionDraft:
    log = source.convert(value, FnCallLog, path)
    response = log.fncall_response
    model = (response.model if response else None) or log.kwargs.get("model")
    native = response.id if response and response.id else "completion-log"
    draft = SessionDraft(
        "openai", source.path, native, source_ref=path, model=model if isinstance(model, str) else None
    )
    tools = source.convert(log.kwargs.get("tools") or [], list[OAToolSpec], f"{path}.kwargs.tools")
    draft.tools = _tools(tools)
    draft.metadata = {"variant": "openhands-completion-log", "timestamp": log.timestamp, "cost": log.cost}
    draft.note(
        "OpenHands completion log: imported fncall_messages + fncall_response; the text-protocol "
        "copy in messages/response duplicates them and was ignored"
    )
    book = CallBook()
    messages = list(log.fncall_messages)
    draft.source_messages = len(messages)
    add_openai_messages(source, draft, messages, path=f"{path}.fncall_messages", book=book)
    if response and response.choices:
        final = response.choices[0].message
        draft.source_messages += 1
        add_openai_messages(source, draft, [final], path=f"{path}.fncall_response.choices", book=book)
        if response.usage and draft.messages:
            draft.messages[-1]["meta"]["usage"] = response.usage
    else:
        draft.note("no fncall_response: the final assistant turn is missing from the log")
    return draft


def _session_of(source: Source, value: Any, path: str) -> SessionDraft:
    if isinstance(value, dict) and "fncall_messages" in value:
        return _completion_log(source, value, path)
    return _chat_session(source, source.convert(value, OAChat, path), path)


def parse_openai(source: Source) -> Iterator[SessionDraft]:
    """Parse Chat Completions transcripts: one session per message list, one at a time.

    Accepted shapes: a JSON list of messages; an object with ``messages`` (and optional
    ``model``, ``tools``); a list of such objects; an OpenHands completion log
    (``fncall_messages`` + ``fncall_response``); JSON Lines of messages (one session) or of
    objects (one session per line); a tau-bench results list (delegated to ``parse_tau_bench``).
    """
    if source.looks_like_json_lines():
        if source.all_lines_with("role"):
            rows = list(source.lines())
            messages = [source.convert(v, OAMessage, f"line {n}: $") for n, v in rows]
            yield _chat_session(source, OAChat(messages=messages), "", [f"line {n}" for n, _ in rows])
            return
        for n, v in source.lines():
            yield _session_of(source, v, f"line {n}: $")
        return
    if source.is_array:
        if source.elements and source.all_objects_with("traj"):
            yield from parse_tau_bench(source)
        elif source.all_objects_with("role"):
            messages = source.convert(source.document, list[OAMessage], "$")
            yield _chat_session(source, OAChat(messages=messages), "")
        else:
            for i, raw in enumerate(source.elements):
                yield _session_of(source, source.element(raw), f"$[{i}]")
        return
    document = source.document
    if isinstance(document, dict):
        yield _session_of(source, document, "$")
        return
    raise source.error(
        "$", f"expected a JSON object or array of chat messages, got {type(document).__name__}"
    )


def parse_tau_bench(source: Source) -> Iterator[SessionDraft]:
    """Parse tau-bench results: one session per run (task x trial), one at a time.

    The user is an LLM simulator.
    """
    if not source.is_array:
        source.document  # noqa: B018 - a file that is not JSON is reported as such first
    if not source.is_array or not source.elements:
        raise source.error(
            "$", "expected a non-empty JSON array of tau-bench runs {task_id, trial, traj, ...}"
        )
    for index, raw in enumerate(source.elements):
        yield _tau_run(source, source.convert(source.element(raw), TauRun, f"$[{index}]"), index)


def _tau_run(source: Source, run: TauRun, index: int) -> SessionDraft:
    native = f"task{run.task_id}-trial{run.trial}" if run.trial is not None else f"task{run.task_id}"
    draft = SessionDraft("tau-bench", source.path, native, source_ref=f"$[{index}]")
    draft.metadata = {
        "task_id": run.task_id,
        "trial": run.trial,
        "reward": run.reward,
        "info": small_fields(run.info, 20_000),
        "user_simulated": True,
    }
    draft.note("user turns come from tau-bench's LLM user simulator, not a human")
    draft.note("the agent's model is not recorded in the run (only in the file name)")
    draft.source_messages = len(run.traj)
    book = CallBook()
    add_openai_messages(source, draft, run.traj, path=f"$[{index}].traj", book=book)
    return draft
