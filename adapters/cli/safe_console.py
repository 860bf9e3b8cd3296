"""The CLI's rich console: escapes what a terminal would obey in every text segment it writes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from contextledger.adapters.cli.terminal import UNSAFE, printable
from rich.console import Console
from rich.segment import Segment

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, RenderableType

__all__ = ["SafeConsole"]


class SafeConsole(Console):
    """A rich console escaping control characters in every text segment it renders (its own codes kept)."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Render as rich does, then escape what a terminal would obey in the text (rich's controls kept)."""
        for segment in super().render(renderable, options):
            if segment.control or not UNSAFE.search(segment.text):
                yield segment
            else:
                yield Segment(printable(segment.text), segment.style)
