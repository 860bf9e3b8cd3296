"""The inspector in headless chromium over the longest real transcript: charts, manifest, search, keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import contextledger
import pytest
from report_pages import open_report

CLI = str(Path(sys.executable).with_name("contextledger"))
TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
DJANGO = "mini-swe-agent__django__django-16560.traj.json"
"""The longest transcript of the fixtures (292 events, 145 model calls)."""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=600)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    """The django session imported, and its report written by the CLI (16k budget, threshold compared)."""
    folder = tmp_path_factory.mktemp("report")
    db = f"sqlite:///{folder / 'ledger.db'}"
    assert _run("import", str(TRANSCRIPTS / DJANGO), "--db", db, "--json").returncode == 0
    [session] = json.loads(_run("sessions", "--db", db, "--json").stdout)["sessions"]
    path = folder / "report.html"
    done = _run(
        "report", session["session_id"], "-o", str(path), "--budget", "16000", "--compare", "threshold",
        "--tokenizer", "heuristic", "--db", db, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return path, json.loads(done.stdout)


def test_the_cli_writes_one_self_contained_file(report):
    """The file holds its script, style and data inline and names no external resource."""
    path, summary = report
    html = path.read_text(encoding="utf-8")
    assert summary == {
        "path": str(path),
        "session_id": summary["session_id"],
        "source": "computed",
        "calls": 145,
        "bytes": len(html.encode()),
    }
    page, data = html.split('<script type="application/json" id="report-data">')
    assert 'http-equiv="Content-Security-Policy"' in page
    assert "default-src 'none'" in page
    assert " src=" not in page
    assert '<link rel="stylesheet"' not in page
    assert "https://" not in page
    assert data.count("</script>") == 2  # the data's end and the inline script's end: the data holds none


def test_it_opens_on_the_last_call_with_charts_drawn(browser, report, screenshots):
    """Last call selected, one bar path per tier with data, budget line, markers, no error, no request out."""
    path, _ = report
    opened = open_report(browser, path)
    page = opened.page
    assert page.get_attribute("body", "data-selected") == "145"
    assert page.text_content("#call-title").startswith("145 of 145")
    for tier in ("system", "state", "summary", "history", "free", "reserve"):
        assert len(page.get_attribute(f"#timeline path.bar-{tier}", "d") or "") > 20, tier
    assert page.locator("#timeline path.budget-line").count() == 1
    assert page.locator("#timeline text.marker-compaction").count() >= 1
    assert page.locator("#timeline text.marker-summary_applied").count() >= 1
    assert page.locator("#cache-chart path.cache-read").count() == 1
    assert page.locator("#cache-chart path.cost-line").count() == 1
    assert page.locator("#compare-panel").is_visible()
    assert page.locator("#compare-charts svg").count() == 2
    assert page.locator("#manifest .row").count() > 5
    assert page.locator("#summaries .summary-card").count() >= 1
    page.screenshot(path=str(screenshots / "django-last-call.png"))
    page.screenshot(path=str(screenshots / "django-full-page.png"), full_page=True)
    assert opened.errors == []
    assert [m for m in opened.console if m[0] in {"error", "warning"}] == []
    assert opened.foreign_requests() == []
    page.close()


def test_clicking_a_call_opens_its_manifest_and_a_stub_links_to_its_original(browser, report, screenshots):
    """A click on the 10th column selects call 10; a row opens its text; an evicted row opens the event."""
    path, _ = report
    opened = open_report(browser, path)
    page = opened.page
    box = page.locator("#timeline svg").bounding_box()
    assert box is not None
    view = page.evaluate("(() => { const b = document.querySelector('#timeline svg').viewBox.baseVal; "
                         "return [b.width]; })()")  # fmt: skip
    scale = box["width"] / view[0]
    left, right = 50, 44  # the chart's margins in its own units
    column = (view[0] - left - right) / 145
    page.mouse.click(box["x"] + (left + column * 9.5) * scale, box["y"] + 150)
    assert page.get_attribute("body", "data-selected") == "10"
    assert page.text_content("#call-title").startswith("10 of 145")
    assert page.evaluate("location.hash") == "#call=10"
    rows = page.locator("#manifest .row")
    assert rows.count() > 3
    assert rows.nth(0).locator(".c-kind").text_content() == "system"
    rows.nth(2).click()
    assert page.locator("#text-dialog").is_visible()
    assert len(page.text_content("#text-body") or "") > 20
    page.click("#text-close")
    page.goto(path.as_uri() + "#call=145")
    page.wait_for_function("document.body.dataset.selected === '145'")
    gone = page.locator("#manifest .row.gone").first
    assert "evicted" in (gone.locator(".c-text").text_content() or "")
    gone.click()
    assert page.locator("#text-dialog").is_visible()
    page.locator("#text-links a").first.click()
    assert (page.text_content("#text-title") or "").startswith("event #")
    page.screenshot(path=str(screenshots / "django-original-text.png"))
    assert opened.errors == []
    page.close()


def test_call_links_and_keyboard_select_calls(browser, report):
    """``#call=60`` selects call 60; arrow keys, Home and End move the selection; ``/`` focuses the search."""
    path, _ = report
    opened = open_report(browser, path, "#call=60")
    page = opened.page
    assert page.get_attribute("body", "data-selected") == "60"
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("body", "data-selected") == "59"
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.get_attribute("body", "data-selected") == "61"
    page.keyboard.press("Home")
    assert page.get_attribute("body", "data-selected") == "1"
    assert "first call" in (page.text_content("#diff") or "")
    page.keyboard.press("End")
    assert page.get_attribute("body", "data-selected") == "145"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.locator("#manifest .row.focus .c-pos").text_content() == "#2"
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "why-query"
    assert opened.errors == []
    page.close()


def test_why_not_finds_a_fact_and_names_the_call_and_rule_it_left_by(browser, report, screenshots):
    """A fact of an early tool result: entered at #60, present at first, then summarized or dropped."""
    path, _ = report
    opened = open_report(browser, path)
    page = opened.page
    page.fill("#why-query", "_delete_unique_sql")
    page.click("#why-form button")
    verdict = page.text_content("#why-result .verdict") or ""
    assert verdict.startswith("Entered at #60 (ToolResult, bash).")
    assert "First absent from call" in verdict
    fates = page.locator("#why-result table td:nth-child(3)").all_text_contents()
    assert fates[0] == "not yet logged"
    assert "verbatim" in fates
    assert {"summarized (text lost)", "dropped", "absent"} & set(fates)
    page.fill("#why-query", "violation_error_c[o]de")
    page.check("#why-regex")
    page.click("#why-form button")
    assert (page.text_content("#why-result .verdict") or "").startswith("Entered at #")
    page.fill("#why-query", "no such fact anywhere 0x5eed")
    page.uncheck("#why-regex")
    page.click("#why-form button")
    assert page.text_content("#why-result .verdict") == "Not in the log: the session never held it."
    page.fill("#why-query", "_delete_unique_sql")
    page.click("#why-form button")
    page.locator("#why-panel").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "django-why-not.png"))
    assert opened.errors == []
    page.close()


def test_an_unknown_session_is_a_typed_error_and_writes_nothing(tmp_path):
    """``report`` on a session the ledger lacks: SessionNotFoundError on stderr, exit 1, no file."""
    db = f"sqlite:///{tmp_path / 'empty.db'}"
    contextledger.open_ledger(db).close()
    before = sorted(tmp_path.iterdir())
    path = tmp_path / "report.html"
    done = _run("report", "no-such-session", "-o", str(path), "--db", db, "--json")
    assert done.returncode == 1
    assert done.stdout == ""
    assert json.loads(done.stderr)["error"]["type"] == "SessionNotFoundError"
    assert sorted(tmp_path.iterdir()) == before
