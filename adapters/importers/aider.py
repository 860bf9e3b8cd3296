"""Aider chat histories (``.aider.chat.history.md``): sessions of user, assistant and harness blocks."""

from __future__ import annotations

import re
from typing import Any

from contextledger.adapters.importers.base import CallBook, SessionDraft
from contextledger.adapters.importers.source import Source

__all__ = ["parse_aider"]

_HEADER = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_CONFIRM = re.compile(r"\(Y\)es/\(N\)o.*\[(?:Yes|No)\]: ")
_THINKING = re.compile(r"<thinking-content-([0-9a-f]+)>\n?(.*?)(?:\n?</thinking-content-\1>|\Z)", re.DOTALL)
_MODEL = re.compile(r"^(?:Main model|Model): (\S+)")
_ADDED = re.compile(r"^Added (\d+) lines of output to the chat\.")
_BREAK = "  "


class _Lines:
    """The lines of one section, with aider's block rules.

    Aider ends every line it writes for the user (``#### text``) and for its own output
    (``> text``) with a two-space markdown break. When a file still has those breaks (``breaks``),
    they tell a user line from a ``####`` heading in a reply; files whose trailing spaces were
    stripped fall back to the prefixes alone.
    """

    def __init__(self, lines: list[str], *, breaks: bool) -> None:
        self.lines = lines
        self.breaks = breaks

    def is_user(self, index: int) -> bool:
        line = self.lines[index]
        if line.rstrip() == "####":
            return True
        return line.startswith("#### ") and (line.endswith(_BREAK) or not self.breaks)

    def starts_harness(self, index: int) -> bool:
        line = self.lines[index]
        return line.startswith("> ") or (line.startswith(">") and not line[1:].strip())

    def starts_block(self, index: int) -> bool:
        return self.is_user(index) or self.starts_harness(index) or bool(_HEADER.match(self.lines[index]))

    def harness_end(self, start: int) -> int:
        """Return the index of the last line of the harness entry starting at ``start``.

        The entry runs over the unprefixed lines that follow it directly (a multi-line shell
        command); if that paragraph does not end with the two-space break, the entry is a
        multi-paragraph output (an edit error) and runs to the next line ending with the break.
        """
        lines = self.lines
        end = start
        while end + 1 < len(lines) and lines[end + 1].strip() and not self.starts_block(end + 1):
            end += 1
        if not self.breaks or lines[end].endswith(_BREAK) or not lines[start][1:].strip():
            return end
        for index in range(end + 1, len(lines)):
            if self.starts_block(index):
                return end
            if lines[index].endswith(_BREAK):
                return index
        return end


def _strip_break(line: str) -> str:
    return line[:-2] if line.endswith(_BREAK) else line


class _Session:
    """One ``# aider chat started at`` section being mapped."""

    def __init__(self, draft: SessionDraft) -> None:
        self.draft = draft
        self.book = CallBook()
        self.turn_reply: dict[str, Any] | None = None
        self.banner: list[str] = []

    def last_meta(self) -> dict[str, Any] | None:
        return self.draft.messages[-1]["meta"] if self.draft.messages else None

    def user(self, texts: list[str], number: int) -> None:
        content = "\n".join(texts)
        meta: dict[str, Any] = {"source_ref": f"line {number}"}
        if content.startswith(("/", "!")):
            meta["aider_command"] = content.split(maxsplit=1)[0] if content.strip() else content
        self.draft.messages.append({"role": "user", "content": content, "meta": meta})
        self.draft.source_messages += 1
        self.turn_reply = None

    def assistant(self, block: list[str], number: int) -> None:
        text = "\n".join(block).strip("\n")
        reasoning = [m.group(2).strip("\n") for m in _THINKING.finditer(text)]
        if any(f"</thinking-content-{m.group(1)}>" not in m.group(0) for m in _THINKING.finditer(text)):
            self.draft.note("a <thinking-content> section has no closing tag (the reply was interrupted)")
        content = _THINKING.sub("", text).strip("\n") if reasoning else text
        reply: dict[str, Any] = {
            "role": "assistant",
            "content": content or None,
            "reasoning": "\n\n".join(reasoning) or None,
            "tool_calls": [],
            "model": self.draft.model,
            "meta": {"source_ref": f"line {number}"},
        }
        self.draft.messages.append(reply)
        self.draft.source_messages += 1
        self.turn_reply = reply

    def harness(self, text: str) -> None:
        meta = self.last_meta()
        if meta is None:
            self.banner.append(text)
            found = _MODEL.match(text)
            if found and self.draft.model is None:
                self.draft.model = found.group(1)
            return
        if text.startswith("Tokens: ") and self.turn_reply is not None:
            self.turn_reply["meta"]["tokens"] = text
            return
        call = self._call(text)
        if call is not None and self.turn_reply is not None:
            call_id = self.book.issue(None, call[0])
            self.turn_reply["tool_calls"].append({"id": call_id, "name": call[0], "arguments": call[1]})
            self.turn_reply["meta"].setdefault("harness", []).append(text)
            return
        if call is not None:
            self.draft.note("commands the user ran (/run, !) without a model reply are kept as harness text")
        added = _ADDED.match(text)
        if added:
            meta.setdefault("output_added_lines", []).append(int(added.group(1)))
        meta.setdefault("harness", []).append(text)

    @staticmethod
    def _call(text: str) -> tuple[str, dict[str, Any]] | None:
        if text.startswith("Running "):
            return "shell", {"command": text.removeprefix("Running ")}
        if text.startswith("Applied edit to "):
            return "apply_edit", {"path": text.removeprefix("Applied edit to ")}
        return None


def _parse_section(draft: SessionDraft, rows: _Lines, first: int) -> SessionDraft:
    session = _Session(draft)
    lines = rows.lines
    index = 0
    while index < len(lines):
        line = lines[index]
        number = first + index
        if rows.is_user(index):
            end = index
            while end < len(lines) and rows.is_user(end):
                end += 1
            texts = [_strip_break(row)[5:] for row in lines[index:end]]
            if all(_CONFIRM.search(row) for row in lines[index:end]):
                for text in texts:
                    session.harness(f"answered: {text}")
            else:
                session.user(texts, number)
            index = end
        elif rows.starts_harness(index):
            end = rows.harness_end(index)
            entry = [line[2:] if line.startswith("> ") else line[1:], *lines[index + 1 : end + 1]]
            session.harness(_strip_break("\n".join(entry).rstrip("\n")).strip())
            index = end + 1
        elif not line.strip():
            index += 1
        else:
            end = index + 1
            while end < len(lines) and not rows.is_user(end) and not rows.starts_harness(end):
                end += 1
            session.assistant(lines[index:end], number)
            index = end
    if session.banner:
        draft.metadata["banner"] = session.banner
    return _notes(session)


def _notes(session: _Session) -> SessionDraft:
    draft = session.draft
    draft.note("aider records no system prompt, no tool schemas and no tool-call ids")
    calls = sum(len(m["tool_calls"]) for m in draft.messages if m["role"] == "assistant")
    if calls:
        draft.note(
            f"{calls} harness action(s) ('> Running <cmd>' -> 'shell', '> Applied edit to <file>' -> "
            "'apply_edit') became tool calls ids call_<n> on the reply that proposed them; aider does not "
            "write command output or file contents to the history, so none of them has a result"
        )
    markers = sum(len(m["meta"].get("output_added_lines", [])) for m in draft.messages)
    if markers:
        draft.note(
            f"{markers} '> Added N lines of output to the chat' marker(s): that output is not in the file"
        )
    draft.note("the session header time has no time zone: kept as text in metadata.started_local")
    return draft


def parse_aider(source: Source) -> list[SessionDraft]:
    """Parse an Aider chat history into one session per ``# aider chat started at`` header.

    ``#### `` lines are user turns (answers to y/n prompts echoed as ``####`` are harness, not
    turns); ``> `` entries are harness output; all other text is the assistant's reply, with
    ``<thinking-content-…>`` sections as reasoning. Role assignment is heuristic by nature.
    """
    lines = source.text.replace("\r\n", "\n").split("\n")
    starts = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if not starts:
        raise source.error(
            "line 1", "expected an Aider chat history: no '# aider chat started at <time>' header"
        )
    stray = next((i for i in range(starts[0]) if lines[i].strip()), None)
    if stray is not None:
        raise source.error(
            f"line {stray + 1}", "expected '# aider chat started at <time>' before any content"
        )
    breaks = any(line.startswith(("#### ", "> ")) and line.endswith(_BREAK) for line in lines)
    drafts: list[SessionDraft] = []
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(lines)
        found = _HEADER.match(lines[start])
        started = found.group(1) if found else ""
        draft = SessionDraft(
            "aider", source.path, f"{position + 1}-{started}", source_ref=f"line {start + 1}"
        )
        draft.metadata = {"started_local": started, "section": position + 1}
        drafts.append(_parse_section(draft, _Lines(lines[start + 1 : end], breaks=breaks), start + 2))
    return drafts
