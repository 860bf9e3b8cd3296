"""A build about to count loads the tokenizer on its background thread once, before the first texts come."""

from __future__ import annotations

import threading
import time

from contextledger.adapters.tokenizers import TiktokenCounter, get_counter
from contextledger.application.kernel.token_cache import CachedTokenCounter

from tests.adapters.test_count_ahead import Blobs, Sequential
from tests.adapters.test_token_cache_batches import RecordingStore


class SlowLoad:
    """An encoding loader that takes 50 ms and records the threads that ran it."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.started = threading.Event()
        self.encoding = get_counter("cl100k_base")._encoding  # the real encoding, loaded once here

    def __call__(self) -> object:
        self.threads.append(threading.current_thread().name)
        self.started.set()
        time.sleep(0.05)
        return self.encoding


def test_warm_loads_the_encoding_on_the_tokenizer_thread_and_a_count_meanwhile_waits_for_it():
    """warm() returns at once; the encoding loads once, there; a count here meanwhile waits for that load."""
    load = SlowLoad()
    counter = TiktokenCounter(load, "cl100k_base")
    cached = CachedTokenCounter(counter, RecordingStore(), Blobs({}))
    cached.warm()
    assert load.started.wait(5)
    assert cached.count("hello world") == 2  # waits for the load under way
    assert len(load.threads) == 1
    assert load.threads[0].startswith("contextledger-tokenizer")


def test_warm_does_nothing_for_a_tokenizer_that_cannot_count_ahead():
    """A tokenizer without ``count_ahead`` is not touched: nothing is loaded or counted."""
    inner = Sequential()
    calls: list[str] = []
    inner.count_many = lambda texts: calls.append("count_many") or []  # type: ignore[method-assign]
    CachedTokenCounter(inner, RecordingStore(), Blobs({})).warm()
    assert calls == []


def test_a_ledger_loads_each_encoding_once_for_all_its_renderers_and_simulations(monkeypatch):
    """Renderers and simulations of one ledger share its counter: cl100k_base is loaded once, not per use.

    A second ledger gets counters of its own (a ledger's ``tokenizers`` remember what they made).
    """
    import contextledger  # noqa: PLC0415
    from contextledger.adapters import tokenizers  # noqa: PLC0415
    from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer  # noqa: PLC0415
    from contextledger.application.render.renderer import Renderer  # noqa: PLC0415
    from contextledger.projections.presets import get_preset  # noqa: PLC0415
    from contextledger.projections.provider_cache import provider_cache  # noqa: PLC0415

    loads: list[str] = []
    original = tokenizers.load_encoding
    monkeypatch.setattr(
        tokenizers,
        "load_encoding",
        lambda source, construct: loads.append(source.name) or original(source, construct),
    )
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="You help.")
        ledger.add_user_message(session, "list the files")
        ledger.add_assistant_message(session, "here they are")
        ledger.add_user_message(session, "thanks")
        ledger.add_assistant_message(session, "you are welcome")
        for _ in range(2):
            result = contextledger.simulate(
                ledger,
                [session],
                [("default", get_preset("default"))],
                cache=provider_cache("anthropic", "5m"),
                new_scratch=lambda: contextledger.open_ledger("memory://"),
                make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
            )
            assert len(result.calls) == 2
        for _ in range(2):
            assert Renderer(ledger).render(session).tokens > 0
        assert ledger.ports.tokenizers("cl100k_base") is ledger.ports.tokenizers("cl100k_base")
        assert loads == ["cl100k_base.tiktoken"]
        with contextledger.open_ledger("memory://") as other:
            assert other.ports.tokenizers("cl100k_base") is not ledger.ports.tokenizers("cl100k_base")
