"""A summary's estimated context size after it replaces its span: never below the summary itself."""

from __future__ import annotations

from contextledger.application.summaries.summary_worker import _after


def test_the_size_after_is_the_context_less_its_span_plus_the_summary():
    """5,720 tokens, a 2,000-token span, a 256-token summary: 3,976 after."""
    assert _after(5_720, 2_000, 256) == 3_976


def test_a_span_that_outweighs_the_context_gives_no_estimate_rather_than_zero():
    """The span counted whole (9,000) outweighs the rendered context (5,720): no estimate, not 0.

    The artifact said "5,720 -> 0 (summary 256)": a context holding a 256-token summary is not empty.
    """
    assert _after(5_720, 9_000, 256) is None
    assert _after(5_720, 5_720, 256) == 256
