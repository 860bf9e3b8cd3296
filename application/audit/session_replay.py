"""Replay a recorded session call by call into a scratch ledger, with the summary worker running alongside."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.summary_worker import SummaryWorker
from contextledger.domain.content import BlobText
from contextledger.domain.events import AnyEvent, AssistantMessageAdded, CompactionRequested, SessionStarted
from contextledger.domain.ports import TokenCounter
from contextledger.projections.context import RenderedContext
from contextledger.projections.policy import Policy
from contextledger.projections.summary_requests import Summarizer

__all__ = ["ReplayedCall", "replay_calls"]


@dataclass(frozen=True)
class ReplayedCall:
    """The context the model would have been sent before the assistant message at ``position``."""

    position: int
    context: RenderedContext
    requested: CompactionRequested | None
    """The compaction request planned after this call, if any."""


def _blobs(source: Ledger, event: AnyEvent) -> dict[str, str]:
    """The blob texts an event refers to, read from the source ledger."""
    found: dict[str, str] = {}
    for name in ("content",):
        value = getattr(event, name, None)
        if isinstance(value, BlobText):
            found[value.sha256] = source.text(value)
    return found


def replay_calls(
    source: Ledger,
    session_id: str,
    scratch: Ledger,
    policy: Policy,
    *,
    budget: int | None,
    make_summarizer: Callable[[TokenCounter], Summarizer] | None,
    tokenizer: str | TokenCounter = "cl100k_base",
) -> Iterator[ReplayedCall]:
    """Append ``session_id``'s events to ``scratch`` one by one and yield the render before each model call.

    After each call the compaction planner runs and, when ``make_summarizer`` is given, the worker
    serves what it planned before the next event arrives: the agent loop with a worker alongside, no
    model call made. The scratch session has the same id and positions as the source.
    """
    renderer = Renderer(scratch, tokenizer=tokenizer)
    worker: SummaryWorker | None = None
    compactor: Compactor | None = None
    if make_summarizer is not None:
        summarizer = make_summarizer(renderer.counter)
        worker = SummaryWorker(
            scratch, renderer, summarizer, worker_id="replay", policies={policy.name: policy}
        )
        compactor = Compactor(
            scratch, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
        )
    for recorded in source.events(session_id):
        if isinstance(recorded.event, AssistantMessageAdded) and recorded.position > 1:
            context = renderer.render(session_id, policy, budget=budget)
            requested = None
            if compactor is not None and worker is not None:
                requested = compactor.plan(session_id, policy, budget=budget)
                if SummaryStream(scratch.log, session_id).requests():
                    worker.run_once()
            yield ReplayedCall(position=recorded.position, context=context, requested=requested)
        event = msgspec.structs.replace(recorded.event)
        if isinstance(event, SessionStarted) and event.parent is not None:
            # A fork is replayed as the one history it shows (parent prefix, then its own events):
            # the scratch ledger has no parent to read from, so the copy is a root session.
            event = msgspec.structs.replace(event, parent=None)
        scratch.log.append(session_id, recorded.position - 1, [event], blobs=_blobs(source, event))
