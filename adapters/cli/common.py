"""The CLI contract every command follows: options, one JSON document, typed errors as exit codes, help.

Every command:

- takes ``--db URL`` and ``--json``; with ``--json`` it prints exactly one JSON document on stdout, an object
  whose field names are the API's (``SessionInfo``, ``Recorded``, ``RenderedContext``, ``ImportReport``, ...);
- reports an error as one line ``error: <Type>: <message>`` on stderr, or with ``--json`` as one JSON object
  on stderr ``{"error": {"type": ..., "message": ..., "exit_code": ...}}``; usage errors included;
- exits with a code of ``EXIT_CODES`` (0 ok, 1 user error, 2 usage, 3 store unavailable, 4 conflict,
  5 store error, 6 summarizer error, 70 internal error, 130 interrupted); 3 means "retry later": the
  store is unreachable or locked, or another runner holds a projection's lease (``ProjectionLockedError``);
- answers ``-h`` and ``--help`` with an example (``command(app, name, example=...)`` puts it in the epilog);
- prints transcript text as data, never as rich markup (consoles have markup and emoji codes off; ``cell``),
  and never as terminal controls: escape sequences, C0/C1 controls and bidi overrides print escaped
  (``terminal.printable``, applied by ``cell``, the consoles and the error line).

Heavy modules (rich, the store, importers, renderer) are imported inside the command bodies so that
``contextledger --help`` starts fast.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from contextledger.adapters.cli.terminal import printable
from contextledger.domain.errors import (
    ConcurrencyConflictError,
    ConfigError,
    ContextLedgerError,
    LedgerNotFoundError,
    ProjectionLockedError,
    StoreError,
    StoreUnavailableError,
    SummarizerError,
    ValidationError,
)

if TYPE_CHECKING:
    from contextledger.application.audit.call_recorder import CallRecorder
    from contextledger.application.kernel.ledger import Ledger
    from contextledger.application.render.renderer import Renderer
    from rich.console import Console
    from rich.text import Text

__all__ = [
    "EXIT_CODES",
    "EXIT_CONFLICT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STORE",
    "EXIT_STORE_UNAVAILABLE",
    "EXIT_SUMMARIZER",
    "EXIT_USAGE",
    "EXIT_USER",
    "DbOption",
    "JsonOption",
    "UseCases",
    "cell",
    "command",
    "emit_json",
    "err_console",
    "exit_code_for",
    "fail",
    "ledger_for",
    "ledger_opener",
    "main",
    "new_app",
    "only_command",
    "out_console",
    "run_guarded",
    "use_cases",
    "use_ledger_opener",
]

EXIT_OK = 0
EXIT_USER = 1
EXIT_USAGE = 2
EXIT_STORE_UNAVAILABLE = 3
EXIT_CONFLICT = 4
EXIT_STORE = 5
EXIT_SUMMARIZER = 6
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "ok"),
    (EXIT_USER, "user error: bad input, unknown session, bad configuration, over budget"),
    (EXIT_USAGE, "usage error: unknown command or option, missing or ill-typed argument"),
    (
        EXIT_STORE_UNAVAILABLE,
        (
            "store unavailable: database unreachable or locked, or a projection busy with another "
            "runner; retry later"
        ),
    ),
    (EXIT_CONFLICT, "conflict: another writer appended first; reload and retry"),
    (EXIT_STORE, "store error: the store failed or holds an event that does not decode"),
    (EXIT_SUMMARIZER, "summarizer error: summarizer unavailable, or its answer rejected"),
    (EXIT_INTERNAL, "internal error: a bug in contextledger; please report it"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)
"""The documented exit codes, printed by ``contextledger --help``."""

_BY_ERROR: tuple[tuple[type[ContextLedgerError], int], ...] = (
    (StoreUnavailableError, EXIT_STORE_UNAVAILABLE),
    (ProjectionLockedError, EXIT_STORE_UNAVAILABLE),
    (StoreError, EXIT_STORE),
    (ConcurrencyConflictError, EXIT_CONFLICT),
    (SummarizerError, EXIT_SUMMARIZER),
    (ContextLedgerError, EXIT_USER),
)
"""First match wins: subclasses before their bases."""

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL (sqlite:///path.db, postgresql://..., memory://); "
        "default $CONTEXTLEDGER_DB or sqlite:///contextledger.db",
    ),
]
JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON document on stdout; errors as JSON on stderr."),
]

_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def exit_code_for(error: BaseException) -> int:
    """Return the exit code that reports ``error`` (``EXIT_INTERNAL`` for anything outside the tree)."""
    for error_type, code in _BY_ERROR:
        if isinstance(error, error_type):
            return code
    return EXIT_INTERNAL


@functools.cache
def out_console() -> Console:
    """The stdout console: no markup, emoji codes or highlighting, controls escaped: text prints as data."""
    from contextledger.adapters.cli.safe_console import SafeConsole  # noqa: PLC0415 - rich loads on print

    return SafeConsole(highlight=False, soft_wrap=True, markup=False, emoji=False)


@functools.cache
def err_console() -> Console:
    """The stderr console for progress bars and notes, so stdout stays clean for ``--json``."""
    from contextledger.adapters.cli.safe_console import SafeConsole  # noqa: PLC0415 - rich loads on print

    return SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def cell(value: object, style: str = "") -> Text:
    """Return ``value`` as a rich ``Text``: a table cell never parsed as markup, its controls escaped."""
    from rich.text import Text  # noqa: PLC0415 - rich loads only when a command prints

    return Text("" if value is None else printable(str(value)), style=style)


def _encode_extra(value: Any) -> Any:
    if isinstance(value, BaseException):
        return _error_object(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    msg = f"cannot encode {type(value).__name__} as JSON"
    raise NotImplementedError(msg)


def emit_json(value: Any) -> None:
    """Print ``value`` as one JSON document on stdout (Structs, dataclasses, datetimes and paths included)."""
    import msgspec  # noqa: PLC0415 - loaded when a command prints JSON

    encoded = msgspec.json.format(msgspec.json.encode(value, enc_hook=_encode_extra), indent=2)
    sys.stdout.flush()
    sys.stdout.buffer.write(encoded + b"\n")
    sys.stdout.buffer.flush()


def _error_object(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": " ".join(str(error).split())}


def _report(error_type: str, message: str, code: int, *, json_output: bool) -> typer.Exit:
    one_line = " ".join(message.split())
    if json_output:
        document = {"error": {"type": error_type, "message": one_line, "exit_code": code}}
        sys.stderr.write(json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        sys.stderr.write(f"error: {error_type}: {printable(one_line)}\n")
    sys.stderr.flush()
    return typer.Exit(code)


def fail(
    message: str, *, json_output: bool, error_type: str = "ValidationError", code: int = EXIT_USER
) -> typer.Exit:
    """Report an error found by the command itself and return the exit to raise."""
    return _report(error_type, message, code, json_output=json_output)


_opener: list[Callable[[str | None], Ledger]] = []
"""How commands open a ledger; installed once by the composition root (``contextledger.cli``)."""


def use_ledger_opener(open_ledger: Callable[[str | None], Ledger], factory: UseCases | None = None) -> None:
    """Install the function that opens the ledger a ``--db`` URL names (and the root's use cases)."""
    _opener[:] = [open_ledger]
    if factory is not None:
        _use_cases[:] = [factory]


@dataclass(frozen=True)
class UseCases:
    """What the composition root builds over an opened ledger for the commands (one wiring for all)."""

    renderer: Callable[[Ledger, str], Renderer]
    """The renderer over a ledger, counting with the named tokenizer."""
    recorder: Callable[[Ledger], CallRecorder]
    """The ``model_calls`` recorder (and reader) over a ledger."""


_use_cases: list[UseCases] = []
"""The root's use-case factory; installed once with the opener (``contextledger.cli``)."""


def use_cases() -> UseCases:
    """The use-case factory the composition root installed."""
    if not _use_cases:
        msg = "the CLI was started without its use cases: run it through contextledger.cli.main"
        raise ConfigError(msg)
    return _use_cases[0]


def ledger_opener() -> Callable[[str | None], Ledger]:
    """The function commands open ledgers with (worker processes are handed it)."""
    if not _opener:
        msg = "the CLI was started without a ledger opener: run it through contextledger.cli.main"
        raise ConfigError(msg)
    return _opener[0]


@contextmanager
def ledger_for(db: str | None, *, create: bool = False) -> Iterator[Ledger]:
    """Open the ledger for a command and close it afterwards.

    Only a command that writes a new session (``create``: import, demo, a worker waiting for work)
    creates a SQLite ledger file that does not exist; any other command names the missing file, so a
    mistyped path is an error instead of an empty ledger (and a stray file) answering "no sessions".

    Raises:
        ValidationError: ``--db`` was given as an empty text (the default would be opened in its place).
        LedgerNotFoundError: ``create`` is false and the SQLite file ``--db`` names does not exist, or
            holds no ledger (another program's database, an empty file); or ``create`` is true and the
            file is another program's database.
    """
    if db is not None and not db.strip():
        raise ValidationError("--db takes a store URL (e.g. sqlite:///agent.db), not an empty text")
    if not create:
        _check_exists(db)
    else:
        _check_not_foreign(db)
    ledger = ledger_opener()(db)
    try:
        yield ledger
    finally:
        ledger.close()


def _check_not_foreign(db: str | None) -> None:
    """Raise ``LedgerNotFoundError`` when the URL names another program's SQLite database (no ledger table).

    ``import --db app.db`` added a ledger's tables to an application's own database.
    """
    from contextledger.adapters.store.factory import resolve_url  # noqa: PLC0415 - the store loads on use
    from contextledger.adapters.store.sqlite import foreign_database, sqlite_file  # noqa: PLC0415

    url = resolve_url(db)
    if url.split(":", 1)[0].lower() != "sqlite":
        return
    file, _ = sqlite_file(url)
    if foreign_database(file):
        msg = (
            f"{file} is another program's SQLite database (it has tables, none a ledger's): no ledger's "
            "schema is written into it; give a new file or an existing ledger"
        )
        raise LedgerNotFoundError(msg)


def _check_exists(db: str | None) -> None:
    """Raise ``LedgerNotFoundError`` when the URL (or its default) names a SQLite file that does not exist."""
    from contextledger.adapters.store.factory import resolve_url  # noqa: PLC0415 - the store loads on use
    from contextledger.adapters.store.sqlite import holds_ledger, sqlite_file  # noqa: PLC0415

    url = resolve_url(db)
    if url.split(":", 1)[0].lower() != "sqlite":
        return
    file, _ = sqlite_file(url)
    if file.exists() and not holds_ledger(file):
        msg = (
            f"{file} is not a contextledger ledger (no ledger tables): a command that only reads writes no "
            "ledger's schema into another file; `contextledger import` or `contextledger demo` creates one"
        )
        raise LedgerNotFoundError(msg)
    if not file.exists():
        given = (
            "--db"
            if db is not None
            else "the default ledger ($CONTEXTLEDGER_DB or sqlite:///contextledger.db)"
        )
        msg = (
            f"no ledger at {url}: {file} does not exist (check {given}; `contextledger import` or "
            "`contextledger demo` creates a ledger)"
        )
        raise LedgerNotFoundError(msg)


def run_guarded(body: Callable[[], None], *, json_output: bool) -> None:
    """Run a command body; report any error by the contract (one line or JSON on stderr, typed exit code)."""
    from contextledger.adapters.logging_setup import configure_logging  # noqa: PLC0415 - structlog loads lazily

    configure_logging(json=json_output)
    try:
        body()
    except ContextLedgerError as error:
        raise _report(
            type(error).__name__, str(error), exit_code_for(error), json_output=json_output
        ) from None
    except (typer.Exit, typer.Abort, typer.TyperException, KeyboardInterrupt):
        raise
    except Exception as error:  # noqa: BLE001 - a bug: reported by type, with the traceback in text mode
        if not json_output:
            traceback.print_exc()
        raise _report(type(error).__name__, str(error), EXIT_INTERNAL, json_output=json_output) from None


def command(app: typer.Typer, name: str, *, example: str) -> Callable[[_Fn], _Fn]:
    """Register a command on ``app`` with a usage example in its help (``-h``/``--help``)."""
    lines = "\n".join(f"  $ {line}" for line in example.strip().splitlines())
    return app.command(name, epilog=f"Example:\n{lines}")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # noqa: PLC0415 - only when --version is asked

        sys.stdout.write(f"contextledger {version('contextledger')}\n")
        raise typer.Exit(EXIT_OK)


def new_app() -> typer.Typer:
    """Return the ``contextledger`` app with the contract's options ``-h``/``--help`` and ``--version``."""
    codes = "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES)
    app = typer.Typer(
        name="contextledger",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        epilog=f"Every command takes --db and --json. Exit codes:\n\n{codes}",
    )

    @app.callback()
    def root(
        _version_flag: Annotated[
            bool,
            typer.Option("--version", is_eager=True, callback=_version, help="Print the version and exit."),
        ] = False,
        key_file: Annotated[
            str | None,
            typer.Option(
                "--key-file",
                help="File holding the ledger's master key (base64): the ledger is encrypted at rest; "
                "default $CONTEXTLEDGER_KEY_FILE, or $CIPHER_KEY itself",
            ),
        ] = None,
    ) -> None:
        """The context layer of LLM agents, event-sourced."""
        if key_file:
            from contextledger.adapters.store.cipher import KEY_FILE_VAR  # noqa: PLC0415 - start-up time

            os.environ[KEY_FILE_VAR] = key_file  # every ledger this process opens uses it

    return app


_ROOT_OPTIONS_WITH_VALUE = frozenset({"--key-file"})
"""The root's options that take a value (``new_app``): the word after one is not a command's name."""


def only_command(app: typer.Typer, args: list[str]) -> typer.Typer:
    """``app`` with only the command ``args`` name: typer builds every registered command's parser.

    Building one command's options from its signature takes ~3 ms (``typing.get_type_hints``,
    ``inspect.signature``); doing it for every command added ~0.06 s to the start of each one.
    The app returned keeps the root's callback and options, so the command parses, runs and
    reports usage errors as in ``app``. With no command named, an unknown name or shell completion
    asking (its variable set), ``app`` itself is returned (the help lists every command; click
    suggests close names).
    """
    if any(key.startswith("_") and key.endswith("_COMPLETE") for key in os.environ):
        return app
    name = _command_name(args)
    chosen = [info for info in app.registered_commands if info.name == name]
    if name is None or len(chosen) != 1:
        return app
    one = copy.copy(app)  # every setting of the root (its callback, completion, help) shared
    one.registered_commands = chosen
    return one


def _command_name(args: list[str]) -> str | None:
    """The first word of ``args`` that is neither a root option nor an option's value (the command)."""
    takes_value = False
    for arg in args:
        if takes_value:
            takes_value = False
        elif arg in _ROOT_OPTIONS_WITH_VALUE:
            takes_value = True
        elif arg == "--":
            return None
        elif not arg.startswith("-"):
            return arg
    return None


def main(app: typer.Typer, argv: list[str] | None = None) -> NoReturn:
    """Run ``app`` and exit by the contract; usage errors are JSON on stderr when ``--json`` was given."""
    args = sys.argv[1:] if argv is None else argv
    json_output = "--json" in args
    try:
        code = only_command(app, args)(args=args, prog_name="contextledger", standalone_mode=False)
    except typer.TyperException as error:  # click's usage errors: exit 2 with the usage line
        if json_output:
            usage = _report(type(error).__name__, error.format_message(), error.exit_code, json_output=True)
            raise SystemExit(usage.exit_code) from None
        show = getattr(error, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"error: {error.format_message()}\n")
        raise SystemExit(error.exit_code) from None
    except typer.Abort:
        interrupted = _report("Interrupted", "interrupted", EXIT_INTERRUPTED, json_output=json_output)
        raise SystemExit(interrupted.exit_code) from None
    except Exception as error:  # noqa: BLE001 - a bug outside any command body: reported like one inside
        if not json_output:
            traceback.print_exc()
        internal = _report(type(error).__name__, str(error), EXIT_INTERNAL, json_output=json_output)
        raise SystemExit(internal.exit_code) from None
    raise SystemExit(code if isinstance(code, int) else EXIT_OK)
