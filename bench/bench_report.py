"""The inspector at scale: a 500-call session with 5 MB of content, its report opened in headless chromium.

Usage::

    .venv/bin/python bench/bench_report.py [--calls 500] [--megabytes 5] [--runs 5]

The session is generated (500 steps of an assistant call and a ~10 KB tool result, every text
distinct), imported into an in-memory ledger, and its report built with the default policy (calls
computed, extractive summaries). The report is then opened ``--runs`` times, each in a fresh browser
context of one headless Debian chromium: the figure is the time from navigation to the first render
of the last call's manifest (``body[data-ready]``, set after the manifest rows are drawn), measured
in the page (``performance.now()``) and from Python (``goto`` to the selector). The floor is the same
bytes opened with a script that only parses the embedded data. Responsiveness: the median time the
page takes to switch calls on a key press. Results land in ``bench/results/report.json``; nothing is
asserted on time.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import contextledger
import structlog
from contextledger.adapters.reports.page import render_page
from contextledger.adapters.reports.report_data import build_report
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.projections.presets import PRESETS
from contextledger.projections.provider_cache import provider_cache
from harness import save

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "module", "import", "error", "value", "path", "test",
         "file", "class", "def", "return", "assert", "raise", "self", "config", "parser"]  # fmt: skip


def _session(ledger: Any, calls: int, megabytes: float) -> str:
    """Generate a coding-agent session: ``calls`` steps, about ``megabytes`` MB of tool output."""
    per_result = int(megabytes * 1_000_000 / calls)
    session = ledger.start_session(system_prompt="You are a coding agent. Fix the failing tests.")
    ledger.add_user_message(session, "The test suite fails in parser.py; find out why and fix it.")
    for step in range(calls):
        call = f"call-{step}"
        ledger.add_assistant_message(
            session,
            f"Step {step}: let me look at file_{step}.py.",
            tool_calls=[{"id": call, "name": "read_file", "arguments": f'{{"path": "src/file_{step}.py"}}'}],
        )
        lines, size, n = [], 0, 0
        while size < per_result:
            line = f"{step}:{n} " + " ".join(WORDS[(step * 7 + n * 3 + i) % len(WORDS)] for i in range(12))
            lines.append(line)
            size += len(line) + 1
            n += 1
        ledger.add_tool_result(session, call, "\n".join(lines), tool_name="read_file")
    ledger.add_assistant_message(session, "Done: the parser handles the empty case now.")
    return session


FLOOR_PAGE = (
    '<!doctype html><html><head><meta charset="utf-8"><title>floor</title></head><body>'
    '<script type="application/json" id="report-data">{data}</script>'
    "<script>JSON.parse(document.getElementById('report-data').textContent);"
    "document.body.dataset.readyMs=String(Math.round(performance.now()));document.body.dataset.ready='1';"
    "</script></body></html>"
)


def _open(browser: Any, path: Path) -> tuple[float, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", state="attached", timeout=60_000)
    wall = (time.perf_counter() - start) * 1000
    in_page = float(page.evaluate("document.body.dataset.readyMs"))
    context.close()
    return in_page, wall


def _switch_ms(browser: Any, path: Path, presses: int = 30) -> float:
    """Median time the page spends handling one ArrowLeft (select the previous call, redraw)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", state="attached", timeout=60_000)
    times = page.evaluate(
        """(n) => { const out = [];
          for (let i = 0; i < n; i++) { const t = performance.now();
            document.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowLeft', bubbles: true}));
            out.push(performance.now() - t); }
          return out; }""",
        presses,
    )
    context.close()
    return statistics.median(times)


def _stats(values: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(values), 1), "min_ms": round(min(values), 1),
            "max_ms": round(max(values), 1)}  # fmt: skip


def main() -> None:
    """Build the session and its report, open it ``--runs`` times, save and print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--megabytes", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - the dev extra installs it

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    ledger = contextledger.open_ledger("memory://")
    session = _session(ledger, args.calls, args.megabytes)
    content = sum(
        len(ledger.text(getattr(r.event, "content", None)).encode()) for r in ledger.events(session)
    )
    start = time.perf_counter()
    data = build_report(
        ledger,
        session,
        policy=("default", PRESETS["default"]),
        cache=provider_cache("anthropic", "5m"),
        new_scratch=lambda: contextledger.open_ledger("memory://"),
        now=datetime.now(UTC),
        make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
        tokenizer="heuristic",
    )
    html = render_page(data)
    build_s = time.perf_counter() - start
    blocks = sum(len(c.blocks) for c in data.calls)
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.html"
        report.write_text(html, encoding="utf-8")
        floor = Path(folder) / "floor.html"
        floor.write_text(FLOOR_PAGE.format(data=html.split('id="report-data">')[1].split("</script>")[0]))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            _open(browser, report)  # one warm-up: the browser's own start is not the page's
            opened = [_open(browser, report) for _ in range(args.runs)]
            floors = [_open(browser, floor) for _ in range(args.runs)]
            switch = _switch_ms(browser, report)
            browser.close()
    in_page = _stats([o[0] for o in opened])
    wall = _stats([o[1] for o in opened])
    floor_in_page = _stats([f[0] for f in floors])
    result = {
        "calls": len(data.calls),
        "events": len(data.events),
        "content_bytes": content,
        "distinct_texts": len(data.texts),
        "blocks": blocks,
        "html_bytes": len(html.encode()),
        "build_seconds": round(build_s, 1),
        "runs": args.runs,
        "first_render_in_page": in_page,
        "first_render_wall": wall,
        "floor_parse_only_in_page": floor_in_page,
        "ratio_to_floor": round(in_page["median_ms"] / max(floor_in_page["median_ms"], 1.0), 2),
        "switch_call_median_ms": round(switch, 2),
    }
    save("report", result)
    print(
        f"{result['calls']} calls, {content / 1e6:.1f} MB content, "
        f"report {result['html_bytes'] / 1e6:.1f} MB "
        f"({result['distinct_texts']} texts, {blocks} blocks), built in {build_s:.1f} s\n"
        f"first render of the last call's manifest (in page, {args.runs} runs): "
        f"median {in_page['median_ms']} ms "
        f"(min {in_page['min_ms']}, max {in_page['max_ms']}); wall from goto: median {wall['median_ms']} ms "
        f"({wall['min_ms']}-{wall['max_ms']})\n"
        f"floor (same bytes, parse only): median {floor_in_page['median_ms']} ms; ratio "
        f"{result['ratio_to_floor']}x; switching call: median {result['switch_call_median_ms']} ms"
    )


if __name__ == "__main__":
    main()
