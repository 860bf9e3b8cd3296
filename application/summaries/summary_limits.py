"""What a worker holds a summary to: the requesting policy, and what it shows under the request's budget."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pydantic
from contextledger.application.kernel.logs import get_logger
from contextledger.domain.events import CompactionRequested
from contextledger.projections.policy import Policy
from contextledger.projections.render import summary_framing

__all__ = ["request_policy", "summary_limit"]

log = get_logger(__name__)


def request_policy(request: CompactionRequested, known: Mapping[str, Policy]) -> Policy | None:
    """The requesting policy: the one the request carries, else a known one by its key or name.

    Requests planned before they carried it name a preset or a policy the worker was given; a policy
    file's was unknown to a worker and its bound ignored.
    """
    if request.policy_json:
        try:
            return Policy.model_validate_json(request.policy_json)
        except pydantic.ValidationError:  # a policy this version cannot read: as before it was carried
            log.warning("request_policy_unreadable", request_id=request.request_id)
    return known.get(request.policy) or known.get(request.policy.split("@")[0])


def summary_limit(
    request: CompactionRequested, policy: Policy | None, count: Callable[[str], int], default: int
) -> int:
    """The most tokens the summary text may take to be shown (``SummaryConfig.fits``), framing aside.

    That is the policy's ``summary.max_tokens`` (``default``, the worker's, without one), and never more
    than one message's share of the request's budget: a larger summary was recorded ``done`` and never
    shown, the span dropped with nothing standing for it. Without a policy, ``default``.
    """
    if policy is None:
        return default
    framing = summary_framing(count, request.covers_from, request.covers_through)
    limits = policy.budget.build()
    if request.budget > 0:
        limits = limits.with_prompt_limit(request.budget)
    if policy.summary.max_tokens:
        return max(1, min(policy.summary.max_tokens, limits.message_tokens) - framing)
    return max(1, min(default, limits.message_tokens - framing))
