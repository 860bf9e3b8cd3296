"""One HTTP call policy for model summarizers: timeouts, retries, Retry-After, typed errors, no key leaks."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
from contextledger.application.kernel.logs import get_logger
from contextledger.domain.errors import (
    SummarizerError,
    SummarizerUnavailableError,
    SummaryRejectedError,
)
from contextledger.domain.redaction import redact, redact_then_cut

__all__ = ["HttpPolicy", "post_json", "redacting"]

log = get_logger(__name__)

_DETAIL_CHARS = 300
"""An error message quotes at most this much of the provider's answer (cut after redaction)."""
_SCANNED_CHARS = 65_536
"""How much of an error body is read for the quote (redacted whole, then cut to ``_DETAIL_CHARS``)."""

_RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504, 529}
"""Statuses worth another try: timeouts, rate limits, overloads and server errors."""


class HttpPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How long and how often a summarizer waits: per-attempt timeout, attempts, backoff, Retry-After cap."""

    timeout: float = 60.0
    attempts: int = 4
    backoff: float = 0.5
    """First retry waits this long; each later one twice as long (unless the server says Retry-After)."""
    max_retry_after: float = 60.0
    """A longer Retry-After is not waited out: the call fails, and the worker retries the request later."""


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@contextmanager
def redacting(secrets: tuple[str, ...]) -> Iterator[None]:
    """Re-raise a ``SummarizerError`` raised inside with every form of ``secrets`` redacted from it."""
    try:
        yield
    except SummarizerError as error:
        message = str(error)
        cleaned = redact(message, secrets)
        if cleaned == message:
            raise
        raise type(error)(cleaned) from None


def _decoded(url: str, response: httpx.Response) -> dict[str, Any]:
    try:
        decoded = response.json()
    except ValueError:
        raise SummaryRejectedError(f"{url} answered {response.status_code} with no JSON") from None
    if not isinstance(decoded, dict):
        raise SummaryRejectedError(f"{url} answered JSON that is not an object")
    return decoded


def _refusal(
    url: str, response: httpx.Response, policy: HttpPolicy, secrets: tuple[str, ...]
) -> tuple[str, float | None]:
    """Describe a non-2xx answer; raise when another attempt cannot help; return the wait it asks for."""
    detail = redact_then_cut(response.text[:_SCANNED_CHARS], secrets, _DETAIL_CHARS)
    reason = f"HTTP {response.status_code}: {' '.join(detail.split())}"
    if response.status_code not in _RETRYABLE:
        raise SummarizerError(f"{url} refused the summary call: {reason}")
    told = _retry_after(response)
    if told is not None and told > policy.max_retry_after:
        raise SummarizerUnavailableError(f"{url} asks to retry after {told:g} s: {reason}")
    return reason, told


def post_json(
    client: httpx.Client,
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    policy: HttpPolicy,
    secrets: tuple[str, ...] = (),
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """POST ``body`` as JSON and return the decoded JSON object answered with a 2xx status.

    Raises:
        SummarizerUnavailableError: Unreachable, timed out or refused with a retryable status after
            every attempt, or told to wait longer than ``max_retry_after``.
        SummarizerError: A non-retryable refusal (bad key, bad request).
        SummaryRejectedError: A 2xx answer that is not a JSON object.
    """
    with redacting(secrets):
        return _post_json(client, url, body, headers=headers, policy=policy, secrets=secrets, sleep=sleep)


def _post_within(
    client: httpx.Client, url: str, body: Mapping[str, Any], headers: Mapping[str, str], timeout: float
) -> httpx.Response:
    """POST and read the whole answer within ``timeout`` seconds in all (httpx's timeout is per read).

    A server sending its answer a few bytes at a time, each read within the timeout, held a 1 s attempt
    for 18 s (and a worker's lease, heartbeat after heartbeat).

    Raises:
        httpx.TimeoutException: the answer took longer than ``timeout`` in all.
    """
    deadline = time.monotonic() + timeout
    with client.stream("POST", url, json=body, headers=dict(headers), timeout=timeout) as streamed:
        chunks: list[bytes] = []
        for chunk in streamed.iter_bytes():
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(
                    f"the answer took longer than {timeout:g} s", request=streamed.request
                )
        kept = {
            k: v for k, v in streamed.headers.items() if k.lower() not in _DECODED
        }  # the bytes are decoded
        return httpx.Response(
            streamed.status_code, headers=kept, content=b"".join(chunks), request=streamed.request
        )


_DECODED = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Headers that described the bytes on the wire, not the decoded body ``_post_within`` keeps."""


def _post_json(
    client: httpx.Client,
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    policy: HttpPolicy,
    secrets: tuple[str, ...],
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    reason = "no attempt made"
    for attempt in range(1, policy.attempts + 1):
        wait: float | None = None
        try:
            response = _post_within(client, url, body, headers, policy.timeout)
        except httpx.TimeoutException:
            reason = f"timed out after {policy.timeout:g} s"
        except httpx.TransportError as error:
            reason = f"unreachable: {type(error).__name__}"
        else:
            if response.is_success:
                return _decoded(url, response)
            reason, wait = _refusal(url, response, policy, secrets)
        if wait is None:
            wait = policy.backoff * 2 ** (attempt - 1)
        log.info(
            "summarizer_retry",
            url=redact(url, secrets),
            attempt=attempt,
            reason=redact(reason, secrets),
            wait=wait,
        )
        if attempt < policy.attempts:
            sleep(wait)
    raise SummarizerUnavailableError(f"{url}: {reason} ({policy.attempts} attempts)")
