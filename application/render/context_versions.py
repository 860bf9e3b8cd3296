"""Names of context projection versions, and the command that builds and activates one."""

from __future__ import annotations

import hashlib

from contextledger.projections.fold import Projector

__all__ = ["CONFIG_PREFIX", "CONTEXT_VIEW", "ROW_FORMAT", "projection_version", "rebuild_command"]

CONTEXT_VIEW = "context"
"""The registry name whose active version serves rendered context."""

ROW_FORMAT = 3
"""Part of every version's name: raise it when a change to the fold or the row layout changes rows
(a version built by older code is then simply another version, never read with the new layout)."""

CONFIG_PREFIX = "config/"
"""Registry names ``config/<version>`` hold the policy, budget and tokenizer a version was built under."""


def projection_version(projector: Projector) -> str:
    """The versioned name of a context projection: ``context/<policy hash>/<budget>/<tokenizer>/r<format>``.

    Everything a folded state depends on is in it: the policy's content (its fingerprint), the
    budget and the tokenizer. Summary artifacts are events of the log, so the summarizer that
    wrote them is not (a projection folds whichever artifacts are recorded).
    """
    policy = hashlib.sha256(projector.policy.fingerprint().encode()).hexdigest()[:16]
    return f"{CONTEXT_VIEW}/{policy}/{projector.budget.total}/{projector.tokenizer}/r{ROW_FORMAT}"


def rebuild_command(policy: str, budget: int | None) -> str:
    """The command line that builds and activates the projection of a config."""
    return (
        f"contextledger rebuild --policy {policy}" + (f" --budget {budget}" if budget else "") + " --switch"
    )
