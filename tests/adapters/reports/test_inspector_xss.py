"""The inspector over a session seeded with an XSS corpus: no logged text runs, no request leaves the page."""

from __future__ import annotations

from datetime import UTC, datetime

import contextledger
import pytest
from contextledger.adapters.reports.page import render_page
from contextledger.adapters.reports.report_data import build_report
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.projections.presets import PRESETS
from contextledger.projections.provider_cache import provider_cache
from report_pages import open_report

SET = "window.__xss=(window.__xss||0)+1"
LEAK = "http://127.0.0.1:9/leak"
PAYLOADS = (
    f"<script>{SET}</script>",
    f"</script><script>{SET}</script>",
    f"<!--<script>{SET}</script>-->",
    f'<img src=x onerror="{SET}">',
    f'<img src="{LEAK}.png">',
    f"<svg onload={SET}><circle r=9 /></svg>",
    f"<svg><script>{SET}</script></svg>",
    f'<svg><a xlink:href="javascript:{SET}"><text y=20>click</text></a></svg>',
    f"<math><mtext><table><mglyph><style><img src=x onerror={SET}>",
    f'<math href="javascript:{SET}">x</math>',
    f'<a href="javascript:{SET}">javascript: link</a>',
    f'<a href="  jAvAsCrIpT:{SET}">spaced</a>',
    f'<iframe src="javascript:{SET}"></iframe>',
    f'<iframe srcdoc="<script>{SET}</script>"></iframe>',
    f'<body onload="{SET}">',
    f'<details open ontoggle="{SET}">',
    f'<input autofocus onfocus="{SET}">',
    f"<scr<script>ipt>{SET}</scr</script>ipt>",
    f'"><script>{SET}</script>',
    f"'-{SET}-'",
    f"${{{SET}}} `${{{SET}}}`",
    f'<meta http-equiv="refresh" content="0;url={LEAK}">',
    f'<link rel="stylesheet" href="{LEAK}.css">',
    f"<style>@import url({LEAK}.css); body{{background:url({LEAK}.gif)}}</style>",
    f'<object data="{LEAK}.swf"></object><embed src="{LEAK}.swf">',
    f'<form action="{LEAK}"><button>go</button></form>',
    f"<base href='{LEAK}/'>",
    f"\u2028\u2029<script>{SET}</script>\u2028",
    f"\\u003cscript\\u003e{SET}\\u003c/script\\u003e",
    f"&lt;script&gt;{SET}&lt;/script&gt; &#60;script&#62;",
    f"\u202e<script>{SET}</script>\u202c zero\u200bwidth \ufeff bom",
    f"\uff1cscript\uff1e{SET}\uff1c/script\uff1e",
    f"]]><![CDATA[<script>{SET}</script>]]>",
    f"\x1b[31mred\x1b[0m \x1b]8;;{LEAK}\x07terminal link\x1b]8;;\x07 \x1b[2J\x1b[H",
    f"\x1b]0;<script>{SET}</script>\x07 title escape",
    f'<noscript><p title="</noscript><img src=x onerror={SET}>">',
    f"<template><script>{SET}</script></template>",
    f'<div style="background:url({LEAK})">styled</div>',
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A session whose system prompt, messages, tool calls and results all carry the corpus; its report."""
    ledger = contextledger.open_ledger("memory://")
    corpus = "\n".join(PAYLOADS)
    session = ledger.start_session(
        session_id="<img src=x onerror=__xss=1>",
        system_prompt="You are careful. " + corpus,
        at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    for turn, payload in enumerate(PAYLOADS):
        ledger.add_user_message(session, f"turn {turn}: {payload}\n{corpus}")
        call = f"call-{turn}"
        ledger.add_assistant_message(
            session,
            f"I will run {payload}",
            tool_calls=[{"id": call, "name": "bash", "arguments": '{"command": "cat \'' + payload + "'\"}"}],
        )
        ledger.add_tool_result(
            session, call, f"{payload}\n{corpus}\n" + "filler line\n" * 40, tool_name="bash"
        )
    ledger.add_assistant_message(session, f"done {PAYLOADS[0]}")
    data = build_report(
        ledger,
        session,
        policy=("default", PRESETS["default"]),
        cache=provider_cache("anthropic", "5m"),
        new_scratch=lambda: contextledger.open_ledger("memory://"),
        now=datetime(2026, 1, 2, tzinfo=UTC),
        budget=6000,
        compare=("threshold", PRESETS["threshold"]),
        make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
        tokenizer="heuristic",
    )
    assert data.summaries, "the corpus session should be compacted, so its summaries are shown too"
    path = tmp_path_factory.mktemp("xss") / "report.html"
    path.write_text(render_page(data), encoding="utf-8")
    return path


def _assert_inert(opened) -> None:
    page = opened.page
    assert page.evaluate("window.__xss") is None
    assert opened.errors == []
    assert opened.console == []
    assert opened.foreign_requests() == []
    assert opened.blocked == []
    found = page.evaluate(
        """() => {
          const out = [];
          for (const e of document.querySelectorAll('*')) {
            for (const a of e.attributes) if (a.name.startsWith('on')) out.push(e.tagName + ' ' + a.name);
            const foreign = ['IMG', 'IFRAME', 'OBJECT', 'EMBED', 'MATH', 'BASE', 'TEMPLATE', 'NOSCRIPT'];
            const form = e.tagName === 'FORM' && e.id !== 'why-form';
            if (foreign.includes(e.tagName) || form) out.push(e.tagName);
            if (e.tagName === 'A' && e.hasAttribute('href')) out.push('A href');
          }
          out.push('scripts:' + document.scripts.length);
          return out;
        }"""
    )
    assert found == ["scripts:2"]


def test_no_logged_text_runs_and_nothing_leaves_the_page(browser, report, screenshots):
    """Open, visit every call, open every row of the last call, search payloads: the flag stays unset."""
    opened = open_report(browser, report)
    page = opened.page
    assert "<img src=x onerror=__xss=1>" in (page.text_content("#meta") or "")
    calls = int(page.get_attribute("body", "data-selected") or "0")
    assert calls > 5
    page.keyboard.press("Home")
    for _ in range(calls - 1):
        page.keyboard.press("ArrowRight")
    assert page.get_attribute("body", "data-selected") == str(calls)
    rows = page.locator("#manifest .row")
    shown = []
    for index in range(min(rows.count(), 14)):
        rows.nth(index).click()
        shown.append(page.text_content("#text-body") or "")
        links = page.locator("#text-links a")
        if links.count():
            links.first.click()
            shown.append(page.text_content("#text-body") or "")
        page.click("#text-close")
    assert any("</script><script>window.__xss" in text for text in shown), "the payloads are shown as text"
    for query, regex in (
        ("<script>", False),
        ("onerror=", False),
        ("javascript:.*xss", True),
        ("(unclosed", True),
    ):
        page.fill("#why-query", query)
        page.set_checked("#why-regex", regex)
        page.click("#why-form button")
    assert (page.text_content("#why-result") or "").startswith("Not a regular expression")
    page.goto(report.as_uri() + "#call=3")
    page.wait_for_function("document.body.dataset.selected === '3'")
    page.screenshot(path=str(screenshots / "xss-corpus.png"), full_page=True)
    _assert_inert(opened)
    page.close()


def test_the_embedded_data_cannot_end_its_script_element(report):
    """The data element holds no ``</script>``, ``<!--``, raw U+2028/U+2029: every ``<`` is escaped."""
    html = report.read_text(encoding="utf-8")
    data = html.split('<script type="application/json" id="report-data">')[1].split("</script>")[0]
    assert "<" not in data
    assert "\u2028" not in data
    assert "\u2029" not in data
    assert "\\u003c/script\\u003e" in data
