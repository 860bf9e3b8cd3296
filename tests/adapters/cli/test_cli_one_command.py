"""A run builds the parser of the command it names only, and behaves as the whole app does."""

from __future__ import annotations

import pytest
import typer.main
from contextledger.adapters.cli import common
from contextledger.adapters.cli.app import app

from tests.adapters.cli.conftest import RunCli


def _names(chosen: typer.Typer) -> list[str]:
    return [str(info.name) for info in chosen.registered_commands]


def test_the_command_named_is_the_only_one_built() -> None:
    """After root options (and --key-file's value), the first word names the one command kept."""
    assert _names(common.only_command(app, ["rebuild", "--policy", "x"])) == ["rebuild"]
    assert _names(common.only_command(app, ["--key-file", "render", "why", "s"])) == ["why"]
    assert _names(common.only_command(app, ["--key-file=k", "sessions"])) == ["sessions"]
    chosen = common.only_command(app, ["render", "--json"])
    assert chosen.registered_callback is app.registered_callback  # the root's options stay
    group = typer.main.get_command(chosen)
    assert isinstance(group, typer.core.TyperGroup)
    assert list(group.commands) == ["render"]


@pytest.mark.parametrize(
    "args",
    [[], ["--help"], ["--version"], ["rebuil"], ["--", "rebuild"], ["--key-file", "k"]],
)
def test_without_one_known_command_the_whole_app_runs(args: list[str]) -> None:
    """No command, an unknown name (click suggests close ones) or only options: every command is built."""
    assert common.only_command(app, args) is app


def test_shell_completion_gets_the_whole_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """Completion (its variable set) lists every command, whatever the words typed so far."""
    monkeypatch.setenv("_CONTEXTLEDGER_COMPLETE", "complete_bash")
    assert common.only_command(app, ["rebuild"]) is app


def test_a_usage_error_reads_as_it_did(run_cli: RunCli) -> None:
    """A bad option of the command named is still a usage error naming that command, exit 2."""
    code, out, err = run_cli("rebuild", "--no-such-option")
    assert code == 2
    assert out == ""
    assert "contextledger rebuild" in err
    assert "No such option: --no-such-option" in err
    code, _, err = run_cli("rebuil")
    assert code == 2
    assert "Did you mean 'rebuild'?" in err


def test_the_root_options_taking_a_value_are_the_ones_skipped() -> None:
    """``only_command`` skips the value of each root option that takes one: the set is the root's own."""
    root = typer.main.get_command(app)
    with_value = {name for param in root.params if not getattr(param, "is_flag", True) for name in param.opts}
    assert with_value == common._ROOT_OPTIONS_WITH_VALUE
