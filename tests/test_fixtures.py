"""The real transcripts carried in tests/fixtures are the exact files their provenance names."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"
PROVENANCE = (FIXTURES / "PROVENANCE.md").read_text(encoding="utf-8")
TRANSCRIPTS = sorted(p for p in FIXTURES.iterdir() if p.name not in {"PROVENANCE.md", "FORMATS.md"})


def _recorded_sha256() -> dict[str, str]:
    """Map each file name of PROVENANCE's per-file sections to the sha256 it records."""
    recorded: dict[str, str] = {}
    for section in PROVENANCE.split("\n### ")[1:]:
        name = re.search(r"`([^`]+)`", section)
        digest = re.search(r"sha256: `([0-9a-f]{64})`", section)
        if name and digest:
            recorded[name.group(1)] = digest.group(1)
    return recorded


def test_every_format_is_carried():
    """Every source (tau-bench carries the OpenAI chat format) has its transcripts in the repository."""
    prefixes = {p.name.split("__")[0] for p in TRANSCRIPTS}
    expected = {"aider", "claude-code", "mini-swe-agent", "openhands-events", "swe-agent", "tau-bench"}
    assert prefixes == expected
    assert len(TRANSCRIPTS) == 15


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.name)
def test_transcript_is_byte_identical_to_its_provenance(path):
    """The file's sha256 is the one PROVENANCE.md records for it (MIT license noted there)."""
    recorded = _recorded_sha256()
    assert path.name in recorded, f"{path.name} has no provenance entry"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded[path.name]
    assert "License: MIT" in PROVENANCE.split(f"`{path.name}`", 2)[-1].split("\n### ")[0]
