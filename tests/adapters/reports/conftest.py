"""One headless Debian chromium per test module, driven by Playwright; skipped locally, required in CI."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # report_pages: tests are not a package

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[3] / "build" / "report-screenshots"
"""Where the browser tests leave their screenshots (gitignored; CI keeps them as artifacts)."""
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the browser tests: {reason} (make test installs Debian's chromium)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """The system chromium (never a downloaded build), launched once for the module."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        _missing("chromium is not installed")
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415 - only the browser tests need it
    except ImportError:  # pragma: no cover - the dev extra installs it
        _missing("playwright is not installed")
        raise
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=shutil.which("chromium") or CHROMIUM, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """The folder screenshots are written to."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
