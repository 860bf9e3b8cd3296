r"""Terminal-safe text: control characters, escape sequences and bidi overrides shown escaped, never obeyed.

Transcript text is data from models, tools and users. Printed raw, an ``ESC [2J`` clears the screen, an
``ESC ] 0; ... BEL`` retitles the window, ``ESC ] 8`` plants a hyperlink and U+202E reverses what follows.
``printable`` is the one function every human (non ``--json``) output goes through: ``cell`` uses it for
table cells, and the CLI consoles (``safe_console.SafeConsole``) apply it to every segment they write, so a
command that forgets still prints nothing a terminal obeys. Newlines and tabs are kept; every other C0
control, DEL, every C1 control and the bidirectional formatting characters are written as ``\xNN`` or
``\uNNNN``.
"""

from __future__ import annotations

import re

__all__ = ["UNSAFE", "printable"]

UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 except \t and \n, DEL, C1 (CSI \x9b, OSC \x9d, ...)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\u2028\u2029]"  # line and paragraph separators some terminals treat as newlines
)
"""The characters a terminal may act on rather than show."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"  # noqa: PLR2004 - one byte or a code point


def printable(text: str) -> str:
    r"""Return ``text`` with each character a terminal would obey written escaped (``\x1b``, ``\u202e``)."""
    return UNSAFE.sub(_escaped, text)
