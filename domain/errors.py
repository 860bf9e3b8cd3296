"""The one error tree of contextledger: every failure the package raises is a ``ContextLedgerError``."""

from __future__ import annotations

__all__ = [
    "AmbiguousIdError",
    "BudgetError",
    "ConcurrencyConflictError",
    "ConfigError",
    "ContextLedgerError",
    "DuplicateToolCallError",
    "DuplicateToolResultError",
    "EncryptionRequiredError",
    "EventDecodeError",
    "IdempotencyKeyReusedError",
    "InjectionOverflowError",
    "InvalidMessageError",
    "LedgerKeyError",
    "LedgerNotFoundError",
    "OutputPathError",
    "PinnedOverBudgetError",
    "ProjectionConfigError",
    "ProjectionLockedError",
    "ReplayMismatchError",
    "SessionExistsError",
    "SessionForgottenError",
    "SessionNotFoundError",
    "StoreError",
    "StoreUnavailableError",
    "SummarizerError",
    "SummarizerUnavailableError",
    "SummaryInputTooLargeError",
    "SummaryRejectedError",
    "TokenizerError",
    "TranscriptImportError",
    "UnknownToolCallError",
    "ValidationError",
]


class ContextLedgerError(Exception):
    """Root of every error contextledger raises."""


class ValidationError(ContextLedgerError):
    """Input was rejected at the boundary; nothing was written."""


class InvalidMessageError(ValidationError):
    """A message has an unknown role, non-text content, or a missing or ill-typed field."""


class UnknownToolCallError(ValidationError):
    """A tool result names a call id that the session never issued."""

    def __init__(self, session_id: str, call_id: str) -> None:
        super().__init__(f"session {session_id!r} never issued tool call {call_id!r}")
        self.session_id = session_id
        self.call_id = call_id


class DuplicateToolResultError(ValidationError):
    """A tool call already has its result; a second one is refused."""

    def __init__(self, session_id: str, call_id: str) -> None:
        super().__init__(f"tool call {call_id!r} of session {session_id!r} already has a result")
        self.session_id = session_id
        self.call_id = call_id


class DuplicateToolCallError(ValidationError):
    """A tool call id is issued again while a call with that id awaits its result."""

    def __init__(self, session_id: str, call_id: str) -> None:
        super().__init__(
            f"tool call id {call_id!r} of session {session_id!r} already awaits a result "
            "(an id may be reused only once its call is answered)"
        )
        self.session_id = session_id
        self.call_id = call_id


class SessionNotFoundError(ContextLedgerError):
    """The session does not exist in this ledger."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r} in this ledger")
        self.session_id = session_id


class AmbiguousIdError(ValidationError):
    """An id prefix names more than one session (or call): the candidates are listed, nothing is done."""

    def __init__(self, kind: str, prefix: str, candidates: list[str]) -> None:
        listed = ", ".join(candidates[:_LISTED_IDS])
        more = f" and {len(candidates) - _LISTED_IDS} more" if len(candidates) > _LISTED_IDS else ""
        super().__init__(
            f"{kind} prefix {prefix!r} matches {len(candidates)} {kind}s: {listed}{more}; "
            "give more characters"
        )
        self.kind = kind
        self.prefix = prefix
        self.candidates = tuple(candidates)


_LISTED_IDS = 10
"""How many candidates an ``AmbiguousIdError`` message names (the error keeps them all)."""


class SessionForgottenError(SessionNotFoundError):
    """The session was erased (``forget``): its data key is destroyed, its content unreadable for good."""

    def __init__(self, session_id: str, detail: str = "") -> None:
        ContextLedgerError.__init__(
            self,
            f"session {session_id!r} was forgotten{': ' + detail if detail else ''}; its content is erased "
            "(its data key was destroyed) and cannot be read or extended",
        )
        self.session_id = session_id
        self.detail = detail


class SessionExistsError(ValidationError):
    """A session with this id was already started."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} already exists")
        self.session_id = session_id


class ConcurrencyConflictError(ContextLedgerError):
    """Another writer appended to the session first; reload and decide again."""

    def __init__(self, session_id: str, expected_version: int) -> None:
        super().__init__(
            f"session {session_id!r} moved past version {expected_version} while appending; "
            "another writer won, reload and retry"
        )
        self.session_id = session_id
        self.expected_version = expected_version


class StoreError(ContextLedgerError):
    """The event store failed; the driver's error is chained as the cause."""


class StoreUnavailableError(StoreError):
    """The database could not be reached or is locked."""


class EventDecodeError(StoreError):
    """A stored event could not be decoded (unknown topic, or a payload that does not fit)."""


class ConfigError(ContextLedgerError):
    """A configuration value (database URL, policy file, tokenizer name) is invalid."""


class LedgerKeyError(ConfigError):
    """An encrypted ledger was opened without its key or with another key; nothing was read or written."""


class LedgerNotFoundError(ConfigError):
    """A command that reads a ledger was pointed at a ledger file that does not exist; none was created."""


class OutputPathError(ConfigError):
    """An output file (a report, a CSV, an export) cannot be written where it was asked.

    A directory, a missing folder, no permission, no space: the ledger is untouched, nothing is left behind.
    """


class EncryptionRequiredError(ConfigError):
    """``forget`` needs an encrypted ledger: a plaintext log cannot be erased while staying append-only."""


class TokenizerError(ConfigError):
    """The requested tokenizer is not available on this machine."""


class TranscriptImportError(ValidationError):
    """A transcript file could not be imported; names the file, the place in it and what was expected."""

    def __init__(self, path: str, location: str, problem: str) -> None:
        super().__init__(f"{path}: {location}: {problem}")
        self.path = path
        self.location = location
        self.problem = problem


class BudgetError(ContextLedgerError):
    """A context cannot be rendered within its token budget."""


class PinnedOverBudgetError(BudgetError):
    """The pinned items alone exceed the budget."""

    def __init__(self, pinned_tokens: int, budget_tokens: int) -> None:
        over = pinned_tokens - budget_tokens
        super().__init__(
            f"pinned items need {pinned_tokens} tokens but the budget allows {budget_tokens} (over by {over})"
        )
        self.pinned_tokens = pinned_tokens
        self.budget_tokens = budget_tokens
        self.over_by = over


class InjectionOverflowError(BudgetError):
    """An injection hook produced more tokens than its reserve."""

    def __init__(self, hook: str, tokens: int, reserve: int) -> None:
        super().__init__(
            f"injection hook {hook!r} produced {tokens} tokens, over its reserve of {reserve} "
            f"by {tokens - reserve}"
        )
        self.hook = hook
        self.tokens = tokens
        self.reserve = reserve
        self.over_by = tokens - reserve


class SummarizerError(ContextLedgerError):
    """A summary could not be produced; the projection is unchanged and an outcome event says why."""


class SummarizerUnavailableError(SummarizerError):
    """The summarizer could not be reached, timed out, or kept refusing (rate limits, server errors)."""


class SummaryInputTooLargeError(SummarizerError):
    """A summary request would not fit its model's window, even without the live prefix and clipped hard.

    Not retried: the same span gives the same request (the attempt is dead-lettered at once).
    """


class SummaryRejectedError(SummarizerError):
    """The summarizer answered, but with nothing usable: empty, malformed, or over its size bound."""


class ReplayMismatchError(ContextLedgerError):
    """A recorded model call rendered again does not give the bytes its record hashed."""


class ProjectionLockedError(StoreError):
    """Another runner holds the projection's lease: one active runner per projection."""

    def __init__(self, projection: str, holder: str) -> None:
        super().__init__(f"projection {projection!r} is being written by another runner ({holder})")
        self.projection = projection
        self.holder = holder


class ProjectionConfigError(ConfigError):
    """The active projection was built under another config than the running one: it refuses to serve."""

    def __init__(self, active: str, running: str, command: str) -> None:
        if active == "(none)":
            problem = f"no context projection is active (the running config's is {running!r})"
            super().__init__(f"{problem}; rebuild it with: {command}")
        else:
            problem = (
                f"the active context projection {active!r} was built under another config than the "
                f"running one ({running!r})"
            )
            super().__init__(
                f"{problem}; to serve the active version, use its own config (render --from-projection "
                f"without --policy, --budget or --tokenizer); to replace it by this config instead: {command}"
            )
        self.active = active
        self.running = running
        self.command = command


_SHOWN_CHARS = 80
"""How much of a long key or id an error message quotes."""


class IdempotencyKeyReusedError(ValidationError):
    """An idempotency key already stored other content: a retry must send what the first call sent."""

    def __init__(self, session_id: str, key: str) -> None:
        shown = key if len(key) <= _SHOWN_CHARS else key[:_SHOWN_CHARS] + "…"
        super().__init__(
            f"idempotency key {shown!r} of session {session_id[:_SHOWN_CHARS]!r} already stored different "
            "content; nothing was written (use a new key for new content)"
        )
        self.session_id = session_id
        self.key = key
