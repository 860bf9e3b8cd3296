"""API keys never leak from a summarizer's error path: any form, any cut; errors, logs, events, --json."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from contextledger.adapters.summarizers.http import HttpPolicy
from contextledger.adapters.summarizers.models import AnthropicSummarizer, OpenAICompatibleSummarizer
from contextledger.domain.errors import SummarizerError
from contextledger.domain.redaction import MIN_PARTIAL
from contextledger.projections.summary_requests import SpanEntry, SummaryRequest

sys.path.insert(0, str(Path(__file__).parent))
from loopback import Reply, serve

CLI = str(Path(sys.executable).with_name("contextledger"))
KEY = "sk-proj-7Hq2Lx9VbN4mZt6RwY8sKc3PdF5gJ1aE"
FAST = HttpPolicy(timeout=2.0, attempts=2, backoff=0.01, max_retry_after=5.0)


def _leaks(text: str) -> list[str]:
    """Runs of MIN_PARTIAL characters of KEY (past its public "sk-proj-" head) found in ``text``."""
    return [
        KEY[i : i + MIN_PARTIAL]
        for i in range(1, len(KEY) - MIN_PARTIAL + 1)
        if KEY[i : i + MIN_PARTIAL] in text
    ]


def _request() -> SummaryRequest:
    return SummaryRequest(
        session_id="s",
        covers_from=1,
        covers_through=1,
        round=1,
        original_task="t",
        entries=(SpanEntry(position=1, role="user", text="t"),),
        prefix=None,
    )


BODIES = {
    "straddling the 300-character cut": {"error": {"message": "x" * 255 + f"bad key {KEY} given"}},
    "u-escaped by the server": None,  # raw JSON below
    "url-encoded in an echoed URL": {"error": "GET /v1?key=" + "".join(f"%{ord(c):02X}" for c in KEY)},
    "the provider's masked form": {"error": "Incorrect API key provided: sk-proj-" + "*" * 24 + KEY[-4:]},
}
RAW = {"u-escaped by the server": '{"error": "bad key ' + "".join(f"\\u{ord(c):04x}" for c in KEY) + '"}'}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("form", list(BODIES))
def test_no_form_of_the_key_reaches_the_error_or_the_logs(form, kind, caplog):
    """A 401 (after a retried 503) echoing the key in some form: error and log lines hold none of it."""
    body, raw = BODIES[form], RAW.get(form)
    busy = Reply(status=503, body=body, raw=raw, headers={"retry-after": "0"})
    refused = Reply(status=401, body=body, raw=raw)
    with caplog.at_level(logging.INFO, logger="contextledger"), serve(busy, refused) as (url, _):
        summarizer = (
            OpenAICompatibleSummarizer(model="m", base_url=f"{url}/v1", api_key=KEY, policy=FAST)
            if kind == "openai"
            else AnthropicSummarizer(model="m", base_url=url, api_key=KEY, policy=FAST)
        )
        with pytest.raises(SummarizerError) as caught:
            summarizer.summarize(_request())
    assert "[redacted]" in str(caught.value)
    assert _leaks(str(caught.value)) == []
    logs = [record.structlog for record in caplog.records if hasattr(record, "structlog")]
    assert logs
    assert _leaks(repr(logs)) == []
    assert _leaks(caplog.text) == []
    if form == "the provider's masked form":
        assert KEY[-4:] not in str(caught.value)


def test_worker_events_json_and_status_hold_no_key(tmp_path):
    """Through the CLI: the failure event in the SQLite file, --json and --status output hold no key."""
    body = {"error": {"message": "x" * 260 + f" key={KEY} " + "".join(f"\\u{ord(c):04x}" for c in KEY)}}
    db_path = tmp_path / "k.db"
    db = f"sqlite:///{db_path}"
    import contextledger  # noqa: PLC0415

    with contextledger.open_ledger(db) as ledger:
        session = ledger.start_session(system_prompt="You are terse.")
        for i in range(12):
            ledger.add_user_message(session, f"question {i} " + "word " * 200)
            ledger.add_assistant_message(session, f"answer {i} " + "word " * 200)
    with serve(Reply(status=401, body=body)) as (url, _):
        env = dict(os.environ) | {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": f"{url}/v1"}
        outputs = []
        for args in (
            ("compact", session, "--policy", "threshold", "--budget", "4000", "--tokenizer", "heuristic"),
            ("worker", "--once", "--summarizer", "openai", "--tokenizer", "heuristic"),
            ("worker", "--status"),
            ("worker", "--once", "--summarizer", "openai", "--tokenizer", "heuristic"),
        ):
            for json_flag in (("--json",), ()):
                done = subprocess.run(
                    [CLI, *args, "--db", db, *json_flag], capture_output=True, text=True, check=False, env=env
                )
                outputs.append(done.stdout + done.stderr)
        status = subprocess.run(
            [CLI, "worker", "--status", "--db", db, "--json"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
    errors = [r["last_error"] for r in json.loads(status.stdout)["requests"] if r.get("last_error")]
    assert errors, status.stdout
    assert "[redacted]" in errors[0]
    assert _leaks("\n".join(outputs)) == []
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("k.db"))
    assert _leaks(stored.decode("latin-1")) == []
