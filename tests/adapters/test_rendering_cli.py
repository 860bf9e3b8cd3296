"""``contextledger render`` run as a user would: one JSON object with the wire payload and the budget."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import contextledger

CLI = str(Path(sys.executable).with_name("contextledger"))


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, check=False)


def _store(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(
            system_prompt="You are terse.",
            tools=[{"name": "bash", "description": "run a command"}],
            messages=[{"role": "user", "content": "list the files"}],
        )
        for n in range(30):
            call = {"id": f"c{n}", "name": "bash", "arguments": {"cmd": "ls"}}
            ledger.add_assistant_message(session, f"step {n}", tool_calls=[call])
            ledger.add_tool_result(session, f"c{n}", " ".join(f"file{n}_{i}.py" for i in range(80)))
    return url, session


def test_render_json_openai_prints_payload_tokens_budget_policy(tmp_path):
    """--json prints the context's fields (API names), its decisions and the OpenAI payload as sent."""
    url, session = _store(tmp_path)
    done = _run("render", session, "--db", url, "--budget", "2000", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) >= {"session_id", "position", "tokens", "budget", "policy", "decisions", "payload"}
    assert (out["session_id"], out["position"], out["format"]) == (session, 62, "openai")
    assert out["budget"] == 2000
    assert out["tokens"] <= 2000
    assert out["policy"] == "default"
    assert set(out["decisions"][0]) == {"first", "last", "action", "rule", "detail"}
    payload = out["payload"]
    assert set(payload) == {"messages", "tools"}
    assert payload["messages"][0] == {"role": "system", "content": "You are terse."}
    assert any(m["role"] == "tool" for m in payload["messages"])


def test_render_json_anthropic_has_system_apart(tmp_path):
    """--format anthropic puts the system prompt apart and tool results in user messages."""
    url, session = _store(tmp_path)
    done = _run("render", session, "--db", url, "--format", "anthropic", "--at", "10", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["format"] == "anthropic"
    assert out["payload"]["system"][0]["text"] == "You are terse."
    assert out["payload"]["messages"][0]["role"] == "user"
    assert out["budget"] == 118_000


def test_render_with_a_policy_file_and_a_table(tmp_path):
    """--policy accepts a TOML file; without --json a table and a summary line are printed."""
    url, session = _store(tmp_path)
    policy = tmp_path / "tight.toml"
    policy.write_text('base = "threshold"\n[budget]\ntotal = 3000\noutput_reserve = 0\nsafety_margin = 0\n')
    done = _run("render", session, "--db", url, "--policy", str(policy), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "policy tight" in done.stdout
    assert "of 3,000 tokens" in done.stdout


def test_render_errors_are_one_line(tmp_path):
    """A bad policy file, an unknown preset and a bad format each fail with one clear line."""
    url, session = _store(tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\ntotl = 5\n")
    done = _run("render", session, "--db", url, "--policy", str(bad), cwd=tmp_path)
    assert done.returncode == 1
    assert "budget.totl: unknown key" in done.stderr
    assert done.stderr.strip().count("\n") == 0
    unknown = _run("render", session, "--db", url, "--policy", "nope", cwd=tmp_path)
    assert unknown.returncode == 1
    assert "unknown policy 'nope'" in unknown.stderr
    wire = _run("render", session, "--db", url, "--format", "gemini", cwd=tmp_path)
    assert wire.returncode == 2
    assert "Invalid value for '--format'" in wire.stderr
    assert "'gemini' is not one of 'openai', 'anthropic'" in wire.stderr
