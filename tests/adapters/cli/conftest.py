"""The CLI run in the test's own process: the console script's ``main`` with its output captured."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

RunCli = Callable[..., tuple[int, str, str]]
"""``run_cli(*args)`` -> (exit code, stdout, stderr)."""


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunCli:
    """Run ``contextledger ARGS`` through ``contextledger.cli.main`` here (faster than a subprocess)."""
    from contextledger.cli import main  # noqa: PLC0415 - the console script's entry point

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["contextledger", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        out, err = capsys.readouterr()
        return int(exited.value.code or 0), out, err

    return run
