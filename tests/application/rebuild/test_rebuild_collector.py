"""The rebuild lets its folded states go before the collector runs again, and leaves it as it was."""

from __future__ import annotations

import gc

import pytest
from contextledger.application.rebuild import rebuild as rebuild_module
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.rebuild import rebuild
from contextledger.projections.presets import get_preset
from contextledger.projections.state import RenderState


def _spec(preset: str) -> RebuildSpec:
    return RebuildSpec(get_preset(preset).model_dump_json(), 2_000, "heuristic")


def _states() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, RenderState))


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_the_rebuild_found_it(filled, enabled):
    """On or off before the rebuild, the cyclic collector is the same after it."""
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        rebuild(filled, _spec("default"), switch=True)
        rebuild(filled, _spec("threshold"))
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()


def test_no_folded_state_is_alive_while_the_versions_are_compared(filled, monkeypatch):
    """The build's states are freed before the comparison (the collector would otherwise walk them all)."""
    rebuild(filled, _spec("default"), switch=True)
    before = _states()
    alive: list[int] = []
    compare = rebuild_module.compare_versions

    def counting(*args, **kwargs):
        alive.append(_states())
        return compare(*args, **kwargs)

    monkeypatch.setattr(rebuild_module, "compare_versions", counting)
    result = rebuild(filled, _spec("threshold"))
    assert result.comparison is not None
    assert result.stats.events > 0
    assert alive == [before]
