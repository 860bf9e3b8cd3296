"""A snippet ``search`` or ``show`` printed, pasted back into ``why`` or ``search``, finds its text."""

from __future__ import annotations

import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
from contextledger.application.search.log_search import search_session


def test_a_snippet_with_its_line_break_shown_as_a_space_is_found():
    """Snippets show a line break as a space.

    Pasted back, "please fix the parser" read "not in the log: the session never held it" of a text the
    session held, over two lines.
    """
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="s")
        ledger.add_user_message(session, "please fix\n    the parser in src/p.py")
        ledger.add_assistant_message(session, "ok")
        [hit] = search_session(ledger, session, "parser")
        assert hit.snippet == "please fix the parser in src/p.py"
        assert [h.position for h in search_session(ledger, session, hit.snippet)] == [2]
        answer = why(ledger, session, "fix the parser", renderer=Renderer(ledger, tokenizer="heuristic"))
        assert answer.entered_at == 2
        assert answer.verdict.startswith("still in context")
        assert search_session(ledger, session, "fix  the") == []  # two spaces are matched as they are
