"""Counting short ASCII text and hashing hold the GIL: tiktoken's counts, hashlib's digests."""

from __future__ import annotations

import hashlib
import string
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from langgraph_ctx import _ids
from langgraph_ctx.messages.content import text_of
from langgraph_ctx.tokens import TiktokenCounter
from langgraph_ctx.tokens._encodings import _SPECS, SUPPORTED_ENCODINGS, get_encoding, text_tokens
from langgraph_ctx.tokens._text_tokens import SHORT_CHARS, TextTokens, ascii_splitter

# What makes the split differ between patterns: cases, apostrophes, digit runs, every ASCII
# whitespace (also \x0b \x0c, and \x1c-\x1f that `str.isspace` counts and Unicode does not),
# punctuation runs before newlines and slashes, control characters.
_ASCII = string.printable + "\x00\x01\x07\x1b\x1c\x1d\x1e\x1f\x7f"
_CHUNKS = st.sampled_from(
    ["'s", "'S", "'ll", "'VE", "don't", " \n", "\r\n", "\n\n", "   ", "\t", "\x0b", "\x0c",
     "//", "../", "12345", "x1", "CamelCase", "ALLCAPS", "lower", " ?!", "\x1c", " \x1f "]
)  # fmt: skip
ascii_texts = st.one_of(
    st.text(st.sampled_from(_ASCII), max_size=200),
    st.lists(st.one_of(_CHUNKS, st.text(st.sampled_from(_ASCII), max_size=6)), max_size=40).map(
        "".join
    ),
)


_SPLITTERS = {
    (name, possessive_re): ascii_splitter(
        _SPECS[name]["ascii_pat_str"], possessive_re=possessive_re
    )
    for name in SUPPORTED_ENCODINGS
    for possessive_re in (True, False)  # False: the `regex` package, as on Python 3.10
}


@given(text=ascii_texts)
def test_the_ascii_split_is_tiktokens_split(text: str) -> None:
    for (name, _), split in _SPLITTERS.items():
        assert split(text) == regex.findall(_SPECS[name]["pat_str"], text), name


@given(text=ascii_texts)
def test_short_ascii_text_counts_as_tiktoken_counts(text: str) -> None:
    for name in SUPPORTED_ENCODINGS:
        count = text_tokens(name)
        assert count.holds_gil
        with _another_thread():
            assert count(text) == len(get_encoding(name).encode_ordinary(text)), name


def test_every_short_text_of_the_recorded_runs_counts_as_tiktoken_counts(
    trajectories: dict[str, list[BaseMessage]], another_thread: None
) -> None:
    lines = {
        line
        for messages in trajectories.values()
        for message in messages
        for text in [text_of(message)]
        for line in [text, *text.splitlines()]
        if len(line) <= SHORT_CHARS and line.isascii()
    }
    assert len(lines) > 10_000
    for name in SUPPORTED_ENCODINGS:
        count, encoding = text_tokens(name), get_encoding(name)
        wrong = [line for line in lines if count(line) != len(encoding.encode_ordinary(line))]
        assert wrong == [], (name, wrong[:3])


class _Releasing:
    """An encoding whose own encode (the one that lets go of the GIL) is recorded."""

    def __init__(self, name: str) -> None:
        self.real = get_encoding(name)
        self._core_bpe = self.real._core_bpe
        self.encoded: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.encoded.append(text)
        return list(self.real.encode_ordinary(text))


@contextmanager
def _another_thread() -> Iterator[None]:
    """A second thread in the process (waiting), as a server or a preparation has."""
    done = threading.Event()
    waiting = threading.Thread(target=done.wait)
    waiting.start()
    try:
        yield
    finally:
        done.set()
        waiting.join()


@pytest.fixture
def another_thread() -> Iterator[None]:
    """`_another_thread` for a whole test."""
    with _another_thread():
        yield


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
def test_beside_another_thread_only_long_or_non_ascii_text_goes_to_tiktokens_encode(
    name: str, another_thread: None
) -> None:
    encoding = _Releasing(name)
    count = TextTokens(encoding, _SPECS[name]["ascii_pat_str"])
    assert count.holds_gil  # the installed tiktoken has the piece encoder
    short, long_text = "def f(x):\n    return x + 1\n" * 20, "word " * 1_000
    accented = "café au lait"
    for text in (short, long_text, accented):
        assert count(text) == len(encoding.real.encode_ordinary(text))
    assert encoding.encoded == [long_text, accented]


def test_in_a_process_of_one_thread_every_text_goes_to_tiktokens_encode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    encoding = _Releasing("o200k_base")
    count = TextTokens(encoding, _SPECS["o200k_base"]["ascii_pat_str"])
    assert count("def f(x):\n    return x\n") == len(
        encoding.real.encode_ordinary("def f(x):\n    return x\n")
    )
    assert encoding.encoded == ["def f(x):\n    return x\n"]


def test_the_counter_counts_messages_the_same_either_way(another_thread: None) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    messages = [
        HumanMessage("Fix `parse_config` in src/config.py; it's failing on nested sections."),
        AIMessage("", tool_calls=[{"id": "c1", "name": "grep", "args": {"q": "parse_config"}}]),
        ToolMessage("src/config.py:12: def parse_config(path):\n" * 40, tool_call_id="c1"),
        HumanMessage("Ünïcödé and emoji 🚀 go to tiktoken's own encode"),
    ]
    counter = TiktokenCounter("gpt-4o", cache_size=0)
    native = TiktokenCounter("gpt-4o", cache_size=0)
    encoding = get_encoding(native.encoding_name)
    native._text = TextTokens(encoding, _SPECS[native.encoding_name]["ascii_pat_str"])
    native._text._piece = None  # every text through tiktoken's encode
    assert counter(messages) == native(messages)


@given(data=st.binary(max_size=9_000) | st.integers(0, 20_000).map(lambda n: b"x" * n))
def test_hashes_are_hashlibs_fed_in_pieces_hashlib_hashes_holding_the_gil(data: bytes) -> None:
    # hashlib releases the GIL for a buffer of 2,048 bytes or more (HASHLIB_GIL_MINSIZE).
    assert _ids._GIL_HELD_BYTES < 2_048
    assert _ids.sha256_of(data).hexdigest() == hashlib.sha256(data).hexdigest()
