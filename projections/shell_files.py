"""Which files a tool call reads and changes: structured arguments and the common shell forms."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

__all__ = ["FileTouches", "files_of_call", "files_of_command"]

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w-]*)\1")
_PATCH_FILE = re.compile(r"^(?:\+\+\+ (?:b/)?|\*\*\* (?:Update|Add|Delete) File: )(\S+)", re.MULTILINE)
_PY_WRITE = re.compile(
    r"""open\(\s*['"]([^'"]+)['"]\s*,\s*['"][wa]|Path\(\s*['"]([^'"]+)['"]\s*\)\.write_(?:text|bytes)"""
)
_SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
_REDIRECT = re.compile(r"^(?:\d?>>?|&>>?|>\|)$")
_READERS = {"cat", "head", "tail", "less", "more", "nl", "wc", "bat", "view", "open", "diff", "md5sum"}
_SEARCHERS = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}
_CHANGERS = {"rm", "touch", "mkdir", "truncate", "chmod", "unlink", "rmdir"}
_EDIT_TOOL = re.compile(
    r"(?:write|edit|create|replace|insert|patch|save|update|delete|remove|rename|move)", re.IGNORECASE
)
_READ_TOOL = re.compile(r"(?:read|view|open|cat|show)", re.IGNORECASE)
_EDITOR_COMMANDS = {"create": True, "str_replace": True, "insert": True, "undo_edit": True, "view": False}
_PATH_KEYS = (
    "path",
    "file",
    "file_path",
    "filepath",
    "filename",
    "file_name",
    "target_file",
    "notebook_path",
)
_COMMAND_KEYS = ("command", "cmd", "bash", "shell", "script")
_SCAN_CHARS = 20_000


class FileTouches(msgspec.Struct, frozen=True):
    """Files a call reads and files it changes (created, edited, moved or deleted), in order.

    ``deleted`` are those of ``changed`` a command removes (``rm``, ``unlink``, ``rmdir``, ``git rm``).
    """

    read: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()


_REMOVERS = {"rm", "unlink", "rmdir"}


def _plain(word: str) -> bool:
    """Whether a shell word looks like a file path (not an option, variable, glob-only or device)."""
    return bool(word) and not word.startswith(("-", "$", "/dev/")) and word not in {".", ".."}


def _strip_heredocs(command: str) -> tuple[str, list[tuple[str, str]]]:
    """Return the command without heredoc bodies, and each body with the line that opened it."""
    lines = command[:_SCAN_CHARS].split("\n")
    kept: list[str] = []
    bodies: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        match = _HEREDOC.search(line)
        i += 1
        if match is None:
            continue
        end = match.group(2)
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != end:
            body.append(lines[i])
            i += 1
        i += 1
        bodies.append((line, "\n".join(body)))
    return "\n".join(kept), bodies


_TOKEN = re.compile(
    r"""[ \t\r\n]*(?:([;&|()<>]+)|((?:[^ \t\r\n;&|()<>'"\\]|\\[\s\S]|'[^']*'|"(?:[^"\\]|\\[\s\S])*")+))"""
)
"""A shell token (posix quoting, split on blanks and on runs of ``;&|()<>``), as shlex reads it."""
_PIECE = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\[\s\S])*)"|\\([\s\S])|([^'"\\]+)""")
_IN_DOUBLE = re.compile(r'\\([\\"])')


def _unquoted(word: str) -> str:
    """A shell word without its quotes and escapes (in double quotes only backslash and quote escape)."""
    if not any(c in word for c in "'\"\\"):
        return word
    parts = []
    for single, double, escaped, plain in _PIECE.findall(word):
        parts.append(single or (_IN_DOUBLE.sub(r"\1", double) if double else "") or escaped or plain)
    return "".join(parts)


def _tokens(line: str) -> list[str]:
    """The tokens shlex gives (posix, whitespace split, ``;&|()<>`` punctuation, no comments), read faster.

    shlex reads a character at a time in Python (most of a rebuild's card cost); this reads token
    by token with a regular expression. An unbalanced quote or a trailing backslash ends the
    tokens before the one it is in, as shlex's error does (a property test checks they agree).
    """
    tokens: list[str] = []
    at = 0
    while (match := _TOKEN.match(line, at)) is not None and match.end() > at:
        punctuation, word = match.groups()
        if punctuation is None and match.end() < len(line) and line[match.end()] in "'\"\\":
            return tokens  # the word runs into an unbalanced quote or a trailing backslash
        tokens.append(punctuation if punctuation is not None else _unquoted(word))
        at = match.end()
    return tokens


def _words(command: str) -> list[list[str]]:
    """Split a command line into simple commands (by ``&&``, ``|``, ``;``...), each a list of words."""
    out: list[list[str]] = [[]]
    for token in _tokens(command.replace("\n", " ; ")):
        if token in _SEPARATORS:
            out.append([])
        else:
            out[-1].append(token)
    return [w for w in out if w]


def _redirections(words: list[str], read: list[str], changed: list[str]) -> list[str]:
    """Record the files a simple command redirects to and from; return its other words."""
    args: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        target = words[i + 1] if i + 1 < len(words) else ""
        if _REDIRECT.match(word):
            if _plain(target):
                changed.append(target)
            i += 2
        elif word == "<":
            if _plain(target):
                read.append(target)
            i += 2
        elif word.startswith("<<"):  # a heredoc or here-string: its delimiter or word is no file
            i += 1 if word.lstrip("<-") else 2
        else:
            args.append(word)
            i += 1
    while args and (("=" in args[0] and not args[0].startswith("-")) or args[0] in {"sudo", "env", "time"}):
        args = args[1:]
    return args


def _in_place(name: str, rest: list[str], read: list[str], changed: list[str]) -> None:
    """``sed``/``perl``: files after the script, changed with ``-i``, else read."""
    flags = [a for a in rest if a.startswith("-") and not a.startswith("--")]
    scripts = {
        after
        for before, after in itertools.pairwise(rest)
        if before in _SED_VALUED or (name == "perl" and before in flags and before.endswith("e"))
    }
    operands = [a for a in rest if _plain(a) and a not in scripts]
    in_place = any("i" in a[1:3] for a in flags) or "--in-place" in rest
    has_script = bool(scripts)
    files = operands if has_script else operands[1:]
    (changed if in_place else read).extend(files)


def _simple(words: list[str], read: list[str], changed: list[str], deleted: list[str] | None = None) -> None:
    """Record the files one simple command reads and changes (and, given ``deleted``, removes)."""
    args = _redirections(words, read, changed)
    if not args:
        return
    name, rest = args[0].rsplit("/", 1)[-1], args[1:]
    if name == "git" and rest and rest[0] in {"mv", "rm"}:
        name, rest = rest[0], rest[1:]
    operands = [a for a in rest if _plain(a)]
    if name in {"sed", "perl"}:
        _in_place(name, rest, read, changed)
    elif name in {"mv", "cp", "install", "ln"} and len(operands) >= 2:  # noqa: PLR2004 - sources, destination
        (changed if name == "mv" else read).extend(operands[:-1])
        changed.append(operands[-1])
    elif name in _CHANGERS or name == "tee":
        changed.extend(operands)
        if deleted is not None and name in _REMOVERS:
            deleted.extend(operands)
    elif name in _READERS:
        read.extend(operands)
    elif name in _SEARCHERS:
        read.extend(_searched(rest))
    elif name == "patch":
        inputs = [v for a, v in itertools.pairwise(rest) if a in {"-i", "--input"}]
        read.extend(inputs)
        targets = [a for a in operands if not _option_value(rest, a, _PATCH_VALUED)]
        changed.extend(t for t in targets[:1] if t not in inputs)


_SED_VALUED = frozenset({"-e", "--expression", "-f", "--file"})
_PATCH_VALUED = frozenset({"-i", "--input", "-p", "-d", "-o", "-r", "-B", "-D", "-F", "-V", "-Y", "-z"})


_SEARCH_VALUED = frozenset(
    {
        *("-A", "-B", "-C", "-e", "-f", "-m", "-d", "-D", "-g", "-t", "-j", "-M"),
        *("--after-context", "--before-context", "--context", "--regexp", "--file", "--max-count"),
        *("--glob", "--iglob", "--type", "--type-not", "--type-add", "--threads", "--max-columns"),
        *("--encoding", "--replace", "--max-depth", "--depth", "--include", "--exclude", "--exclude-dir"),
        *("--ignore", "--ignore-dir", "--file-search-regex", "--sort", "--sortr", "--color", "--colors"),
        *("--context-separator", "--binary-files", "--devices", "--directories", "--label"),
    }
)
"""Options of ``grep``/``rg``/``ag``/``ack`` whose value is the next word (never a file searched).

Short options whose meaning differs between them (``-E``, ``-G``, ``-r``, ``-T``: a flag to grep) are
read as flags."""
_SEARCH_PATTERN = frozenset({"-e", "--regexp", "-f", "--file"})
"""Options that give the pattern: the first operand is then a path, not the pattern."""


def _searched(rest: list[str]) -> list[str]:
    """The paths a search command reads: its operands after the pattern, skipping option values."""
    operands: list[str] = []
    has_pattern = False
    skip = False
    for i, word in enumerate(rest):
        if skip:
            skip = False
            continue
        if word == "--":
            operands.extend(rest[i + 1 :])
            break
        if word.startswith("-") and len(word) > 1:
            has_pattern = has_pattern or word in _SEARCH_PATTERN or word.startswith(("--regexp=", "--file="))
            skip = word in _SEARCH_VALUED
            continue
        operands.append(word)
    return [a for a in operands[0 if has_pattern else 1 :] if _plain(a)]


def _option_value(args: list[str], word: str, valued: frozenset[str]) -> bool:
    """Whether ``word`` is the value of one of the ``valued`` options (``-e SCRIPT``, ``-i FILE``)."""
    return any(after == word and before in valued for before, after in itertools.pairwise(args))


def files_of_command(command: str) -> FileTouches:
    """Return the files a shell command reads and changes.

    Knows redirections (``>``, ``>>``, ``&>``, ``2>``), ``tee``, ``sed -i``, ``perl -i``, ``mv``,
    ``cp``, ``rm``, ``touch``, ``mkdir``, ``patch`` (with the files its diff names), ``git mv``/``rm``,
    heredocs (``cat > f <<EOF``; a diff or ``apply_patch`` body; ``python - <<EOF`` writing with
    ``open(..., 'w')`` or ``Path(...).write_text``) and readers (``cat``, ``head``, ``grep``...).
    Commands are split on ``&&``, ``||``, ``;``, ``|`` and newlines; anything else is ignored.
    """
    read: list[str] = []
    changed: list[str] = []
    deleted: list[str] = []
    stripped, bodies = _strip_heredocs(command)
    for words in _words(stripped):
        _simple(words, read, changed, deleted)
    for opener, body in bodies:
        named = [m.group(1) for m in _PATCH_FILE.finditer(body)]
        if named and ("patch" in opener or "apply" in opener or "git" in opener):
            changed.extend(named)
        if re.search(r"\bpython[\d.]*\b", opener):
            changed.extend(m.group(1) or m.group(2) for m in _PY_WRITE.finditer(body))
    if not bodies:
        changed.extend(m.group(1) for m in _PATCH_FILE.finditer(command[:_SCAN_CHARS]) if "***" in m.group(0))
    return _touches(read, changed, deleted)


def _touches(read: list[str], changed: list[str], deleted: Iterable[str] = ()) -> FileTouches:
    changed_once = tuple(dict.fromkeys(changed))
    return FileTouches(
        read=tuple(p for p in dict.fromkeys(read) if p not in changed_once),
        changed=changed_once,
        deleted=tuple(dict.fromkeys(deleted)),
    )


def files_of_call(name: str, arguments: Mapping[str, Any]) -> FileTouches:
    """Return the files one tool call reads and changes, from its name and structured arguments.

    An editor tool (``command`` = ``view``/``create``/``str_replace``/``insert`` with a ``path``)
    reads or changes its path; a tool whose name says it writes or edits changes its paths, one
    whose name says it reads reads them; a ``command``/``cmd``/``bash`` argument is parsed by
    ``files_of_command``; a ``patch``/``input`` argument holding a diff changes the files it names.
    """
    paths = [
        arguments[k].strip()
        for k in _PATH_KEYS
        if isinstance(arguments.get(k), str) and arguments[k].strip() and "\n" not in arguments[k]
    ]
    command = next((arguments[k] for k in _COMMAND_KEYS if isinstance(arguments.get(k), str)), None)
    read: list[str] = []
    changed: list[str] = []
    deleted: list[str] = []
    if command is not None and paths and command.strip() in _EDITOR_COMMANDS:
        (changed if _EDITOR_COMMANDS[command.strip()] else read).extend(paths)
        return _touches(read, changed)
    if _EDIT_TOOL.search(name):
        changed.extend(paths)
    elif _READ_TOOL.search(name):
        read.extend(paths)
    if command is not None:
        found = files_of_command(command)
        read.extend(found.read)
        changed.extend(found.changed)
        deleted.extend(found.deleted)
    for key in ("patch", "input", "diff"):
        value = arguments.get(key)
        if isinstance(value, str):
            changed.extend(m.group(1) for m in _PATCH_FILE.finditer(value[:_SCAN_CHARS]))
    return _touches(read, changed, deleted)
