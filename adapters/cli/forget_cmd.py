"""``forget``: erase a session of an encrypted ledger for good (crypto-shredding), leaving a tombstone."""

from __future__ import annotations

import getpass
import socket
from typing import Annotated

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    command,
    emit_json,
    ledger_for,
    out_console,
    run_guarded,
)
from contextledger.domain.errors import SessionForgottenError, ValidationError

__all__ = ["register"]


def _who() -> str:
    """``user@host`` of the process, the default ``--by``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def register(app: typer.Typer) -> None:
    """Add ``forget`` to ``app``."""

    @command(
        app,
        "forget",
        example='contextledger forget 0f3c9a... --reason "erasure request #42" --by dpo@example.org --json',
    )
    def forget_command(
        session_id: Annotated[str, typer.Argument(help="The session to erase: its whole id (no prefix).")],
        reason: Annotated[str, typer.Option("--reason", help="Why it is erased (kept in the tombstone).")],
        by: Annotated[
            str | None, typer.Option("--by", help="Who erases it (kept in the tombstone); default user@host.")
        ] = None,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Erase SESSION for good: its data key is destroyed, its derived rows deleted, a tombstone kept.

        Needs an encrypted ledger (a key: --key-file, $CONTEXTLEDGER_KEY_FILE or $CIPHER_KEY). Running it
        again on a forgotten session finishes an interrupted erasure and reports the first tombstone.
        --json prints {"session_id", "forgotten_at", "by", "reason"}.
        """

        def body() -> None:
            from contextledger.application.kernel.id_prefixes import resolve_session  # noqa: PLC0415 - on use

            with ledger_for(db) as ledger:
                try:
                    session = resolve_session(ledger, session_id)
                except (
                    SessionForgottenError
                ):  # run again: the API finishes the erasure, reports the tombstone
                    session = session_id
                if session != session_id:  # an erasure is for good: a prefix is never enough
                    msg = (
                        f"forget erases for good and takes the whole session id: {session_id!r} is a prefix "
                        f"of {session!r}; give that id"
                    )
                    raise ValidationError(msg)
                tombstone = ledger.forget(session, reason=reason, by=by or _who())
            document = {
                "session_id": tombstone.session_id,
                "forgotten_at": None if tombstone.at is None else tombstone.at.isoformat(),
                "by": tombstone.by,
                "reason": tombstone.reason,
            }
            if json_output:
                emit_json(document)
                return
            when = document["forgotten_at"]
            out_console().print(
                f"forgot {tombstone.session_id} at {when} by {tombstone.by}: {tombstone.reason}"
            )

        run_guarded(body, json_output=json_output)
