"""Files the CLI and exporters write: whole or not at all, and a typed error when they cannot be."""

from __future__ import annotations

from pathlib import Path

from contextledger.domain.errors import OutputPathError

__all__ = ["write_whole"]


def write_whole(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it, renamed into place once complete.

    A reader never sees half a file, and a failure leaves nothing behind: not the temporary, not a file
    outside the target's folder (a directory given as the target is refused before anything is written).

    Raises:
        OutputPathError: the target is a directory, its folder is missing, or the disk refuses the write
            (a user's error, exit 1: the store is not involved).
    """
    target = Path(path)
    if target.is_dir():
        raise OutputPathError(f"cannot write {target}: it is a directory (give a file name)")
    temporary = target.with_name(target.name + ".partial")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise OutputPathError(f"cannot write {target}: {error.strerror or error}") from error
