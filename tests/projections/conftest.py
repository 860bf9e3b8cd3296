"""Makes the projection test helpers importable (tests are not a package); the neutral-context fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from tests.projections.rendered_builders import neutral, rich_context

__all__ = ["neutral", "rich_context"]
