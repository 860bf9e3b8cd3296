"""Claude Code session JSONL (``~/.claude/projects/*/<session>.jsonl``) into ledger sessions."""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import msgspec
from contextledger.adapters.importers.anthropic_messages import (
    Block,
    add_user_blocks,
    extend_assistant,
    new_assistant,
)
from contextledger.adapters.importers.base import CallBook, SessionDraft, aware_time
from contextledger.adapters.importers.source import Source

__all__ = ["parse_claude_code"]

_SCALAR_LIMIT = 200


class CCMessage(msgspec.Struct, kw_only=True):
    """The ``message`` of a user or assistant line: Anthropic Messages API shape."""

    role: Literal["user", "assistant"]
    content: str | list[Block]
    id: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None
    stop_reason: str | None = None


class CCRecord(msgspec.Struct, kw_only=True):
    """A user or assistant line of a Claude Code session (unknown fields are ignored)."""

    type: Literal["user", "assistant"]
    message: CCMessage
    uuid: str | None = None
    parentUuid: str | None = None  # noqa: N815 - the file's field name
    sessionId: str | None = None  # noqa: N815
    timestamp: str | None = None
    isSidechain: bool = False  # noqa: N815
    agentId: str | None = None  # noqa: N815
    requestId: str | None = None  # noqa: N815
    cwd: str | None = None
    gitBranch: str | None = None  # noqa: N815
    version: str | None = None
    slug: str | None = None
    isMeta: bool | None = None  # noqa: N815
    isCompactSummary: bool | None = None  # noqa: N815
    toolUseResult: Any = None  # noqa: N815


class _Chain:
    """One conversation of the file: the main session or one sub-agent's sidechain."""

    def __init__(self, draft: SessionDraft) -> None:
        self.draft = draft
        self.book = CallBook()
        self.group_id: str | None = None
        self.group: dict[str, Any] | None = None
        self.assistant_lines = 0


def _tool_use_result(value: Any) -> dict[str, Any]:
    """Keep the small scalar fields of ``toolUseResult``; its texts duplicate ``tool_result.content``."""
    if not isinstance(value, dict):
        return {"kind": type(value).__name__}
    return {"keys": sorted(value)} | {
        key: item
        for key, item in value.items()
        if isinstance(item, bool | int | float) or (isinstance(item, str) and len(item) <= _SCALAR_LIMIT)
    }


def _new_chain(source: Source, record: CCRecord, sidechain: bool) -> _Chain:
    session = record.sessionId or ""
    native = f"{session}-agent-{record.agentId or 'sidechain'}" if sidechain else session
    draft = SessionDraft(
        "claude-code", source.path, native, source_ref="isSidechain records" if sidechain else ""
    )
    draft.started_at = aware_time(record.timestamp)
    draft.metadata = {
        k: v
        for k, v in {
            "session_id": record.sessionId,
            "cwd": record.cwd,
            "git_branch": record.gitBranch,
            "claude_code_version": record.version,
            "slug": record.slug,
        }.items()
        if v is not None
    }
    draft.note("Claude Code does not record the system prompt or the tool schemas: both are empty")
    if sidechain:
        draft.metadata |= {"sidechain_of": session, "agent_id": record.agentId}
    return _Chain(draft)


def _add_assistant(source: Source, chain: _Chain, record: CCRecord, number: int) -> None:
    message = record.message
    chain.assistant_lines += 1
    at = aware_time(record.timestamp)
    if message.id is None or message.id != chain.group_id or chain.group is None:
        meta: dict[str, Any] = {"source_ref": f"line {number}", "lines": [], "uuid": record.uuid}
        meta |= {"message_id": message.id, "request_id": record.requestId}
        chain.group = new_assistant(meta, message.model, at)
        chain.group_id = message.id
        chain.draft.messages.append(chain.group)
        chain.draft.model = chain.draft.model or message.model
    group = chain.group
    group["meta"]["lines"].append(number)
    if message.usage is not None:
        group["meta"]["usage"] = message.usage
    if message.stop_reason is not None:
        group["meta"]["stop_reason"] = message.stop_reason
    if isinstance(message.content, str):
        group["content"] = (
            message.content if group["content"] is None else f"{group['content']}\n\n{message.content}"
        )
    else:
        extend_assistant(
            source,
            chain.draft,
            group,
            message.content,
            path=f"line {number}: $.message.content",
            book=chain.book,
        )


def _add_user(source: Source, chain: _Chain, record: CCRecord, number: int) -> None:
    draft = chain.draft
    meta: dict[str, Any] = {"source_ref": f"line {number}", "uuid": record.uuid}
    if record.isMeta:
        meta["is_meta"] = True
    if record.isCompactSummary:
        meta["is_compact_summary"] = True
    at = aware_time(record.timestamp)
    content = record.message.content
    if isinstance(content, str):
        draft.messages.append({"role": "user", "content": content, "at": at, "meta": meta})
        chain.group_id, chain.group = None, None
        return
    before = len(draft.messages)
    path = f"line {number}: $.message.content"
    add_user_blocks(source, draft, content, path=path, book=chain.book, meta=meta, at=at)
    for added in draft.messages[before:]:
        if added["role"] == "user":
            chain.group_id, chain.group = None, None
        elif record.toolUseResult is not None:
            added["meta"] = dict(added["meta"]) | {"tool_use_result": _tool_use_result(record.toolUseResult)}


def _finish(chain: _Chain, skipped: Counter[str], summaries: list[str], branches: int) -> SessionDraft:
    draft = chain.draft
    groups = sum(1 for m in draft.messages if m["role"] == "assistant")
    if chain.assistant_lines != groups:
        draft.note(
            f"{chain.assistant_lines} assistant lines were regrouped by message.id into {groups} API-level "
            "assistant messages (text -> content, thinking -> reasoning, tool_use -> tool calls)"
        )
    if any("tool_use_result" in m["meta"] for m in draft.messages):
        draft.note(
            "toolUseResult duplicates tool_result.content in richer form: only its keys and small scalar "
            "fields are kept in meta.tool_use_result"
        )
    if skipped:
        draft.metadata["skipped_records"] = dict(sorted(skipped.items()))
        listed = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
        draft.note(
            f"non-conversation records ({listed}) are not messages: only their counts are kept in metadata"
        )
    if summaries:
        draft.metadata["summaries"] = summaries
    if branches:
        draft.note(
            f"the parentUuid tree has {branches} branch point(s) (edits/rewinds): records kept in file order"
        )
    if chain.book.pending:
        draft.note(f"{len(chain.book.pending)} tool call(s) never got a result (the session ended mid-call)")
    return draft


def parse_claude_code(source: Source) -> list[SessionDraft]:
    """Parse one Claude Code session file.

    The main conversation is one session. Sub-agent records (``isSidechain: true``, as older
    versions wrote them inline) form one extra session per ``agentId``, linked by
    ``metadata.sidechain_of``; the main session still sees the sub-agent's answer as the Task
    tool's result. ``system``, ``file-history-snapshot``, ``summary`` and other records are counted.
    """
    main: _Chain | None = None
    sidechains: dict[str, _Chain] = {}
    skipped: Counter[str] = Counter()
    summaries: list[str] = []
    children: Counter[str] = Counter()
    for number, value in source.lines():
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise source.error(f"line {number}", "expected a JSON object with a string 'type'")
        kind = value["type"]
        if kind not in {"user", "assistant"}:
            skipped[kind if kind != "system" else f"system/{value.get('subtype', '?')}"] += 1
            if kind == "summary" and isinstance(value.get("summary"), str):
                summaries.append(value["summary"])
            continue
        record = source.convert(value, CCRecord, f"line {number}: $")
        if record.parentUuid:
            children[record.parentUuid] += 1
        if record.isSidechain:
            key = record.agentId or "sidechain"
            chain = sidechains.get(key) or sidechains.setdefault(
                key, _new_chain(source, record, sidechain=True)
            )
        else:
            main = main or _new_chain(source, record, sidechain=False)
            chain = main
        chain.draft.source_messages += 1
        if kind == "assistant":
            _add_assistant(source, chain, record, number)
        else:
            _add_user(source, chain, record, number)
    if main is None and not sidechains:
        raise source.error("line 1", "expected at least one 'user' or 'assistant' record")
    branches = sum(1 for count in children.values() if count > 1)
    drafts = [_finish(c, skipped if c is main else Counter(), summaries, branches) for c in [main] if c]
    drafts += [_finish(c, Counter(), [], 0) for c in sidechains.values()]
    if main is not None and sidechains:
        main.draft.note(
            f"sub-agent (isSidechain) records were imported as {len(sidechains)} separate session(s)"
        )
    return drafts
