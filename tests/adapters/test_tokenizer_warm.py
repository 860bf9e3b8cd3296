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
