"""Opening a report in the test browser: requests and console messages are kept, network requests fail."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Opened:
    """A report page and what it did: console messages, page errors, requests (allowed or blocked)."""

    page: Any
    url: str
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def foreign_requests(self) -> list[str]:
        """Every request other than the report file itself."""
        return [url for url in self.requests if url.split("#")[0] != self.url.split("#")[0]]


def open_report(browser: Any, path: Path, fragment: str = "") -> Opened:
    """Open ``path`` at 1280x800, wait for the first render; a request for anything else is aborted."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    opened = Opened(page=page, url=path.as_uri() + fragment)

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if url.split("#")[0] == path.as_uri():
            request_route.continue_()
        else:
            opened.blocked.append(url)
            request_route.abort()

    page.route("**/*", route)
    page.on("console", lambda message: opened.console.append((message.type, message.text)))
    page.on("pageerror", lambda error: opened.errors.append(str(error)))
    page.on("request", lambda request: opened.requests.append(request.url))
    page.goto(opened.url)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return opened
