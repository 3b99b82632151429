"""`python -m benchmarks search`: latency of `search_archive` on threads of 500 and 5,000 outputs.

Each thread holds archived tool outputs of about 2 kB (pytest runs, directory listings, grep
results, tracebacks, build logs), written through `Archive.put_message` to a `DirectoryBackend`,
a `SqliteStore` file and, when `LANGGRAPH_CTX_TEST_POSTGRES_URI` is set, a `PostgresStore` in a
throwaway database (dropped afterwards). For each it prints the first search (nothing decoded
yet: every entry is read) and p50/p95/max over repeated searches of a mix of queries (a rare
phrase, common words, a missing word, a filter, a regular expression) with the process cache
warm, which is what an agent calling the tool again sees.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage

from benchmarks._table import print_table
from langgraph_ctx.archive import Archive, DirectoryBackend, EntryCache, search_archive

POSTGRES_ENV = "LANGGRAPH_CTX_TEST_POSTGRES_URI"

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ('"connection refused on port 61234"', {}),
    ("error", {}),
    ("AssertionError expected", {}),
    ("nonexistentword", {}),
    ("timeout", {"kind": "tool", "tool": "pytest"}),
    (r"port \d{5}\b", {"regex": True}),
]

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "config",
    "server",
    "client",
    "request",
    "handler",
    "cache",
    "index",
]


def _output(rng: random.Random, n: int) -> tuple[str, str]:
    """A realistic ~2 kB tool output and its tool name."""
    kind = rng.choice(["pytest", "ls", "grep", "build", "python"])
    lines: list[str] = []
    while sum(len(line) + 1 for line in lines) < 2_000:
        word, num = rng.choice(_WORDS), rng.randrange(100_000)
        if kind == "pytest":
            status = rng.choice(["PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"])
            lines.append(f"tests/test_{word}.py::test_{word}_{num % 97} {status} [{num % 100}%]")
        elif kind == "ls":
            lines.append(f"-rw-r--r-- 1 user staff {num:>7} Jan {num % 28 + 1:>2} {word}_{num}.py")
        elif kind == "grep":
            lines.append(f"src/{word}/mod_{num % 50}.py:{num % 900}: self.{word} = {num}")
        elif kind == "build":
            lines.append(f"[{num % 100:>3}%] Building CXX object {word}/{word}_{num % 300}.cc.o")
        else:
            lines.append(f'  File "/app/{word}.py", line {num % 700}, in {word}_handler')
            if num % 5 == 0:
                lines.append(f"AssertionError: expected {num} got {num + 1} (timeout {num % 30}s)")
    if n % 997 == 3:  # a few needles for the rare phrase
        lines.insert(len(lines) // 2, "ERROR: connection refused on port 61234")
    if n % 13 == 0:
        lines.append(f"error: request to port {10_000 + n} timed out")
    return "\n".join(lines), kind


def _fill(archive: Archive, size: int) -> int:
    rng = random.Random(40)
    total = 0
    for n in range(size):
        text, name = _output(rng, n)
        total += len(text)
        archive.put_message(ToolMessage(text, tool_call_id=f"call-{n}", name=name, id=f"m-{n}"))
    return total


@contextlib.contextmanager
def _backends(root: Path) -> Iterator[list[tuple[str, Any]]]:
    from langgraph.store.sqlite import SqliteStore

    with contextlib.ExitStack() as stack:
        sqlite = stack.enter_context(SqliteStore.from_conn_string(str(root / "store.db")))
        sqlite.setup()
        found: list[tuple[str, Any]] = [
            ("directory", DirectoryBackend(root / "archive")),
            ("sqlite", sqlite),
        ]
        base = os.environ.get(POSTGRES_ENV)
        if base:
            found.append(("postgres", stack.enter_context(_postgres(base))))
        yield found


@contextlib.contextmanager
def _postgres(base: str) -> Iterator[Any]:
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"lgctx_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with PostgresStore.from_conn_string(make_conninfo(base, dbname=name)) as store:
            store.setup()
            yield store
    finally:
        with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def run(args: argparse.Namespace) -> None:
    """Print search latency per backend and thread size (`--quick`: fewer repetitions)."""
    sizes = [500, 5_000]
    rounds = 3 if args.quick else 10
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp, _backends(Path(tmp)) as backends:
        for name, backend in backends:
            for size in sizes:
                archive = Archive(backend, thread_id=f"bench-{size}")
                started = time.perf_counter()
                chars = _fill(archive, size)
                filled = time.perf_counter() - started
                cache = EntryCache(max_bytes=256 * 1024 * 1024)
                started = time.perf_counter()
                search_archive(archive, QUERIES[0][0], cache=cache, **QUERIES[0][1])
                cold = time.perf_counter() - started
                times = []
                for _ in range(rounds):
                    for query, options in QUERIES:
                        started = time.perf_counter()
                        search_archive(archive, query, cache=cache, **options)
                        times.append(time.perf_counter() - started)
                times.sort()
                p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
                rows.append(
                    [
                        name,
                        size,
                        f"{chars / 1e6:.1f}",
                        f"{filled:.1f}",
                        _ms(cold),
                        _ms(statistics.median(times)),
                        _ms(p95),
                        _ms(times[-1]),
                    ]
                )
    print_table(
        "hostile queries: each answers with one line (a 100,000-character line in the archive)",
        ["query", "answer", "ms (max of 5)"],
        _hostile(),
        notes=["Goal: a one-line tool error or a bounded answer within 100 ms, never a hang."],
    )
    print_table(
        "search_archive latency (warm: the process cache holds every decoded entry)",
        ["backend", "outputs", "MB", "fill s", "first ms", "p50 ms", "p95 ms", "max ms"],
        rows,
        notes=[
            f"{len(QUERIES)} queries x {rounds} rounds per row; 'first' reads every entry once.",
            "Goal: p95 < 100 ms at 5,000 on directory and SQLite, < 300 ms on Postgres.",
        ],
    )


def _hostile() -> list[list[object]]:
    """Each hostile query's answer (cut) and its slowest time of 5, on an in-process archive."""
    from langgraph.store.memory import InMemoryStore

    archive = Archive(InMemoryStore(), thread_id="hostile")
    _fill(archive, 200)
    line = "a" * 100_000 + "b"
    archive.put_message(ToolMessage(line, tool_call_id="call-long", name="python", id="long"))
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("(a+)+$ against the long line", "(a+)+$", {"regex": True}),
        ("the word a against the long line", "a", {}),
        ("a bad pattern", "(unclosed", {"regex": True}),
        ("an empty query", "", {}),
        ("a 1 MB query", "x" * 1_000_000, {}),
    ]
    cache = EntryCache()
    search_archive(archive, "warm", cache=cache)
    rows: list[list[object]] = []
    for name, query, options in cases:
        times, answer = [], ""
        for _ in range(5):
            started = time.perf_counter()
            answer = search_archive(archive, query, cache=cache, **options)
            times.append(time.perf_counter() - started)
        rows.append([name, answer[:70], _ms(max(times))])
    return rows
