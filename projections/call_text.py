"""The texts a tool call's arguments hold, as their reader reads them: the JSON's string values, unescaped."""

from __future__ import annotations

import json
from collections.abc import Iterator

__all__ = ["argument_text"]


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def argument_text(arguments: object) -> str:
    r"""The string values of a call's arguments, one per line, when escaping changed them; else ``""``.

    The arguments are stored and sent as JSON, where a quote is ``\"`` and a line break ``\n``: a text
    the model read in them (``echo "Test project"``) is not in their JSON as written. Searches and ``why``
    read this text beside the JSON, so such a text is found where it is. JSON text with no escape holds
    its values as written: nothing is parsed for it (most calls), and ``""`` says so.
    """
    if isinstance(arguments, str):
        if "\\" not in arguments:
            return ""
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    return "\n".join(_strings(arguments))
