"""Every archive search bounded in time, memory and output, whatever the query (issue 50).

Found against c9d7445: the 13 characters `a{4294967294}` (regex=True) took every byte of the
host's memory while compiling (`a{10000000}`: 8.6 s, 4 GB), in the agent's search tool and
the demo's `search_text` alike; a word query had no time bound (`e` over 10 MB: 1 to 9 s);
the process cache counted a text's length, not what it holds (a budget of N MB held 3.5 N
with short lines); searches running at once each decoded the whole archive again; names and
ids in an answer kept line separators and bidi controls. Each test here failed then.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langgraph_ctx.archive import (
    Archive,
    DirectoryBackend,
    EntryCache,
    asearch_archive,
    ranking,
    search_archive,
)
from langgraph_ctx.archive import search as search_module
from langgraph_ctx.archive.matching import parse_query, searchable_entry
from langgraph_ctx.archive.ranking import find_hits

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "error", "value", "token", "zeta"]


def _lines(count: int, seed: int) -> str:
    """`count` lines of a few words each, every one holding an `e`."""
    return "\n".join(
        " ".join(WORDS[(seed + n * k) % len(WORDS)] for k in range(1, 2 + (n + seed) % 6))
        for n in range(count)
    )


def _archive(entries: int, lines: int) -> Archive:
    archive = Archive(InMemoryStore(), thread_id="t1")
    for n in range(entries):
        message = ToolMessage(_lines(lines, n), tool_call_id=f"c{n}", name="bash", id=f"m{n}")
        archive.put_message(message)
    return archive


# --- compiling a pattern ------------------------------------------------------------------

_COMPILE_UNDER_A_LIMIT = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1024 ** 3, 1024 ** 3))
from langchain_core.messages import ToolMessage
from langgraph.store.memory import InMemoryStore
from langgraph_ctx.archive import Archive, search_archive
from langgraph_ctx_tools.cli.folder_tools import make_tools

archive = Archive(InMemoryStore(), thread_id="t1")
archive.put_message(ToolMessage("aaaa", tool_call_id="c1"))
search_text = next(t for t in make_tools(sys.argv[1]) if t.name == "search_text")
out = {}
for pattern in ["a{4294967294}", "a{10000000}", "(a{1000}){1000}", "((a{30}){30}){30}"]:
    began = time.monotonic()
    try:
        answer = search_archive(archive, pattern, regex=True)
        call = {"type": "tool_call", "id": "c", "name": "search_text", "args": {"pattern": pattern}}
        demo = str(search_text.invoke(call).content)
    except MemoryError:
        answer = demo = "MemoryError"
    out[pattern] = [answer, demo, time.monotonic() - began]
print(json.dumps(out))
"""


def test_a_counted_repetition_is_refused_before_it_is_compiled(tmp_path: Path) -> None:
    """Under a 1 GB address-space limit (a subprocess: this process is never at risk), each
    pattern gets one line saying it repeats too much, from the search tool and the demo."""
    (tmp_path / "notes.txt").write_text("aaaa\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_UNDER_A_LIMIT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2_000:]
    for pattern, (answer, demo, seconds) in json.loads(done.stdout).items():
        for text in (answer, demo):
            assert "repeats too much" in text and "\n" not in text, (pattern, text)
            assert "use + or *" in text
        assert seconds < 5, (pattern, seconds)


def test_ordinary_counts_still_compile() -> None:
    archive = Archive(InMemoryStore(), thread_id="t1")
    archive.put_message(
        ToolMessage("sha 0123456789abcdef0123456789abcdef01234567", tool_call_id="c")
    )
    for pattern in (r"[0-9a-f]{40}", r"\d{3,}", r"(?:[0-9a-f]{8}-){3}", r"a{0,100000}"):
        answer = search_archive(archive, pattern, regex=True, cache=EntryCache())
        assert "repeats too much" not in answer, pattern


# --- one time budget, a partial answer that says so ----------------------------------------


def test_a_common_word_answers_in_its_budget_and_says_it_is_partial() -> None:
    """`e` is on each of 120,000 lines: the search stops in its budget (before: seconds, every
    line ranked) with the hits of the newest lines, and says how much it searched."""
    archive = _archive(entries=60, lines=2_000)
    cache = EntryCache(max_bytes=256 * 1024 * 1024)
    search_archive(archive, "nothing-like-this", cache=cache)  # read once: the cache is warm
    began = time.monotonic()
    answer = search_archive(archive, "e", cache=cache, limit=3)
    took = time.monotonic() - began
    head = answer.splitlines()[0]
    assert "PARTIAL" in head and "of 120,000 lines, newest first" in head, head
    assert '"quoted phrase"' in head and "filter by kind or tool" in head
    assert "message m59" in answer  # the newest entry was searched
    assert took < 2, took  # generous: the budget is 80 ms (before: 2 to 9 s)
    # A rare word over the same archive is searched whole: the answer is complete.
    whole = search_archive(archive, "nothing-like-this", cache=cache)
    assert whole.startswith("search_history: no line matches") and "PARTIAL" not in whole


def test_a_pattern_that_runs_out_answers_with_what_it_found() -> None:
    """A plain pattern matching most lines, and a catastrophic one: each stops near its
    budget, with the hits found so far (before: an error and no hit) or one line."""
    archive = _archive(entries=60, lines=2_000)
    cache = EntryCache(max_bytes=256 * 1024 * 1024)
    search_archive(archive, "nothing-like-this", cache=cache)
    began = time.monotonic()
    plain = search_archive(archive, r"e\w*\s+\w", regex=True, cache=cache, limit=2)
    assert time.monotonic() - began < 2
    assert "PARTIAL" in plain.splitlines()[0] and "> " in plain, plain
    began = time.monotonic()
    slow = search_archive(archive, r"^(\w+\s?)+\d$", regex=True, cache=cache)
    assert time.monotonic() - began < 2
    assert "ran out of time" in slow and "PARTIAL" in slow and "\n" not in slow, slow


def test_an_answer_within_bounds_is_unchanged() -> None:
    """A search the bounds never reach says nothing of them."""
    archive = _archive(entries=3, lines=50)
    answer = search_archive(archive, '"alpha beta"', cache=EntryCache())
    assert "PARTIAL" not in answer and answer.startswith("search_history: ")


PIECES = ["flush", "flush_batch", "Batch", "app/flush.py", "ERROR", "straße", "port", " ", ".", "x"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([*PIECES, "\n", "\n"]), max_size=60).map("".join),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["flush", "flush batch", '"flush_batch" port', "x", "ss"]),
    st.sampled_from([r"flush\s+batch", r"^port", r"x$", r"(?-m)^x", r"\bflush\b"]),
    st.integers(min_value=1, max_value=5),
)
def test_matching_by_windows_answers_as_matching_whole(
    texts: list[str], words: str, pattern: str, window: int
) -> None:
    """The scan looks at the clock every `_WINDOW_LINES` lines; windows of 1 to 5 lines give
    the same hits, keys and order as one window per entry (a term never spans a line)."""
    entries = [
        searchable_entry(f"ref-{n}", "message", ToolMessage(text, tool_call_id=f"c{n}"))
        for n, text in enumerate(texts)
    ]
    for query in (parse_query(words), parse_query(pattern, regex=True)):
        with _window(10**9):
            whole = [(h.key, h.entry.ref, h.at) for h in find_hits(entries, query, budget=60)]
        with _window(window):
            windowed = find_hits(entries, query, budget=60)
        assert [(h.key, h.entry.ref, h.at) for h in windowed] == whole
        assert windowed.stopped is None and windowed.searched_lines == windowed.total_lines


@contextlib.contextmanager
def _window(lines: int) -> Iterator[None]:
    before = ranking._WINDOW_LINES
    ranking._WINDOW_LINES = lines
    try:
        yield
    finally:
        ranking._WINDOW_LINES = before


# --- the process cache counts real bytes --------------------------------------------------


def test_the_cache_holds_no_more_than_its_budget() -> None:
    """Entries of one-character lines, the worst case for counting by length: a budget of
    1 MB holds at most about 1 MB, measured with tracemalloc (before: 3.2 MB)."""
    archive = Archive(InMemoryStore(), thread_id="t1")
    for n in range(200):
        text = "\n".join(str((n + k) % 10) for k in range(1_000))
        archive.put_message(ToolMessage(text, tool_call_id=f"c{n}", id=f"m{n}"))
    budget = 1024 * 1024
    cache = EntryCache(max_bytes=budget)
    gc.collect()
    tracemalloc.start()
    try:
        search_archive(archive, "7", cache=cache)
        gc.collect()
        full = tracemalloc.get_traced_memory()[0]
        counted, kept = cache.bytes, len(cache)
        cache.clear()
        gc.collect()
        held = full - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0 < kept < 200
    assert held <= budget * 1.1, (held, counted)
    assert abs(held - counted) <= 0.1 * held, (held, counted)


# --- searches at once share each load -----------------------------------------------------


class SlowCountingBackend(DirectoryBackend):
    """Reads take 20 ms (a remote store), and are counted."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gets = 0
        self._lock = threading.Lock()

    def get(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        with self._lock:
            self.gets += 1
        time.sleep(0.02)
        return super().get(namespace, key)  # aget runs this in a worker thread


def test_searches_at_once_read_each_entry_once(tmp_path: Path) -> None:
    """Eight searches of a cold archive at once, in threads and in one event loop: each entry
    is read and decoded once (before: once per search), and every answer is whole."""
    backend = SlowCountingBackend(tmp_path / "archive")
    archive = Archive(backend, thread_id="t1")
    for n in range(10):
        archive.put_message(ToolMessage(f"run {n}\nstatus ok {n}", tool_call_id=f"c{n}"))

    cache = EntryCache()
    answers: list[str] = []
    workers = [
        threading.Thread(target=lambda: answers.append(search_archive(archive, "ok", cache=cache)))
        for _ in range(8)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert backend.gets == 10
    assert len(answers) == 8 and all(a.startswith("search_history: 10 matching") for a in answers)

    backend.gets, cache = 0, EntryCache()

    async def together() -> list[str]:
        return await asyncio.gather(
            *(asearch_archive(archive, "ok", cache=cache) for _ in range(8))
        )

    answers = asyncio.run(together())
    assert backend.gets == 10
    assert all(a.startswith("search_history: 10 matching") for a in answers)


def test_reading_a_cold_archive_is_bounded_and_the_next_search_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads of 20 ms each and 0.2 s to read (1 s by default): the first search answers in
    about that time with what it read, saying how many entries it left; the next ones read
    on from the cache until the answer is whole."""
    monkeypatch.setattr(search_module, "READ_SECONDS", 0.2)
    backend = SlowCountingBackend(tmp_path / "archive")
    archive = Archive(backend, thread_id="t1")
    for n in range(20):
        archive.put_message(ToolMessage(f"status ok {n}", tool_call_id=f"c{n}"))
    cache = EntryCache()
    began = time.monotonic()
    first = search_archive(archive, "ok", cache=cache)
    assert time.monotonic() - began < 2
    assert "PARTIAL" in first and "entries were not read in time" in first, first
    answers = [search_archive(archive, "ok", cache=cache) for _ in range(5)]
    assert (
        answers[-1].startswith("search_history: 20 matching lines") and "PARTIAL" not in answers[-1]
    )
    assert backend.gets == 20  # each entry read once


# --- what an answer shows ----------------------------------------------------------------

SEPARATORS = "\u2028\u2029\u0085\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"


def test_names_ids_and_lines_carry_no_separator_or_bidi_control() -> None:
    """A tool name, a call id, a message id and a line crafted with line/paragraph separators
    and bidi overrides: the answer shows each masked, so no line of it poses as another hit
    and none reads otherwise than it is."""
    archive = Archive(InMemoryStore(), thread_id="t1")
    crafted = f"x{SEPARATORS}y"
    archive.put_message(
        ToolMessage(
            "needle here \u202egnp.exe\u202c and \u2066there\u2069",
            tool_call_id=f"call-{crafted}",
            name=f"bash{crafted}",
            id=f"msg-{crafted}",
        )
    )
    archive.put_message(AIMessage(f"needle in a turn {crafted}", id=f"ai-{crafted}"))
    answer = search_archive(archive, "needle", cache=EntryCache())
    assert len(re.findall(r"^> \d+: .*needle", answer, re.MULTILINE)) == 2, answer
    assert not set(SEPARATORS) & set(answer), [hex(ord(c)) for c in set(SEPARATORS) & set(answer)]
    assert "tool output of bashx\ufffd" in answer
