"""Counting short text without letting go of the GIL: `TextTokens`.

tiktoken's `encode` releases the GIL while it runs: right for a long text, costly for a short
one. A thread that gives the GIL up must get it back, and while another thread runs Python that
takes up to the interpreter's switch interval (`sys.getswitchinterval()`), however short the
encode was. A build counts a dozen short texts or more (a new message, each tool call's name
and arguments, a placeholder), so beside a busy thread (another graph run in the same process,
a summary being prepared in a worker thread) each count would wait that long instead of taking
a few hundredths of it (measured: docs/benchmarks.md, latency and tokens).

So short ASCII text is counted here, holding the GIL: split with the encoding's pattern written
for ASCII (`ascii_pat_str`: for ASCII text a letter is A-Za-z and a digit 0-9 in every engine,
so Python's own `re` splits exactly as tiktoken does), each piece encoded by the encoding's
`encode_single_piece` (which does not release the GIL) and its count remembered. That is what
tiktoken's `encode_ordinary` does piece by piece, so the counts are the same. Other text, and
text over `SHORT_CHARS`, goes to `encode_ordinary`: a long encode pays the wait once, and lets
other threads run meanwhile. So does everything in a process with one thread, where nobody
holds the GIL while tiktoken runs and its own split (in Rust) is faster than `re`'s.

The counts remembered are an `LRUCache` bounded in measured bytes (`PIECES_BYTES`), read with
its lock-free `peek`: a dict read per piece, no lock and, when every piece of a text was met
before (most texts), no Python step per piece. A peek is not a use, so pieces leave in the order
they were met; one met again after it left is recounted once.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from langgraph_ctx._lru import LRUCache

SHORT_CHARS = 4_096
"""Texts up to this many characters are counted holding the GIL (when ASCII)."""

PIECES_BYTES = 8 << 20
"""How much the remembered piece counts may take (`measured`: about 100,000 pieces)."""


def ascii_splitter(
    pattern: str, *, possessive_re: bool = sys.version_info >= (3, 11)
) -> Callable[[str], list[str]]:
    """`findall` of `pattern` for ASCII text, holding the GIL.

    Python's `re` where it has possessive quantifiers (3.11 on), else the `regex` package told
    to keep the GIL (it lets go of it at each match unless told not to).
    """
    if possessive_re:
        return re.compile(pattern, re.ASCII).findall
    import regex

    return partial(regex.compile(pattern, regex.ASCII).findall, concurrent=False)


class TextTokens:
    """Tokens of plain text in one tiktoken encoding, special-token strings as ordinary text.

    Args:
        encoding: A `tiktoken.Encoding`.
        ascii_pattern: The encoding's split pattern for ASCII text (see the module).
    """

    def __init__(self, encoding: Any, ascii_pattern: str) -> None:
        self._encode: Callable[[str], list[int]] = encoding.encode_ordinary
        # Private to tiktoken (there since 0.4); without it every text goes to `encode_ordinary`.
        core = getattr(encoding, "_core_bpe", None)
        self._piece: Callable[[bytes], list[int]] | None = getattr(
            core, "encode_single_piece", None
        )
        self._split = ascii_splitter(ascii_pattern)
        self._counts: LRUCache[str, int] = LRUCache(PIECES_BYTES)

    @property
    def holds_gil(self) -> bool:
        """Whether short ASCII text is counted without releasing the GIL."""
        return self._piece is not None

    def __call__(self, text: str) -> int:
        """Tokens of `text`."""
        if (
            self._piece is None
            or len(text) > SHORT_CHARS
            or not text.isascii()
            or threading.active_count() == 1  # no thread to wait for: tiktoken's is faster
        ):
            return len(self._encode(text))
        pieces = self._split(text)
        try:  # most pieces were met before: summed without the lock or a Python step per piece
            return sum(map(self._counts.peek, pieces))  # type: ignore[arg-type]
        except TypeError:  # a piece not met (`peek` gave None): count the text's new pieces
            return self._count_new(pieces)

    def _count_new(self, pieces: list[str]) -> int:
        counts = self._counts
        peek = counts.peek  # not a use: pieces leave in the order they were met (cheap to recount)
        total = 0
        for piece in pieces:
            count = peek(piece)
            if count is None:
                count = len(self._piece(piece.encode("ascii")))  # type: ignore[misc]
                counts.put(piece, count)
            total += count
        return total
