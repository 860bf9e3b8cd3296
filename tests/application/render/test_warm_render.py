"""A warm render with no new event reuses its context; any change renders afresh, equal to a new renderer."""

from __future__ import annotations

import base64

import contextledger
import msgspec
import pytest
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import SessionForgottenError, SessionNotFoundError
from contextledger.projections.policy import Policy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _session(ledger: contextledger.Ledger, turns: int) -> str:
    session = ledger.start_session(system_prompt="be brief")
    for i in range(turns):
        ledger.add_user_message(session, f"question {i} " + "word " * 50)
        ledger.add_assistant_message(session, f"answer {i} " + "word " * 50)
    return session


def _bytes(context: object) -> bytes:
    return msgspec.json.encode(context)


def test_a_warm_render_without_new_events_is_the_same_context():
    """Nothing new: the very same (frozen) context; a new event gives a new one, as a new renderer's."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, 30)
        renderer = Renderer(ledger)
        first = renderer.render(session, "default", budget=2_000)
        assert renderer.render(session, "default", budget=2_000) is first
        ledger.add_user_message(session, "one more")
        after = renderer.render(session, "default", budget=2_000)
        assert after is not first
        assert after.position == first.position + 1
        assert _bytes(after) == _bytes(Renderer(ledger).render(session, "default", budget=2_000))


def test_the_reused_context_follows_position_budget_and_policy():
    """An earlier position, another budget or policy each render their own context, as new renderers do."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, 30)
        renderer = Renderer(ledger)
        for _ in range(2):
            cases = (
                (None, 2_000, "default"),
                (20, 2_000, "default"),
                (None, 3_000, "default"),
                (None, 2_000, "nexus"),
            )
            for at, budget, policy in cases:
                warm = renderer.render(session, policy, at=at, budget=budget)
                fresh = Renderer(ledger).render(session, policy, at=at, budget=budget)
                assert _bytes(warm) == _bytes(fresh)


def test_equal_policy_objects_render_the_same_context():
    """Two distinct but equal policy objects render the same bytes, as a new renderer does."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, 20)
        renderer = Renderer(ledger)
        one = Policy.parse({"base": "default"})
        other = Policy.parse({"base": "default"})
        assert one is not other
        expected = _bytes(Renderer(ledger).render(session, one, budget=2_000))
        assert _bytes(renderer.render(session, one, budget=2_000)) == expected
        assert _bytes(renderer.render(session, other, budget=2_000)) == expected


def test_a_warm_render_reads_the_store_once(tmp_path, monkeypatch):
    """With nothing new, a render asks the store one thing: the heads of the session and its summaries.

    No event, artifact nor single head is read; a new event or artifact is read as before.
    """
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        session = _session(ledger, 30)
        renderer = Renderer(ledger)
        first = renderer.render(session, "default", budget=2_000)
        store = ledger.ports.log
        calls: list[str] = []
        for name in ("read", "version", "versions"):
            method = getattr(store, name)

            def spy(*args: object, _name: str = name, _method: object = method, **kw: object) -> object:
                calls.append(_name)
                return _method(*args, **kw)  # type: ignore[operator]

            monkeypatch.setattr(store, name, spy)
        assert renderer.render(session, "default", budget=2_000) is first
        assert calls == ["versions"]
        ledger.record_summary(
            session, covers_from=2, covers_through=40, text="Thirty questions.", produced_at=41
        )
        calls.clear()
        summarized = renderer.render(session, "default", budget=2_000)
        assert calls[0] == "versions"
        assert "read" in calls  # the moved summary stream is read again
        assert summarized.summary_id is not None
        calls.clear()
        assert renderer.render(session, "default", budget=2_000) is summarized
        assert calls == ["versions"]


def test_an_artifact_another_ledger_records_reaches_a_warm_render(tmp_path):
    """A summary stored through another ledger on the same file (another process) is used at once."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with contextledger.open_ledger(url) as ledger, contextledger.open_ledger(url) as other:
        session = _session(ledger, 30)
        renderer = Renderer(ledger)
        assert renderer.render(session, "default", budget=2_000).summary_id is None
        other.record_summary(
            session, covers_from=2, covers_through=40, text="Thirty questions.", produced_at=41
        )
        warm = renderer.render(session, "default", budget=2_000)
        assert warm.summary_id is not None
        assert _bytes(warm) == _bytes(Renderer(ledger).render(session, "default", budget=2_000))


def test_a_warm_render_of_a_forgotten_session_is_refused(tmp_path, monkeypatch):
    """Forgotten after a render: the next render raises, however little changed, and serves nothing kept."""
    monkeypatch.setenv("CIPHER_KEY", base64.b64encode(b"k" * 32).decode())
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        session = _session(ledger, 30)
        ledger.record_summary(
            session, covers_from=2, covers_through=40, text="Thirty questions.", produced_at=41
        )
        renderer = Renderer(ledger)
        assert renderer.render(session, "default", budget=2_000).summary_id is not None
        ledger.forget(session, reason="erasure request")
        with pytest.raises(SessionForgottenError):
            renderer.render(session, "default", budget=2_000)
        with pytest.raises(SessionNotFoundError):
            renderer.render("nobody", "default", budget=2_000)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "summary", "backfill", "render"]), st.integers(0, 10_000)
        ),
        min_size=1,
        max_size=30,
    )
)
def test_warm_renders_between_appends_and_artifacts_equal_a_new_renderer(steps):
    """Whatever moves (the session, its summary stream, both, neither), a kept renderer renders as a new one.

    Artifacts are recorded now or backfilled at an earlier position; each render is compared byte for byte
    with a renderer that starts empty.
    """
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, 6)
        renderer = Renderer(ledger)
        for kind, pick in steps:
            head = ledger.version(session)
            if kind == "user":
                ledger.add_user_message(session, f"more {pick} " + "word " * (pick % 60))
            elif kind == "assistant":
                ledger.add_assistant_message(session, f"reply {pick} " + "word " * (pick % 60))
            elif kind in {"summary", "backfill"}:
                through = 2 + pick % (head - 2)
                produced = None if kind == "summary" else through + 1  # backfilled: due at once
                ledger.record_summary(
                    session,
                    covers_from=2,
                    covers_through=through,
                    text=f"summary {pick}",
                    produced_at=produced,
                )
            warm = renderer.render(session, "default", budget=600)
            assert _bytes(warm) == _bytes(Renderer(ledger).render(session, "default", budget=600))
