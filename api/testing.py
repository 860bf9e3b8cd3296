"""Fakes for testing an agent against the ledger: fixed clock, counting ids, scripted summarizer, wire checks.

``contextledger.testing`` is shipped, as structlog's and pydantic-ai's testing modules are, so an agent's own
tests can pin time and ids, script what a summarizer answers (or how it fails), and check that every payload
it sends pairs tool calls with results as OpenAI and Anthropic require::

    from contextledger.testing import CountingIds, FixedClock, ScriptedSummarizer, check_openai_pairing

    ledger = contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds())

Importing it loads no store, tokenizer or HTTP client; ``import contextledger`` does not import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from contextledger.adapters.formats.pairing import (
    WireProblem,
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)
from contextledger.domain.errors import ConfigError
from contextledger.projections.summary_requests import SummaryDraft, SummaryRequest

__all__ = [
    "START",
    "CountingIds",
    "FixedClock",
    "ScriptedSummarizer",
    "WireProblem",
    "check_anthropic_pairing",
    "check_anthropic_structure",
    "check_openai_pairing",
    "check_openai_structure",
]

START = datetime(2026, 1, 1, tzinfo=UTC)
"""The instant a ``FixedClock`` starts at unless told otherwise."""

Answer = str | SummaryDraft | BaseException
"""One entry of a summarizer's script: a summary text, a whole draft, or an exception to raise."""


class FixedClock:
    """A clock (the ``Clock`` port) that reads ``start``, then moves ``step`` per reading.

    The default step, one second, gives every event its own instant; ``step=timedelta(0)`` makes a
    clock that moves only when ``advance`` is called (retry back-offs, lease expiries).
    """

    def __init__(self, start: datetime = START, *, step: timedelta = timedelta(seconds=1)) -> None:
        if start.tzinfo is None:
            raise ConfigError("FixedClock needs a timezone-aware start, e.g. datetime(..., tzinfo=UTC)")
        self._now = start
        self._step = step

    def now(self) -> datetime:
        """Return the current reading, then move the clock by its step."""
        reading = self._now
        self._now += self._step
        return reading

    def advance(self, delta: timedelta | None = None, **parts: float) -> None:
        """Move the clock forward by ``delta`` or by ``timedelta(**parts)``, e.g. ``advance(seconds=30)``."""
        self._now += (delta or timedelta()) + timedelta(**parts)


class CountingIds:
    """Deterministic ids (the ``IdSource`` port): ``id-1``, ``id-2``, ... (the prefix is yours to set)."""

    def __init__(self, prefix: str = "id-") -> None:
        self._prefix = prefix
        self._count = 0

    def new_id(self) -> str:
        """Return the next id."""
        self._count += 1
        return f"{self._prefix}{self._count}"


class ScriptedSummarizer:
    """A summarizer (the ``Summarizer`` port) that answers from a script and records what it was asked.

    Call ``n`` takes answer ``n``; once the script runs out its last answer repeats. A string is the
    summary's text; a ``SummaryDraft`` is returned as it is; an exception is raised (a
    ``SummarizerError`` subclass is what a real summarizer raises: the worker records the failure, backs
    off and retries). ``requests`` holds every ``SummaryRequest`` received, in order.

    Example: ``ScriptedSummarizer(SummarizerUnavailableError("down"), "## Summary ...")`` fails once, then
    answers.
    """

    def __init__(
        self,
        *script: Answer,
        name: str = "scripted",
        config_sha: str = "scripted",
        model_written: bool = False,
    ) -> None:
        if not script:
            raise ConfigError("a ScriptedSummarizer needs at least one answer")
        self.model_written = model_written
        """Stand for a model: the worker checks each draft against the card, retries once, withholds."""
        self._script: Sequence[Answer] = script
        self._name = name
        self._config_sha = config_sha
        self.requests: list[SummaryRequest] = []

    @property
    def name(self) -> str:
        """The summarizer's name, as recorded on each artifact."""
        return self._name

    @property
    def config_sha(self) -> str:
        """The configuration hash recorded on each artifact."""
        return self._config_sha

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        """Record ``request``; return (or raise) the script's next answer."""
        self.requests.append(request)
        answer = self._script[min(len(self.requests), len(self._script)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, SummaryDraft):
            return answer
        return SummaryDraft(text=answer, model=self._name)
