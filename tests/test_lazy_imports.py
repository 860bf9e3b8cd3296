"""`import contextledger` and `contextledger --help` load only what they need (modules, never timing)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import contextledger
import pytest
from contextledger.domain import errors

REPO = Path(__file__).resolve().parents[1]

HEAVY = (
    "contextledger.adapters",
    "contextledger.application",
    "contextledger.bootstrap",
    "contextledger.projections",
    "tiktoken",
    "psycopg",
    "eventsourcing",
    "pydantic",
    "structlog",
    "rich",
    "typer",
    "httpx",
)
"""Modules that ``import contextledger`` must leave unloaded (each, or any submodule of it)."""

CLI_HEAVY = (
    "contextledger.adapters.importers",
    "contextledger.adapters.formats",
    "contextledger.adapters.store",
    "contextledger.application",
    "contextledger.bootstrap",
    "contextledger.projections",
    "tiktoken",
    "psycopg",
    "eventsourcing",
    "pydantic",
    "structlog",
)
"""Modules that ``contextledger --help`` and ``--version`` must leave unloaded."""


def _loaded_after(code: str) -> list[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _heavy(loaded: list[str], heavy: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in heavy)]


def test_import_contextledger_loads_no_adapter_store_or_tokenizer():
    """`import contextledger` loads none of the importers, stores, tokenizers, pydantic or rich."""
    assert _heavy(_loaded_after("import contextledger"), HEAVY) == []


def test_one_name_loads_only_its_own_modules():
    """Using the errors loads no store, importer or tokenizer; using open_ledger loads no importer."""
    errors_only = _loaded_after("import contextledger\ncontextledger.SessionNotFoundError")
    assert _heavy(errors_only, HEAVY) == []
    opened = _loaded_after("import contextledger\ncontextledger.open_ledger('memory://').close()")
    assert "contextledger.bootstrap" in opened
    assert _heavy(opened, ("contextledger.adapters.importers", "contextledger.adapters.formats")) == []


def test_a_sqlite_ledger_never_loads_psycopg(tmp_path):
    """Opening, writing, rendering and rebuilding a SQLite ledger loads no PostgreSQL driver (~0.1-0.25 s).

    Every CLI command on an embedded ledger paid psycopg's import: the memory and SQLite recorders
    imported the module that also held PostgreSQL's erasure, and the store factory imported the
    PostgreSQL store at the top.
    """
    url = f"sqlite:///{tmp_path / 'l.db'}"
    code = (
        "import contextledger\n"
        f"with contextledger.open_ledger({url!r}) as ledger:\n"
        "    agent = contextledger.AgentContext.start(ledger, provider='openai', system_prompt='s')\n"
        "    agent.add_user_message('hello')\n"
        "    agent.request()\n"
        "from contextledger.cli import main\n"
        f"sys.argv = ['contextledger', 'rebuild', '--policy', 'threshold', '--workers', '1', '--db', {url!r}]"
        "\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
    )
    assert _heavy(_loaded_after(code), ("psycopg", "eventsourcing.postgres")) == []


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_cli_help_and_version_load_no_store_importer_or_tokenizer(flag):
    """The console script answers --help and --version without loading stores, importers or tokenizers."""
    code = (
        f"sys.argv = ['contextledger', {flag!r}]\n"
        "from contextledger.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
    )
    assert _heavy(_loaded_after(code), CLI_HEAVY) == []


def test_every_public_name_resolves_and_unknown_names_fail():
    """Every name of __all__ loads from its module; an unknown name is an AttributeError."""
    for name in contextledger.__all__:
        assert getattr(contextledger, name) is getattr(
            importlib.import_module(contextledger._LAZY[name]), name
        )
    assert sorted(dir(contextledger)) == sorted(contextledger.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = contextledger.nope


def test_type_checking_imports_match_the_lazy_table():
    """The facade's TYPE_CHECKING imports (what type checkers see) name the same modules as _LAZY."""
    tree = ast.parse((REPO / "api" / "__init__.py").read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
    seen = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == contextledger._LAZY
    assert sorted(seen) == sorted(contextledger.__all__)


def test_every_error_of_the_tree_is_public():
    """Each error class of contextledger.domain.errors is reachable as contextledger.<Name>."""
    assert set(errors.__all__) <= set(contextledger.__all__)
