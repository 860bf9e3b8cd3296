"""Context version names say the prompt budget the user gave (issue 18, item 7)."""

from __future__ import annotations

import contextledger
from contextledger.application.render.context_versions import projection_version
from contextledger.application.render.renderer import Renderer
from contextledger.projections.policy import Policy


def test_a_version_name_shows_the_policy_and_the_prompt_budget_given():
    """``--budget 16000`` names ``default-16k``, not the window (prompt plus the output reserve)."""
    with contextledger.open_ledger("memory://") as ledger:
        renderer = Renderer(ledger)
        sixteen = projection_version(renderer.projector("default", budget=16_000))
        assert sixteen.startswith("context/default-16k/")
        assert "/20000/" not in sixteen  # the window 16,000 + 4,000 output reserve is not what was given
        odd = projection_version(renderer.projector("threshold", budget=16_384))
        assert odd.startswith("context/threshold-16384/")
        preset = renderer.projector("default")
        assert projection_version(preset).startswith(
            f"context/default-{preset.budget.prompt_limit // 1000}k/"
        )


def test_a_version_name_stays_one_path_segment_per_part_and_distinct_per_content():
    """A policy name with spaces or slashes is made safe; same name, other content: other version."""
    with contextledger.open_ledger("memory://") as ledger:
        renderer = Renderer(ledger)
        loose = Policy(name="my team/v2 policy")
        tight = loose.model_copy(update={"budget": loose.budget.model_copy(update={"output_reserve": 1000})})
        first = projection_version(renderer.projector(loose, budget=8_000))
        second = projection_version(renderer.projector(tight, budget=8_000))
        assert first.split("/")[1] == "my-team-v2-policy-8k"
        assert len(first.split("/")) == len(second.split("/")) == 5
        assert first != second
