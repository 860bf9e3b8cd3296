"""What an encrypted store seals before a write and opens after a read: one place for every stored text.

A ``Sealer`` is given to ``RecorderEventStore`` (and through it to the projections) when the ledger is
encrypted. It encrypts event payloads under their session's data key (tombstones under the ledger key),
blob texts, snapshots and projection rows under the ledger key, and replaces the lookup keys that would
hold a digest of a text or a caller's key (blob addresses, token-count keys, idempotency keys) by keyed
HMACs. A plaintext store has no sealer: every method here is bypassed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from contextledger.adapters.store.cipher import CHECK_BLOB, Keyring, session_of_stream
from contextledger.domain.errors import LedgerKeyError, SessionForgottenError
from contextledger.domain.events import SessionForgotten, topic_of
from eventsourcing.persistence import Cipher, StoredEvent

__all__ = ["TOMBSTONE_TOPIC", "Sealer"]

TOMBSTONE_TOPIC = topic_of(SessionForgotten)
"""Tombstones are sealed under the ledger key: they stay readable after the session's key is gone."""


class Sealer:
    """Seals and opens the stored form of an encrypted ledger's rows."""

    def __init__(self, keyring: Keyring, read_blob: Callable[[str], str | None]) -> None:
        """``read_blob`` reads a raw row of the blob table (wrapped data keys live there)."""
        self.keyring = keyring
        self._read_blob = read_blob
        self._gone: set[str] = set()
        """Sessions seen forgotten (a data key missing while their events exist never comes back)."""
        self.check_pending = False
        """True until the key check is known to be stored (it rides along with the next append)."""

    # -- opening a ledger ------------------------------------------------------------------------

    def check_key(self, has_events: bool) -> None:
        """Verify the stored key check; a ledger without one must be empty (it becomes encrypted).

        Raises:
            LedgerKeyError: another key, or a plaintext ledger that already holds events.
        """
        stored = self._read_blob(CHECK_BLOB)
        if stored is not None:
            self.keyring.verify(stored)
            return
        if has_events:
            msg = (
                "this ledger holds plaintext events: a key cannot be applied to it (open it without a key, "
                "or import its sessions into a new encrypted ledger)"
            )
            raise LedgerKeyError(msg)
        self.check_pending = True

    # -- writing -----------------------------------------------------------------------------------

    def seal_events(
        self, stored: Sequence[StoredEvent], heads: Mapping[str, int], blobs: dict[str, str]
    ) -> tuple[list[StoredEvent], dict[str, Cipher]]:
        """Encrypt a batch's payloads; a session's first event creates its data key (added to ``blobs``).

        ``heads`` gives each stream's version before the batch. Returns the sealed rows and the data
        keys created (cached by ``remember`` only once the append committed).
        """
        created: dict[str, Cipher] = {}
        sealed: list[StoredEvent] = []
        for row in stored:
            stream = str(row.originator_id)
            if row.topic == TOMBSTONE_TOPIC:
                cipher = self.keyring.ledger
            else:
                session = session_of_stream(stream)
                cipher_found = created.get(session)
                if cipher_found is None and stream == session and heads.get(stream) == 0:
                    cipher_found, wrapped = self.keyring.new_session_key(session)
                    created[session] = cipher_found
                    blobs[self.keyring.index(Keyring.key_blob(session))] = wrapped
                cipher = cipher_found or self.session_cipher(session)
            sealed.append(
                StoredEvent(
                    originator_id=row.originator_id,
                    originator_version=row.originator_version,
                    topic=row.topic,
                    state=cipher.encrypt(row.state),
                )
            )
        if self.check_pending:
            blobs[CHECK_BLOB] = self.keyring.check_value()
        return sealed, created

    def remember(self, created: Mapping[str, Cipher]) -> None:
        """Cache the data keys a committed append created."""
        for session, cipher in created.items():
            self.keyring.remember(session, cipher)
        self.check_pending = False

    def session_cipher(self, session_id: str) -> Cipher:
        """The session's cipher (``SessionForgottenError`` once its data key is destroyed)."""
        return self.keyring.session_cipher(
            session_id, lambda: self._read_blob(self.keyring.index(Keyring.key_blob(session_id)))
        )

    def seal_blobs(self, blobs: Mapping[str, str]) -> dict[str, str]:
        """Blob rows as stored: HMAC addresses, texts encrypted under the ledger key."""
        return {self.keyring.index(sha): self.keyring.seal_text(text) for sha, text in blobs.items()}

    def seal_bytes(self, state: bytes) -> bytes:
        """A derived row's bytes (snapshot, projection row) encrypted under the ledger key."""
        return self.keyring.ledger.encrypt(state)

    # -- reading -----------------------------------------------------------------------------------

    def open_event(self, stream_id: str, topic: str, state: bytes) -> bytes:
        """Decrypt a stored payload.

        Raises:
            SessionForgottenError: the session's data key is destroyed.
            LedgerKeyError: the payload does not decrypt under its key (damaged or another key).
        """
        cipher = (
            self.keyring.ledger
            if topic == TOMBSTONE_TOPIC
            else self.session_cipher(session_of_stream(stream_id))
        )
        try:
            return cipher.decrypt(state)
        except ValueError:
            msg = f"a stored event of {stream_id!r} does not decrypt under its key (damaged or another key)"
            raise LedgerKeyError(msg) from None

    def open_blob(self, sealed: str) -> str:
        """A blob's text from its stored row."""
        try:
            return self.keyring.open_text(sealed)
        except ValueError:
            msg = "a stored blob does not decrypt under the ledger key (damaged or another key)"
            raise LedgerKeyError(msg) from None

    def open_bytes(self, sealed: bytes) -> bytes | None:
        """A derived row's bytes, or None when they do not decrypt (derived rows are rebuilt then)."""
        try:
            return self.keyring.ledger.decrypt(sealed)
        except ValueError:
            return None

    def forgotten(self, stream_id: str) -> bool:
        """Whether the stream's session was forgotten (its data key is gone)."""
        session = session_of_stream(stream_id)
        if session in self._gone:
            return True
        try:
            self.session_cipher(session)
        except SessionForgottenError:
            self._gone.add(session)
            return True
        return False
