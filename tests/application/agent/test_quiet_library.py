"""A quiet library: nothing on the host's stdout or stderr unless the host configures logging."""

from __future__ import annotations

import json
import subprocess
import sys

HOST = r'''
import json, logging, sys
from dataclasses import dataclass
import contextledger
from contextledger.application.agent.follower import Follower, UpstreamNotification
from contextledger.domain.errors import ConcurrencyConflictError

if sys.argv[2] == "configured":
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s %(message)s")


@dataclass
class Said:
    text: str


class Upstream:
    """Twelve notifications: one the mapping knows, eleven it does not."""

    name = "quiet-test"

    def read(self, after, limit):
        said = UpstreamNotification(notification_id=1, type_name="Turn.Said", stream_id="t", event=Said("hi"))
        items = [said]
        items += [
            UpstreamNotification(notification_id=n, type_name="Turn.Mood", stream_id="t", event=Said("x"))
            for n in range(2, 13)
        ]
        return [i for i in items if i.notification_id > after][:limit]


with contextledger.open_ledger(sys.argv[1]) as ledger:
    agent = contextledger.AgentContext.start(ledger, provider="openai")
    real = ledger.append_many
    left = {"conflicts": 5}

    def flaky(*args, **kwargs):
        if left["conflicts"]:
            left["conflicts"] -= 1
            raise ConcurrencyConflictError(args[0], 0)
        return real(*args, **kwargs)

    ledger.append_many = flaky
    agent.add_user_message("list the files")
    agent.add_user_message("and their sizes")
    ledger.append_many = real
    mapping = {"Turn.Said": lambda e: contextledger.UserMessage(content=e.text)}
    report = Follower(ledger, Upstream(), mapping).run()
    result = {"conflicts": agent.conflicts, "skipped": len(report.skipped), "written": report.written}
with open(sys.argv[3], "w") as out:
    json.dump(result, out)
'''
"""A host program: an agent loop whose writes meet other writers, a follower with unmapped events."""


def _host(tmp_path, mode: str) -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    result = tmp_path / "result.json"
    done = subprocess.run(
        [sys.executable, "-c", HOST, f"sqlite:///{tmp_path / 'ledger.db'}", mode, str(result)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done, json.loads(result.read_text())


def test_an_agent_loop_with_retries_and_a_follower_with_skips_write_nothing_to_stdout_or_stderr(tmp_path):
    """Retried writes and skipped notifications happen, and the host's stdout and stderr stay empty."""
    done, result = _host(tmp_path, "quiet")
    assert result == {"conflicts": 5, "skipped": 11, "written": 1}
    assert done.stdout == ""
    assert done.stderr == ""


def test_a_host_that_configures_logging_gets_one_aggregated_line_per_run(tmp_path):
    """With the host's logging on, the retries are one line per write and the skips one line per run."""
    done, result = _host(tmp_path, "configured")
    assert result["skipped"] == 11
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    skipped = [line for line in lines if "follower.skipped" in line]
    assert len(skipped) == 1
    assert "skipped=11" in skipped[0]
    assert "'Turn.Mood (unmapped)': 11" in skipped[0]
    retried = [line for line in lines if "agent_loop.retried" in line]
    assert retried == [
        "contextledger.application.agent.agent_loop agent_loop.retried session_id="
        + repr(retried[0].split("session_id=")[1].split(" ")[0].strip("'"))
        + " conflicts=5"
    ]
