"""tiktoken encodings built from their ranks as parsed once and kept in a cache file (msgpack, checked).

Loading a tiktoken encoding parses its BPE file in Python (100,256 lines of base64 for cl100k_base):
0.08-0.17 s of every process that counts a new text (a CLI ``rebuild``, ``render``, ``why``,
``simulate``), before tiktoken builds its ``CoreBPE`` (ADR 0068). ``load_encoding`` parses the file
once, keeps what tiktoken's constructor returned (name, pattern, special tokens, ranks) in
``<cache dir>/tiktoken/``, and later builds the encoding from that file: a msgpack decode of the
ranks takes a fifth of the parse (ADR 0070).

The file's name holds the SHA-256 of the BPE file it was parsed from (read and hashed at every load) and
tiktoken's version, so a changed BPE file or tiktoken is parsed again; the file begins with the SHA-256 of
the rest, so a truncated or altered file is parsed again and rewritten. It is written to a temporary file
renamed into place (processes loading at once each write a whole file). A cache directory that cannot be
written costs the parse only: nothing is raised or printed.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from contextledger.application.kernel.logs import get_logger

__all__ = ["CACHE_DIR_ENV", "EncodingSpec", "cache_dir", "load_encoding"]

log = get_logger(__name__)

CACHE_DIR_ENV = "CONTEXTLEDGER_CACHE_DIR"
"""Where contextledger keeps files it can always make again (default ``$XDG_CACHE_HOME/contextledger``)."""

_DIGEST = 32
"""Bytes of the SHA-256 that heads a cache file (of the msgpack that follows it)."""


class EncodingSpec(msgspec.Struct, frozen=True):
    """What tiktoken's constructor of an encoding returns: the keyword arguments of ``tiktoken.Encoding``."""

    name: str
    pat_str: str
    special_tokens: dict[str, int]
    mergeable_ranks: dict[bytes, int]


_decoder = msgspec.msgpack.Decoder(EncodingSpec)


def cache_dir() -> Path:
    """``$CONTEXTLEDGER_CACHE_DIR``, else ``$XDG_CACHE_HOME/contextledger``, else ``~/.cache/contextledger``.

    (The files kept there can always be made again: deleting the directory costs time only.)
    """
    chosen = os.environ.get(CACHE_DIR_ENV)
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "contextledger"


def load_encoding(source: Path, construct: Callable[[], dict[str, Any]]) -> Any:
    """The ``tiktoken.Encoding`` that ``construct()`` describes, whose ranks it parses from ``source``.

    Built from the cache file of ``source``'s content when there is a sound one; else ``construct()`` runs
    (tiktoken's own parse and hash check) and its result is cached for the next process.
    """
    import tiktoken  # noqa: PLC0415 - loaded only when an encoding is

    key = hashlib.sha256(source.read_bytes()).hexdigest()[:32]
    path = cache_dir() / "tiktoken" / f"{source.stem}-{key}-tiktoken{tiktoken.__version__}.msgpack"
    spec = _read(path)
    if spec is None:
        spec = EncodingSpec(**construct())
        _write(path, spec)
    return tiktoken.Encoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=spec.mergeable_ranks,
        special_tokens=spec.special_tokens,
    )


def _read(path: Path) -> EncodingSpec | None:
    """The spec kept at ``path``; None when there is none or it fails its digest or its decode."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    body = memoryview(data)[_DIGEST:]
    if hashlib.sha256(body).digest() != data[:_DIGEST]:
        log.debug("encoding cache file fails its digest", path=str(path))
        return None
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError:  # a file of the right digest but another layout: parsed again
        return None


def _write(path: Path, spec: EncodingSpec) -> None:
    """Keep ``spec`` at ``path`` (a whole file or none); a directory that cannot be written is skipped."""
    body = msgspec.msgpack.encode(spec)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(hashlib.sha256(body).digest())
                out.write(body)
            Path(temporary).replace(path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        log.debug("encoding cache not written", path=str(path), error=str(error))
