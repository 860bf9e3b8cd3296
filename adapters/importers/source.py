"""A transcript file's bytes with decoders whose errors name the line, column or JSON path."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import msgspec.inspect
from contextledger.domain.errors import TranscriptImportError

__all__ = ["Source", "line_col"]

T = TypeVar("T")

_TOO_DEEP = (
    "JSON nested deeper than the decoder follows (arrays and objects about 1,000 levels deep); "
    "no transcript format nests so deep"
)
_CHUNK = 1 << 20
_BLANK = re.compile(rb"[ \t\r\n]*")
_NOT_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")
_AT_PATH = re.compile(r"^(?P<problem>.*) - at `(?P<path>\$[^`]*)`$", re.DOTALL)


def line_col(data: bytes, offset: int) -> tuple[int, int]:
    """Return the 1-based line and column (in characters) of byte ``offset`` in ``data``."""
    offset = max(0, min(offset, len(data)))
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[start:offset].decode("utf-8", "replace")) + 1
    return line, column


class Source:
    """One transcript file: its path as given, its bytes, and strict decoders over them."""

    def __init__(self, path: str, data: bytes) -> None:
        """Wrap ``data`` read from ``path`` (a leading UTF-8 byte-order mark is dropped)."""
        self.path = path
        self.data = data.removeprefix(b"\xef\xbb\xbf")

    @classmethod
    def read(cls, path: str | Path) -> Source:
        """Read a file; raise ``TranscriptImportError`` when it cannot be read."""
        try:
            return cls(str(path), Path(path).read_bytes())
        except OSError as error:
            raise TranscriptImportError(
                str(path), "file", f"cannot be read: {error.strerror or error}"
            ) from None

    def error(self, location: str, problem: str) -> TranscriptImportError:
        """Return the import error for a problem at ``location`` in this file."""
        return TranscriptImportError(self.path, location, problem)

    @cached_property
    def text(self) -> str:
        """The file decoded as UTF-8; an invalid byte is reported by line and column."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as error:
            line, column = line_col(self.data, error.start)
            raise self.error(
                f"line {line}, column {column}", f"expected UTF-8 text: {error.reason}"
            ) from None

    @cached_property
    def document(self) -> Any:
        """The file decoded as one JSON document (msgspec; errors located by line and column)."""
        return self._decode_json(self.data, 0)

    @cached_property
    def elements(self) -> list[msgspec.Raw]:
        """The elements of a top-level JSON array, each left undecoded (its bytes in the file).

        The whole file is checked as ``document`` would check it (syntax, UTF-8, nesting), and any
        fault is reported exactly as ``document`` reports it, so an array streams element by element
        (``element``) without ever holding the decoded whole.

        Raises:
            TranscriptImportError: the file is not valid JSON, or its value is not an array.
        """
        try:
            elements = msgspec.json.decode(self.data, type=list[msgspec.Raw])
            decoder = codecs.getincrementaldecoder("utf-8")()
            for start in range(0, len(self.data), _CHUNK):  # Raw skips strings without checking UTF-8
                decoder.decode(self.data[start : start + _CHUNK])
            decoder.decode(b"", final=True)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            self.document  # noqa: B018 - raises the error the whole document would raise
            raise self.error("$", "expected a JSON array") from None
        return elements

    @cached_property
    def is_array(self) -> bool:
        """True when the file's first non-blank byte opens a JSON array."""
        found = _BLANK.match(self.data)
        end = found.end() if found else 0
        return self.data[end : end + 1] == b"["

    def all_objects_with(self, key: str) -> bool:
        """True when every element of the top-level array is an object holding ``key`` (decoded shallowly)."""
        return all(keys is not None and key in keys for keys in map(self.keys_of, self.elements))

    def all_lines_with(self, key: str) -> bool:
        """True when every line of a JSON Lines file is an object holding ``key`` (one line at a time)."""
        return all(isinstance(value, dict) and key in value for _, value in self.lines())

    def element(self, raw: msgspec.Raw) -> Any:
        """Decode one element of ``elements`` (already checked with the whole file)."""
        try:
            return msgspec.json.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            self.document  # noqa: B018 - not reached for a checked file: report as the whole would
            raise

    def keys_of(self, raw: msgspec.Raw) -> dict[str, msgspec.Raw] | None:
        """The members of an element that is a JSON object, undecoded; None for any other value."""
        if memoryview(raw)[:1].tobytes() != b"{":
            return None
        return msgspec.json.decode(raw, type=dict[str, msgspec.Raw])

    def _decode_json(self, chunk: bytes, first_line: int) -> Any:
        try:
            return msgspec.json.decode(chunk)
        except (msgspec.DecodeError, UnicodeDecodeError) as error:  # msgspec raises both for bad input
            raise self._json_error(chunk, first_line, error) from None
        except RecursionError:
            raise self.error(f"line {first_line + 1}", _TOO_DEEP) from None

    def _json_error(self, chunk: bytes, first_line: int, error: Exception) -> TranscriptImportError:
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as bad:
            line, column = line_col(chunk, bad.start)
            return self.error(
                f"line {line + first_line}, column {column}", f"expected UTF-8 text: {bad.reason}"
            )
        if not text.strip():
            return self.error(f"line {first_line + 1}", "expected a JSON value, found an empty document")
        try:
            json.loads(text)
        except json.JSONDecodeError as bad:
            return self.error(
                f"line {bad.lineno + first_line}, column {bad.colno}", f"invalid JSON: {bad.msg}"
            )
        return self.error(f"line {first_line + 1}", f"invalid JSON: {error}")

    def looks_like_json_lines(self) -> bool:
        """Return True when the first non-blank line is a JSON value of its own and more lines follow."""
        data, start, rows = self.data, 0, []
        for _ in range(64):  # the lines as split(b"\n", 64) cuts them, without copying the file's rest
            end = data.find(b"\n", start)
            if end < 0:
                break
            if (row := data[start:end]).strip():
                rows.append(row)
            start = end + 1
            if len(rows) == 2:  # noqa: PLR2004 - one line is a JSON document, two make JSON Lines
                break
        if len(rows) == 1 and _NOT_BLANK.search(data, start):  # what follows the first lines holds a value
            rows.append(b"")
        if len(rows) < 2:  # noqa: PLR2004 - one line is a JSON document, two make JSON Lines
            return False
        try:
            msgspec.json.decode(rows[0])
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return False
        return True

    def lines(self) -> Iterator[tuple[int, Any]]:
        """Yield ``(line number, decoded value)`` for each non-blank line of a JSON Lines file, in turn."""
        data, start, number = self.data, 0, 0
        while start <= len(data):  # not data.split(): that would copy the whole file at once
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            number += 1
            raw = data[start:end]
            if raw.strip():
                yield number, self._decode_json(raw, number - 1)
            start = end + 1

    def convert(self, value: Any, kind: type[T], path: str) -> T:
        """Validate ``value`` (found at JSON ``path``) as ``kind``; errors name the exact JSON path."""
        try:
            return msgspec.convert(value, kind)
        except msgspec.ValidationError as error:
            found = _AT_PATH.match(str(error))
            if found is None:
                raise self.error(path, f"expected {_kind_name(kind)}: {error}") from None
            problem = found["problem"]
            allowed = _literal_at(kind, found["path"]) if problem.startswith("Invalid enum value") else None
            if allowed:
                problem += f" (expected one of: {', '.join(map(str, allowed))})"
            raise self.error(path + found["path"][1:], problem) from None


def _kind_name(kind: Any) -> str:
    return str(getattr(kind, "__name__", kind))


_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[\d+\]")


def _unwrap(info: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """Pick the member of an optional/union type that a path can descend into."""
    if isinstance(info, msgspec.inspect.UnionType):
        for wanted in (msgspec.inspect.LiteralType, msgspec.inspect.StructType, msgspec.inspect.ListType):
            for member in info.types:
                if isinstance(member, wanted):
                    return member
    return info


def _literal_at(kind: Any, path: str) -> tuple[Any, ...] | None:
    """Return the allowed values of the Literal field at msgspec error ``path`` (``$.a[0].b``), if any."""
    info = _unwrap(msgspec.inspect.type_info(kind))
    for segment in _SEGMENT.finditer(path[1:]):
        if segment.group(1) is not None and isinstance(info, msgspec.inspect.StructType):
            field = next((f for f in info.fields if f.encode_name == segment.group(1)), None)
            if field is None:
                return None
            info = _unwrap(field.type)
        elif segment.group(1) is None and isinstance(info, msgspec.inspect.ListType):
            info = _unwrap(info.item_type)
        else:
            return None
    return info.values if isinstance(info, msgspec.inspect.LiteralType) else None
