"""Names of context projection versions, and the command that builds and activates one."""

from __future__ import annotations

import hashlib
import re

from contextledger.projections.fold import Projector

__all__ = [
    "CONFIG_PREFIX",
    "CONTEXT_VIEW",
    "ROW_FORMAT",
    "budget_label",
    "projection_version",
    "rebuild_command",
]

CONTEXT_VIEW = "context"
"""The registry name whose active version serves rendered context."""

ROW_FORMAT = 5
"""Part of every version's name: raise it when a change to the fold or the row layout changes rows
(a version built by older code is then simply another version, never read with the new layout)."""

CONFIG_PREFIX = "config/"
"""Registry names ``config/<version>`` hold the policy, budget and tokenizer a version was built under."""


def budget_label(prompt_tokens: int) -> str:
    """A prompt budget as a user writes it: ``16k`` for 16,000 tokens, the number when not whole thousands."""
    return f"{prompt_tokens // 1000}k" if prompt_tokens % 1000 == 0 else str(prompt_tokens)


def projection_version(projector: Projector) -> str:
    """A context projection's name: ``context/<policy>-<prompt budget>/<policy hash>/<tokenizer>/r<format>``.

    For instance ``context/default-16k/0123456789abcdef/cl100k_base/r5`` after ``rebuild --policy default
    --budget 16000``: the policy's name and the prompt budget the user gave (``Budget.prompt_limit``;
    the window adds the policy's output reserve and safety margin) say which build it is. Everything a
    folded state depends on is in it: the policy's content (its fingerprint, which holds the reserves,
    so with the prompt budget it fixes the window), the budget and the tokenizer. Summary artifacts
    are events of the log, so the summarizer that wrote them is not (a projection folds whichever
    artifacts are recorded).
    """
    policy = hashlib.sha256(projector.policy.fingerprint().encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", projector.policy.name).strip("-") or "policy"
    prompt = budget_label(projector.budget.prompt_limit)
    return f"{CONTEXT_VIEW}/{name}-{prompt}/{policy}/{projector.tokenizer}/r{ROW_FORMAT}"


def rebuild_command(policy: str, budget: int | None) -> str:
    """The command line that builds and activates the projection of a config."""
    return (
        f"contextledger rebuild --policy {policy}" + (f" --budget {budget}" if budget else "") + " --switch"
    )
