"""`LRUCache`, the package's one bounded, thread-safe cache (issue 54).

Checked against a plain reference model step by step (a Hypothesis state machine), at
thousands of entries, and from threads racing on a small budget (invariants, not timings).
"""

from __future__ import annotations

import gc
import random
import sys
import threading
from functools import partial
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from langchain_core.messages import HumanMessage, ToolMessage

from langgraph_ctx._lru import LRUCache, measured, measured_deep, serial_of
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.graph.attempts import KnownModels
from langgraph_ctx.prompt import excerpt
from langgraph_ctx.prompt.render import RenderCache
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.tokens import _text_tokens
from langgraph_ctx.tokens._encodings import _SPECS, get_encoding
from langgraph_ctx.tokens._text_tokens import TextTokens
from langgraph_ctx.tokens.provider_count import ProviderCounter


def _sized(key: Any, value: tuple[Any, int]) -> int:
    return value[1]  # a value says its own size: the tests can add the sizes up again


def test_least_recently_used_goes_first() -> None:
    cache: LRUCache[str, int] = LRUCache(max_items=3)
    for i, key in enumerate("abc"):
        assert cache.put(key, i)
    assert cache.get("a") == 0  # "b" is now the least recently used
    cache.put("d", 3)
    assert cache.get("b") is None
    assert cache.values() == [2, 0, 3]  # c, a, d: least recently used first
    cache.put("c", 9)  # a replacement is a use
    cache.put("e", 4)
    assert cache.values() == [3, 9, 4]
    assert cache.get_many(["d", "x", "c"]) == [3, None, 9]  # refreshes d, then c
    cache.put("f", 5)
    assert cache.values() == [3, 9, 5]


def test_thousands_of_entries_keep_the_newest_within_the_byte_budget() -> None:
    cache: LRUCache[int, tuple[int, int]] = LRUCache(10_000, size=_sized)
    for i in range(5_000):
        cache.put(i, (i, 7))
    kept = cache.values()
    assert len(cache) == len(kept) == 10_000 // 7
    assert [v[0] for v in kept] == list(range(5_000 - 10_000 // 7, 5_000))
    assert cache.bytes == 7 * len(kept)


def test_byte_accounting_is_exact_after_replace_pop_and_clear() -> None:
    cache: LRUCache[str, tuple[str, int]] = LRUCache(100, size=_sized)
    cache.put("a", ("a", 30))
    cache.put("b", ("b", 30))
    assert cache.bytes == 60
    cache.put("a", ("a2", 50))  # replaced: its old size is given back
    assert cache.bytes == 80
    assert cache.values() == [("b", 30), ("a2", 50)]
    cache.put("c", ("c", 40))  # 120 > 100: "b" goes
    assert (cache.bytes, cache.values()) == (90, [("a2", 50), ("c", 40)])
    assert cache.pop("a") == ("a2", 50)
    assert cache.pop("a") is None
    assert (cache.bytes, len(cache)) == (40, 1)
    cache.clear()
    assert (cache.bytes, len(cache), cache.values()) == (0, 0, [])
    cache.put("d", ("d", 100))  # exactly the budget fits
    assert cache.bytes == 100


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    cache: LRUCache[str, tuple[str, int]] = LRUCache(100, size=_sized)
    cache.put("small", ("small", 10))
    cache.put("big", ("big", 60))
    assert not cache.put("huge", ("huge", 101))
    assert cache.get("huge") is None
    assert cache.values() == [("small", 10), ("big", 60)]  # nothing evicted for it
    assert not cache.put("big", ("big2", 101))  # too large: the key holds nothing, not stale
    assert cache.get("big") is None
    assert (cache.bytes, len(cache)) == (10, 1)


def test_peek_reads_without_making_a_use() -> None:
    cache: LRUCache[str, int] = LRUCache(max_items=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert (cache.peek("a"), cache.peek("x")) == (1, None)
    cache.put("c", 3)  # "a" was only peeked at: still the least recently used
    assert (cache.peek("a"), cache.values()) == (None, [2, 3])
    peek = cache.peek  # a reader may keep it: it follows replacements, evictions and clears
    cache.put("b", 20)
    assert peek("b") == 20
    assert cache.pop("b") == 20 and peek("b") is None
    cache.clear()
    assert peek("c") is None
    cache.put("c", 30)
    assert peek("c") == 30
    assert cache.put("c", 3)  # replaced in place
    assert peek("c") == 3


def test_measured_deep_counts_what_an_entry_holds_once() -> None:
    text, name = "x" * 5_000, "io_utils.py"
    names = frozenset([name, "io_utils"])
    assert measured_deep(text, names) == (
        sys.getsizeof(text) + sys.getsizeof(names) + sum(map(sys.getsizeof, names))
    )
    shared = (names, names)  # one frozenset held twice counts once
    inner = measured_deep(text, names) - sys.getsizeof(text)
    assert measured_deep("k", shared) == sys.getsizeof("k") + sys.getsizeof(shared) + inner
    source = HumanMessage("y" * 20_000, id="m1")
    held = measured_deep(("placeholder", "m1"), ({"chars": 20_000}, source, HumanMessage("[cut]")))
    assert held > 20_000 > measured(("placeholder", "m1"), source)  # a message's text counts


def test_a_count_of_zero_keeps_nothing() -> None:
    cache: LRUCache[str, int] = LRUCache(max_items=0)
    assert not cache.put("a", 1)
    assert (cache.get("a"), len(cache), cache.bytes) == (None, 0, 0)


def test_both_bounds_hold_together() -> None:
    cache: LRUCache[int, tuple[int, int]] = LRUCache(50, max_items=3, size=_sized)
    for i in range(4):
        cache.put(i, (i, 5))
    assert [v[0] for v in cache.values()] == [1, 2, 3]  # the count bound
    cache.put(9, (9, 44))
    assert [v[0] for v in cache.values()] == [3, 9]  # the byte bound: 5 + 44 <= 50
    assert cache.bytes == 49


def test_on_drop_hears_each_entry_dropped_for_room_and_no_other() -> None:
    dropped: list[tuple[int, str]] = []
    cache: LRUCache[int, str] = LRUCache(max_items=2, on_drop=lambda k, v: dropped.append((k, v)))
    for i in range(5):
        cache.put(i, f"v{i}")
    cache.put(4, "again")  # replaced: not dropped
    cache.pop(3)  # popped: not dropped
    assert dropped == [(0, "v0"), (1, "v1"), (2, "v2")]
    # Called after the cache's lock is released: the callback may use the cache.
    reentrant: LRUCache[int, int] = LRUCache(max_items=1, on_drop=lambda k, _v: reentrant.pop(k))
    reentrant.put(1, 1)
    assert reentrant.put(2, 2) and reentrant.values() == [2]


def test_the_default_size_is_measured() -> None:
    key, value = ("a", 1), "x" * 1000
    assert measured(key, value) == sys.getsizeof(key) + sys.getsizeof(value)
    cache: LRUCache[tuple[str, int], str] = LRUCache(10_000)
    cache.put(key, value)
    assert cache.bytes == measured(key, value) > 1000
    assert not cache.put(("b", 2), "y" * 20_000)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({}, "needs a bound"),
        ({"max_bytes": -1}, "max_bytes"),
        ({"max_items": 1.5}, "max_items"),
        ({"max_items": True}, "max_items"),
        ({"max_bytes": "64MB"}, "max_bytes"),
    ],
)
def test_bad_bounds_are_refused(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        LRUCache(**kwargs)


@pytest.mark.parametrize("size", [-1, 2.5, None])
def test_a_size_that_is_not_a_byte_count_is_refused(size: Any) -> None:
    cache: LRUCache[str, int] = LRUCache(100, size=lambda k, v: size)
    with pytest.raises(ConfigError, match="size must give"):
        cache.put("a", 1)
    assert (len(cache), cache.bytes) == (0, 0)


class _AgainstAModel(RuleBasedStateMachine):
    """Every operation, checked against a list of (key, value, size), least recent first."""

    def __init__(self) -> None:
        super().__init__()
        self.max_bytes, self.max_items = 60, 6
        self.cache: LRUCache[int, tuple[int, int]] = LRUCache(
            self.max_bytes, max_items=self.max_items, size=_sized
        )
        self.model: list[tuple[int, tuple[int, int]]] = []

    def _find(self, key: int) -> int | None:
        return next((i for i, (k, _) in enumerate(self.model) if k == key), None)

    @rule(key=st.integers(0, 12), tag=st.integers(0, 3), size=st.integers(0, 70))
    def put(self, key: int, tag: int, size: int) -> None:
        found = self._find(key)
        if found is not None:
            self.model.pop(found)
        kept = size <= self.max_bytes
        if kept:
            self.model.append((key, (tag, size)))
            while sum(v[1] for _, v in self.model) > self.max_bytes or (
                len(self.model) > self.max_items
            ):
                self.model.pop(0)
        assert self.cache.put(key, (tag, size)) is kept

    @rule(key=st.integers(0, 12))
    def get(self, key: int) -> None:
        found = self._find(key)
        expected = None if found is None else self.model[found][1]
        if found is not None:
            self.model.append(self.model.pop(found))
        assert self.cache.get(key) == expected

    @rule(key=st.integers(0, 12))
    def peek(self, key: int) -> None:
        found = self._find(key)  # not a use: the model's order stays
        assert self.cache.peek(key) == (None if found is None else self.model[found][1])

    @rule(keys=st.lists(st.integers(0, 12), max_size=5))
    def get_many(self, keys: list[int]) -> None:
        expected = []
        for key in keys:
            found = self._find(key)
            expected.append(None if found is None else self.model[found][1])
            if found is not None:
                self.model.append(self.model.pop(found))
        assert self.cache.get_many(keys) == expected

    @rule(key=st.integers(0, 12))
    def pop(self, key: int) -> None:
        found = self._find(key)
        expected = None if found is None else self.model.pop(found)[1]
        assert self.cache.pop(key) == expected

    @precondition(lambda self: len(self.model) > 3)
    @rule()
    def clear(self) -> None:
        self.model.clear()
        self.cache.clear()

    @invariant()
    def agrees(self) -> None:
        assert self.cache.values() == [v for _, v in self.model]
        assert len(self.cache) == len(self.model)
        assert self.cache.bytes == sum(v[1] for _, v in self.model)


TestAgainstAModel = _AgainstAModel.TestCase
TestAgainstAModel.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)


def test_threads_racing_on_a_small_budget_keep_every_invariant() -> None:
    max_bytes, max_items, keys = 4_000, 300, 600
    cache: LRUCache[int, tuple[int, int]] = LRUCache(max_bytes, max_items=max_items, size=_sized)
    wrong: list[str] = []
    start = threading.Barrier(8)

    def expect(key: int) -> tuple[int, int]:
        return key, 1 + key % 37  # never 0 bytes: the last put below must drop every entry

    def work(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        for _ in range(20_000):
            key, op = rng.randrange(keys), rng.random()
            if op < 0.5:
                cache.put(key, expect(key))  # a key's value is always the same: checkable
            elif op < 0.7:
                hit = cache.get(key)
                if hit is not None and hit != expect(key):
                    wrong.append(f"get({key}) gave {hit}")
            elif op < 0.8:
                picked = [rng.randrange(keys) for _ in range(20)]
                for k, hit in zip(picked, map(cache.peek, picked), strict=True):
                    if hit is not None and hit != expect(k):
                        wrong.append(f"peek gave {hit} for {k}")
            elif op < 0.9:
                picked = [rng.randrange(keys) for _ in range(20)]
                for k, hit in zip(picked, cache.get_many(picked), strict=True):
                    if hit is not None and hit != expect(k):
                        wrong.append(f"get_many gave {hit} for {k}")
            elif op < 0.995:
                cache.pop(key)
            else:
                cache.clear()
            if cache.bytes > max_bytes or len(cache) > max_items:
                wrong.append(f"over budget: {cache.bytes} bytes, {len(cache)} entries")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: inside a method, were it unlocked
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []
    kept = cache.values()
    assert len(kept) == len(cache) == len({v[0] for v in kept}) <= max_items
    assert cache.bytes == sum(v[1] for v in kept) <= max_bytes
    assert all(v == expect(v[0]) for v in kept)
    cache.put(keys, (keys, max_bytes))  # still works: one entry of the whole budget
    assert (cache.values(), cache.bytes) == ([(keys, max_bytes)], max_bytes)


class _CountingModel(ScriptedChatModel):
    """A chat model whose provider counts a prompt's characters."""

    def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
        return sum(len(str(m.content)) for m in messages)


def test_the_caches_built_on_it_keep_their_count_bounds() -> None:
    """`ProviderCounter(cache_size=)` and `KnownModels` bound by count, as they always did."""
    counter = ProviderCounter(_CountingModel(), cache_size=2)
    first, *rest = [HumanMessage(f"message {i}") for i in range(3)]
    for message in [first, *rest, rest[-1]]:
        counter.count_message(message)
    assert counter.api_calls == 3  # the repeat of the newest was cached
    counter.count_message(first)  # the least recently used, dropped for the third
    assert counter.api_calls == 4
    with pytest.raises(ConfigError, match="cache_size"):
        ProviderCounter(_CountingModel(), cache_size=-1)

    known = KnownModels()
    models = [ScriptedChatModel() for _ in range(KnownModels.size + 4)]
    known.update(models)
    known.update(models[:1])  # seen again: the newest
    assert known.models() == [*models[5:], models[0]]


def test_the_caches_moved_onto_it_stay_within_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piece counts, rendered placeholders and names: bounded in bytes, answers unchanged."""
    monkeypatch.setattr(_text_tokens, "PIECES_BYTES", 2_000)
    encoding = get_encoding("o200k_base")
    count = TextTokens(encoding, _SPECS["o200k_base"]["ascii_pat_str"])
    texts = [f"def f_{i}(x):\n    return x + {i * 7919}\n" for i in range(300)]
    done = threading.Event()
    other = threading.Thread(target=done.wait)  # another thread: short text is counted here
    other.start()
    try:
        assert count.holds_gil
        for text in texts * 2:  # the second pass meets pieces dropped for newer ones
            assert count(text) == len(encoding.encode_ordinary(text))
    finally:
        done.set()
        other.join()
    assert 0 < count._counts.bytes <= 2_000

    render = RenderCache(max_bytes=60_000)
    sources = [ToolMessage("x" * 5_000, tool_call_id=f"c{i}", id=f"m{i}") for i in range(40)]
    cut = partial(HumanMessage, "[cut]")
    shown = [render.placeholder(("pruned", s.id), {"chars": 5_000}, s, cut) for s in sources]
    assert render.placeholder(("pruned", "m39"), {"chars": 5_000}, sources[-1], cut) is shown[-1]
    made = render.placeholder(("pruned", "m0"), {"chars": 5_000}, sources[0], cut)
    assert made is not shown[0]  # dropped for newer ones, made again
    assert 5_000 < render._items.bytes <= 60_000

    small: LRUCache[str, frozenset[str]] = LRUCache(3_000)  # as `_TEXT_NAMES`, measured
    monkeypatch.setattr(excerpt, "_TEXT_NAMES", small)
    lines = [f"src/pkg/mod_{i}.py:{i + 1000}: def read_rows_{i}(self)" for i in range(100)]
    first = [excerpt.salient_names(line) for line in lines]
    assert [excerpt.salient_names(line) for line in lines] == first
    assert {"mod_7.py", "read_rows_7", "1007"} <= first[7]
    assert 0 < small.bytes <= 3_000


def test_serial_of_is_stable_for_an_object_and_never_reused() -> None:
    """A cache keyed by an object's serial never answers a new object with an old one's entries."""

    class Owner:
        pass

    first, second = Owner(), Owner()
    assert serial_of(first) == serial_of(first)
    assert serial_of(first) != serial_of(second)
    seen = {serial_of(first), serial_of(second)}
    del first, second
    gc.collect()
    # New objects may reuse the collected ones' ids, never their serials.
    assert all(serial_of(Owner()) not in seen for _ in range(50))
