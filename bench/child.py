"""One measured operation in a fresh Python process; prints its timings as one JSON line.

Usage (from ``newprocess.py``): python bench/child.py OP SPAWN_NS [ARGS...]

OP is one of ``noop``, ``import``, ``append URL SESSION``, ``render URL SESSION BUDGET`` and
``floor DB SESSION SHOWN_JSON``. ``SPAWN_NS`` is the parent's ``time.time_ns()`` just before the
spawn, so ``since_spawn_s`` covers interpreter start, imports, opening and the operation. For ``render``,
``renderer_s`` is the construction of the Renderer (tokenizer loading), ``op_s`` the render plus
the OpenAI payload and its JSON encoding (the floor's work), ``render_only_s`` the render alone.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import json
import sys


def _run(op: str, args: list[str]) -> dict[str, float]:
    timings: dict[str, float] = {}
    if op == "noop":
        return timings
    if op == "floor":
        from pathlib import Path  # noqa: PLC0415

        sys.path.insert(0, str(Path(__file__).parent))
        import floor  # noqa: PLC0415

        timings["import_s"] = time.perf_counter() - STARTED
        shown = json.loads(Path(args[2]).read_text())
        start = time.perf_counter()
        floor.cold_render_floor(args[0], args[1], shown)
        timings["op_s"] = time.perf_counter() - start
        return timings
    import contextledger  # noqa: PLC0415
    import msgspec  # noqa: PLC0415

    timings["import_s"] = time.perf_counter() - STARTED
    if op == "import":
        return timings
    start = time.perf_counter()
    with contextledger.open_ledger(args[0]) as ledger:
        timings["open_s"] = time.perf_counter() - start
        start = time.perf_counter()
        if op == "append":
            ledger.add_user_message(args[1], "x" * 300)
        elif op == "render":
            renderer = contextledger.Renderer(ledger)  # loads the tokenizer
            timings["renderer_s"] = time.perf_counter() - start
            start = time.perf_counter()
            context = renderer.render(args[1], "default", budget=int(args[2]))
            timings["render_only_s"] = time.perf_counter() - start
            msgspec.json.encode(contextledger.to_openai(context))
        else:
            msg = f"unknown op {op!r}"
            raise SystemExit(msg)
        timings["op_s"] = time.perf_counter() - start
    return timings


def main() -> None:
    """Run the operation named on the command line and print its timings."""
    op, spawn_ns, *args = sys.argv[1:]
    timings = _run(op, args)
    timings["since_spawn_s"] = (time.time_ns() - int(spawn_ns)) / 1e9
    timings["in_child_s"] = time.perf_counter() - STARTED
    sys.stdout.write(json.dumps(timings) + "\n")


if __name__ == "__main__":
    main()
