"""The package installs under one import name and the core stays free of I/O imports."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {
    "contextledger": "api",
    "contextledger.domain": "domain",
    "contextledger.projections": "projections",
    "contextledger.application": "application",
    "contextledger.adapters": "adapters",
}
IO_MODULES = {
    "sqlite3",
    "psycopg",
    "psycopg_pool",
    "tiktoken",
    "tiktoken_ext",
    "httpx",
    "openai",
    "anthropic",
    "eventsourcing",
    "structlog",
    "typer",
    "rich",
    "socket",
    "urllib",
    "subprocess",
    "requests",
    "os",
}


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _package_folders() -> set[str]:
    found = set()
    for name, folder in FOLDERS.items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root).parts
            found.add(".".join((name, *relative)))
    return found


def test_every_package_folder_is_listed_for_the_wheel():
    """A sub-package missing from pyproject's list would silently vanish from the wheel."""
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    missing = sorted(_package_folders() - listed)
    assert not missing, f"add to pyproject packages: {missing}"


def test_folders_map_into_the_contextledger_namespace():
    """Each top-level folder is mapped to contextledger.*; no folder named contextledger shadows it."""
    mapping = _pyproject()["tool"]["setuptools"]["package-dir"]
    assert mapping == FOLDERS
    assert not (REPO / "contextledger").exists()


def test_import_works_beside_a_users_own_domain_package(tmp_path):
    """A user's project with its own `domain` package imports both without collision."""
    (tmp_path / "domain").mkdir()
    (tmp_path / "domain" / "__init__.py").write_text("WHO = 'user'\n")
    code = (
        "import domain, contextledger, contextledger.domain.events as e\n"
        "assert domain.WHO == 'user', domain.__file__\n"
        "assert e.__name__ == 'contextledger.domain.events'\n"
        "ledger = contextledger.open_ledger('memory://')\n"
        "sid = ledger.start_session(system_prompt='s')\n"
        "print(ledger.version(sid))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("folder", ["domain", "projections"])
def test_core_modules_import_no_io_library(folder):
    """domain/ and projections/ import no database, tokenizer, HTTP, logging or OS module."""
    offenders = {
        str(path.relative_to(REPO)): sorted(_imports(path) & IO_MODULES)
        for path in (REPO / folder).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.append(node.module or "")
    return modules


@pytest.mark.parametrize("folder", ["domain", "projections", "application", "adapters"])
def test_nothing_below_the_facade_imports_it(folder):
    """Only the facade and the composition root may import ``contextledger`` itself or ``bootstrap``."""
    offenders = [
        (str(path.relative_to(REPO)), module)
        for path in (REPO / folder).rglob("*.py")
        for module in _imported_modules(path)
        if module in {"contextledger", "contextledger.bootstrap", "contextledger.cli"}
    ]
    assert offenders == []


def test_application_reaches_io_only_through_ports():
    """application/ imports no database, tokenizer, HTTP or terminal library, and no adapter."""
    allowed_logging = {"structlog"}
    for path in (REPO / "application").rglob("*.py"):
        modules = _imported_modules(path)
        assert not [m for m in modules if m.startswith("contextledger.adapters")], path
        assert not ({m.split(".")[0] for m in modules} & (IO_MODULES - allowed_logging)), path


def test_core_never_imports_adapters():
    """The core depends on ports, never on adapters or the facade."""
    for folder in ("domain", "projections"):
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                for module in modules:
                    assert not module.startswith("contextledger.adapters"), (path, module)
                    assert not module.startswith("contextledger.application"), (path, module)


def test_import_linter_contracts_hold():
    """The import-linter layers and forbidden-module contracts pass (transitively, unlike the AST scan)."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
