"""``forget``: crypto-shredding one session of an encrypted ledger, leaving a tombstone in its stream.

1. Under the session's writer turn, the tombstone (``SessionForgotten``: who, when, why) is appended
   after the session's last event, sealed under the ledger key. A forget that died after this step is
   finished by running it again (the tombstone is found and not appended twice).
2. One pass over the log collects the blob addresses each session's events reference: the session's own
   texts that no other session holds are deleted with its data key.
3. ``erase_session`` deletes, in one transaction, the wrapped data key, those blobs, and the session's
   derived rows (snapshots, projection rows: context, summaries, search sketches, model calls).

Without the data key the session's events (its stream and its side streams) stay in the append-only log
as ciphertext no key opens; every later read of them is ``SessionForgottenError``, and a rebuild skips
them (and every tombstone), so the erased rows are not folded again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from contextledger.adapters.store.cipher import Keyring, session_of_stream
from contextledger.adapters.store.guards import translated
from contextledger.adapters.store.projection_tables import ProjectionTables
from contextledger.adapters.store.sealing import TOMBSTONE_TOPIC
from contextledger.domain.errors import (
    EncryptionRequiredError,
    SessionForgottenError,
    SessionNotFoundError,
)
from contextledger.domain.events import SessionForgotten

if TYPE_CHECKING:
    from contextledger.adapters.store.event_store import RecorderEventStore

__all__ = ["forget_session"]

_PAGE = 1000
_untyped = msgspec.msgpack.Decoder()


def _blob_refs(value: Any) -> Iterator[str]:
    """The addresses of the blob texts an event payload (decoded untyped) references."""
    if isinstance(value, dict):
        if value.get("type") == "blob" and isinstance(value.get("sha256"), str):
            yield value["sha256"]
        for item in value.values():
            yield from _blob_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _blob_refs(item)


def _blob_owners(store: RecorderEventStore, session_id: str) -> tuple[set[str], set[str]]:
    """The blob addresses ``session_id``'s streams reference, and those the other sessions reference."""
    sealer = store.sealer
    assert sealer is not None  # noqa: S101 - checked by the caller
    tables: ProjectionTables = store.recorder  # type: ignore[assignment]  # the recorders of this package
    mine: set[str] = set()
    others: set[str] = set()
    after = 0
    while True:
        with translated("scan the log for shared texts"):
            rows = tables.notification_rows(after, _PAGE)
        for _, stream, _, topic, state in rows:
            if topic == TOMBSTONE_TOPIC or sealer.forgotten(stream):
                continue
            refs = _blob_refs(_untyped.decode(sealer.open_event(stream, topic, state)))
            (mine if session_of_stream(stream) == session_id else others).update(refs)
        if len(rows) < _PAGE:
            return mine, others
        after = rows[-1][0]


def forget_session(
    store: RecorderEventStore, session_id: str, tombstone: SessionForgotten
) -> SessionForgotten:
    """Erase ``session_id`` for good; return its tombstone (the earlier one if it was already forgotten).

    Raises:
        EncryptionRequiredError: the ledger is not encrypted (nothing is erased or written).
        SessionNotFoundError: no such session.
    """
    sealer = store.sealer
    if sealer is None:
        msg = (
            "forget needs an encrypted ledger: in plaintext, erasing a session's texts would mean rewriting "
            "the append-only log; open the ledger with a key (CIPHER_KEY, --key-file) when creating it, or "
            "import its sessions into a new encrypted ledger"
        )
        raise EncryptionRequiredError(msg)
    with store.writer_turn(session_id):
        version = store.version(session_id)
        if version == 0:
            raise SessionNotFoundError(session_id)
        with translated(f"read the head of {session_id!r}"):
            head = store.recorder.select_events(session_id, desc=True, limit=1)
        last = store.mapper.to_recorded(head[0]).event if head[0].topic == TOMBSTONE_TOPIC else None
        if isinstance(last, SessionForgotten):
            tombstone = last  # a forget that stopped after its tombstone: finish the erasure
            mine: set[str] = set()
            if not sealer.forgotten(session_id):
                mine, others = _blob_owners(store, session_id)
                mine -= others
        else:
            try:
                sealer.session_cipher(session_id)
            except SessionForgottenError:
                raise store.forgotten_error(session_id) from None
            mine, others = _blob_owners(store, session_id)
            mine -= others
            store.append(session_id, version, [tombstone])
        keys = [sealer.keyring.index(sha) for sha in sorted(mine)]
        keys.append(sealer.keyring.index(Keyring.key_blob(session_id)))
        with translated(f"erase session {session_id!r}"):
            store.recorder.erase_session(session_id, keys)  # type: ignore[attr-defined]  # the recorders of this package
        sealer.keyring.forget_cached(session_id)
    return tombstone
