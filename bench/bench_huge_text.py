"""Huge texts: peak RSS and time of the first render after one 50 MB tool result, in fresh processes.

Each case runs two subprocesses: one writes a SQLite ledger (a user message, one tool call and its
50 MB result), then a new process opens it and renders once; that process reports its render time and
its peak RSS (``harness.peak_kib``: its own VmHWM) before and after the render. Cases: text
made of the real transcripts in tests/fixtures/transcripts (repeated to the size), and one character
repeated; each with cl100k_base and with the heuristic counter. Render time: wall and CPU seconds.

Run: .venv/bin/python bench/bench_huge_text.py [--mb 50] [--tokenizers cl100k_base heuristic]
     [--save] [--label before]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import FIXTURES, peak_mib, save

KINDS = ("text", "repeated")


def huge_text(kind: str, size: int) -> str:
    """Return ``size`` characters: real transcript text repeated, or one character repeated."""
    if kind == "repeated":
        return "a" * size
    corpus = "\n".join(
        p.read_text(encoding="utf-8", errors="replace") for p in sorted(FIXTURES.iterdir()) if p.is_file()
    )
    return (corpus * (size // len(corpus) + 1))[:size]


def cpu_s() -> float:
    """CPU seconds (user + system) this process used so far: steadier than wall time on a busy machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write(url: str, kind: str, size: int) -> None:
    """Child: store one session whose tool result is ``size`` characters of ``kind``."""
    import contextledger  # noqa: PLC0415 - the child measures its own imports

    text = huge_text(kind, size)
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="bench")
        ledger.add_user_message(session, "read the log")
        ledger.add_assistant_message(
            session, None, tool_calls=[{"id": "c1", "name": "cat", "arguments": "{}"}]
        )
        ledger.add_tool_result(session, "c1", text)
        ledger.add_assistant_message(session, "done")
    print(json.dumps({"session": session, "write_peak_mb": round(peak_mib(), 1)}))


def render(url: str, session: str, tokenizer: str) -> None:
    """Child: open the ledger and time its first render; report peak RSS before and after."""
    import contextledger  # noqa: PLC0415

    with contextledger.open_ledger(url) as ledger:
        renderer = contextledger.Renderer(ledger, tokenizer=tokenizer)
        before = peak_mib()
        start, cpu = time.perf_counter(), cpu_s()
        context = renderer.render(session, budget=32_000)
        seconds, cpu = time.perf_counter() - start, cpu_s() - cpu
        print(
            json.dumps(
                {
                    "render_s": round(seconds, 2),
                    "render_cpu_s": round(cpu, 2),
                    "peak_before_render_mb": round(before, 1),
                    "peak_mb": round(peak_mib(), 1),
                    "tokens": context.tokens,
                }
            )
        )


def _child(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Run every case and print (optionally save) the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--tokenizers", nargs="+", default=["cl100k_base", "heuristic"])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--save", action="store_true", help="write bench/results/huge_text[-LABEL].json")
    parser.add_argument("--label", default="", help="e.g. 'before' when measuring an older checkout")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        role, *rest = options.child
        if role == "write":
            write(rest[0], rest[1], int(rest[2]))
        else:
            render(rest[0], rest[1], rest[2])
        return
    size = int(options.mb * 1_000_000)
    rows = []
    for kind in options.kinds:
        for tokenizer in options.tokenizers:
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite:///{Path(tmp) / 'huge.db'}"
                written = _child("--child", "write", url, kind, str(size))
                rendered = _child("--child", "render", url, str(written["session"]), tokenizer)
            row = {"kind": kind, "chars": size, "tokenizer": tokenizer, **written, **rendered}
            row.pop("session")
            rows.append(row)
            print(json.dumps(row), flush=True)
    if options.save:
        print(save("huge_text" + (f"-{options.label}" if options.label else ""), {"rows": rows}))


if __name__ == "__main__":
    main()
