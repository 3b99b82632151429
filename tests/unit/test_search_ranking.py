"""The ranking rule of archive search against a plain line-by-line oracle (hypothesis).

`ranking.find_hits` scans each entry's text whole for speed (one `str.find` walk per term, one
pattern search per matching line); these properties pin that it answers exactly as reading
every line alone would: the same lines, the same keys, the same order.
"""

from __future__ import annotations

import re
import threading

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_ctx.archive import ranking
from langgraph_ctx.archive.matching import SearchableEntry, parse_query, searchable_entry
from langgraph_ctx.archive.ranking import find_hits

WORDS = ["flush", "flush_batch", "Batch", "app/flush.py", "jobs.flush", "ERROR", "straße", "port"]
PIECES = [*WORDS, " ", " ", ".", "./", "../", "/", "</", "<", ">", "(", "-", "=", "\n", "x", "ss"]
NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_/-"


def _extra(line: str, term: str) -> int:
    """The least number of characters a name holding `term` adds to it, over its occurrences
    (one not looked at again inside the name an earlier one was found in)."""
    extras, seen_to = [], 0
    for found in re.finditer(f"(?={re.escape(term)})", line):
        at = found.start()
        if at < seen_to:
            continue
        begin, end = at, at + len(term)
        while begin and (
            line[begin - 1] in NAME_CHARS
            or (line[begin - 1] == "." and begin >= 2 and line[begin - 2] in NAME_CHARS)
        ):
            if line[begin - 2 : begin] == "./" and (
                begin == 2 or line[begin - 3] not in "./" + NAME_CHARS
            ):
                break
            if line[begin - 2 : begin] == "</":
                break
            begin -= 1
        while end < len(line) and (
            line[end] in NAME_CHARS
            or (line[end] == "." and end + 1 < len(line) and line[end + 1] in NAME_CHARS)
        ):
            end += 1
        extras.append(end - begin - len(term))
        seen_to = end
    return min(extras)


def _oracle(entries: list[SearchableEntry], text: str) -> list[tuple[object, ...]]:
    """The rule read line by line: `(key, ref, line, at)` of every hit, best first."""
    query = parse_query(text)
    rank: dict[str, int] = {}
    found = []
    for entry in entries:
        n = rank[entry.kind] = rank.get(entry.kind, -1) + 1
        group = {"message": 0, "messages": 1}[entry.kind]
        for index in range(entry.n_lines if entry.text else 0):
            line = entry.folded_line(index)
            if any(p not in line for p in query.phrases):
                continue
            matched = [w for w in query.words if w in line]
            if not matched and not query.phrases:
                continue
            told = 0 if entry.segment(index)[2].type == "tool" else 1
            terms = len(query.phrases) + len(matched)
            if query.whole is not None and query.whole in line:
                tier, term = 0, query.whole
            else:
                tier = 1 if len(matched) == len(query.words) else 2
                term = query.phrases[0] if query.phrases else matched[0]
            key = (tier, -terms, _extra(line, term), told, group, n, index)
            found.append((key, entry.ref, index, line.find(term)))
    return sorted(found)


def _entries(texts: list[str], dumps: list[list[str]]) -> list[SearchableEntry]:
    made: list[SearchableEntry] = []
    for n, text in enumerate(texts):
        message: BaseMessage = (
            ToolMessage(text, tool_call_id=f"c{n}", name="bash") if n % 3 else AIMessage(text)
        )
        made.append(searchable_entry(f"ref-{n}", "message", message))
    for n, parts in enumerate(dumps):
        messages = [
            ToolMessage(p, tool_call_id=f"d{n}-{i}", name="ls") for i, p in enumerate(parts)
        ]
        made.append(searchable_entry(f"dump-{n}", "messages", messages))
    return made


texts = st.lists(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), max_size=6)
dumps = st.lists(
    st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), min_size=1, max_size=3),
    max_size=2,
)
terms = st.lists(st.sampled_from([*WORDS, "flush batch", "ss", "x"]), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(texts, dumps, terms, st.booleans())
def test_words_and_phrases_rank_as_a_line_by_line_reading(
    lines: list[str], dumped: list[list[str]], chosen: list[str], quoted: bool
) -> None:
    entries = _entries(lines, dumped)
    text = " ".join(f'"{t}"' if quoted and n == 0 else t for n, t in enumerate(chosen))
    hits = [(h.key, h.entry.ref, h.line_index, h.at) for h in find_hits(entries, parse_query(text))]
    assert hits == _oracle(entries, text)


PATTERNS = [
    r"flush\s+batch",  # \s could cross a line break in the whole text
    r"^port",
    r"error$",
    r"x\W+x",
    r"(?-m)^x",  # inline flags: searched line by line
    r"\bflush\b",
    r"^$",
    r"(?:ss|x)+\.",
    r"x(?=\n)",
    r"\Aport",
]


@settings(max_examples=300, deadline=None)
@given(texts, dumps, st.sampled_from(PATTERNS))
def test_a_pattern_matches_the_lines_a_line_alone_search_matches(
    lines: list[str], dumped: list[list[str]], pattern: str
) -> None:
    entries = _entries(lines, dumped)
    hits = find_hits(entries, parse_query(pattern, regex=True), budget=10)
    compiled = regex.compile(pattern, regex.IGNORECASE)
    expected = {
        (entry.ref, index)
        for entry in entries
        for index in range(entry.n_lines if entry.text else 0)
        if compiled.search(entry.line(index))
    }
    assert {(h.entry.ref, h.line_index) for h in hits} == expected
    assert len(hits) == len(expected)  # each line once


def test_a_term_repeated_along_one_long_name_is_looked_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`a` against a line of 20,000 `a`s: each occurrence expanded to its whole name made the
    search quadratic (12 s at 8,000 characters); an occurrence inside a name already measured
    is skipped, so the name is walked once."""
    calls: list[int] = []
    span = ranking._name_span

    def counted(text: str, at: int, end: int) -> tuple[int, int]:
        calls.append(at)
        return span(text, at, end)

    monkeypatch.setattr(ranking, "_name_span", counted)
    line = "a" * 20_000 + "b"
    entries = _entries(["x", line], [])
    [hit] = find_hits(entries, parse_query("a"))
    assert hit.key[2] == 20_000 and hit.line_index == 0 and hit.entry.ref == "ref-1"
    assert len(calls) == 1


def test_a_pattern_search_does_not_run_out_of_time_beside_a_busy_thread() -> None:
    """A server runs other threads: the `regex` engine let go of the GIL at every search, and
    got it back only after the switch interval (5 ms) while another thread ran Python, so a
    plain pattern over 60 outputs ran out of the 80 ms budget ("use a simpler one")."""
    entries = _entries(
        [f"src/app_{n}.py:{n}: def flush_batch_{n}(jobs): return port\n" * 3 for n in range(60)],
        [],
    )
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1_000))

    busy = threading.Thread(target=spin)
    busy.start()
    try:
        hits = find_hits(entries, parse_query(r"flush_batch_\d+", regex=True))
    finally:
        stop.set()
        busy.join()
    assert len(hits) == 60 * 3
