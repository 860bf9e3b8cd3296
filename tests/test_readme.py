"""The README's snippets run: the "Testing your agent" example is a passing test."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _snippet(heading: str) -> str:
    """Return the first ``python`` block of the README section called ``heading``."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, f"no python block in the README section {heading!r}"
    return found.group(1)


def test_the_testing_your_agent_snippet_passes():
    """The snippet defines tests; each runs and passes as a user's own test would."""
    namespace: dict[str, object] = {"__name__": "readme_snippet"}
    exec(compile(_snippet("Testing your agent"), "README.md#testing-your-agent", "exec"), namespace)  # noqa: S102
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert len(tests) == 1
    for test in tests:
        test()
