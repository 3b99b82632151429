"""`python -m benchmarks search`: issue 52's goals for archive search, one table, one run.

Each goal is measured on the scan path (today's: list the thread's keys, read and decode every
entry not yet in the process `EntryCache`) and on the database index (`benchmarks.search_paths`
says how each is selected), each on its own database built in this run with the same outputs:
realistic tool outputs of about 2 kB (pytest runs, listings, grep results, tracebacks, build
logs), archived one `Archive.put_message` at a time into a `SqliteStore` file and, when
`LANGGRAPH_CTX_TEST_POSTGRES_URI` is set, a `PostgresStore` in a throwaway database (created
here, dropped afterwards). The two paths' writes are interleaved in chunks of 100 outputs, so
their archiving times compare under the same machine load.

Searches run in fresh processes (`benchmarks.search_worker`) that never saw the thread. A
search's time starts after the interpreter and every import and includes opening the store's
connection, as a worker started for the request pays it (the notes give that share), except
goal 4's, which is the search call alone against the search's own bound. Rows, by the goal's
number in issue 52:

1. a thread of 5,000 outputs: the first search, then later searches' p95 (6 queries x rounds);
2. 50,000 outputs on PostgreSQL: the first search (and how long building it took);
3. 16 threads searched at once from one worker (16 Python threads, a connection each), each
   search's time over the same search alone in a fresh worker; the worst ratio;
4. a query matching every line (`e`): its time against the search's bound
   (`READ_SECONDS + SEARCH_SECONDS`), and that the answer says it is PARTIAL;
5. a worker's resident memory (VmRSS) after searching 100 threads of 100 outputs;
6. archiving: time per output, index over scan, on disk with the stores' own durability,
   and on tmpfs (no fsync: the CPU's share);
7. space: bytes the index adds to the database per archived byte (entries as `put_message`
   encodes them).

After each build, every path's PostgreSQL database is vacuumed and analyzed alike
(`_settle`: autovacuum's work on a thread written over days), so searches are measured in the
steady state, not beside a bulk load's cleanup. Building goals 2, 3 and 5's threads is not
measured: PostgreSQL's then run with
`synchronous_commit` off and goal 5's SQLite file sits on tmpfs. `--quick`: 500 outputs, no
50,000-output thread, 16 threads of 50, 100 threads of 10, one worker per figure, every
database without fsync; well under a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage

from benchmarks._progress import progress
from benchmarks._table import print_table
from benchmarks.search_paths import (
    PATHS,
    bound_seconds,
    database_bytes,
    index_bytes,
    open_store,
    set_up,
)
from langgraph_ctx.archive import Archive, encode_message

POSTGRES_ENV = "LANGGRAPH_CTX_TEST_POSTGRES_URI"
"""The PostgreSQL server's URI; unset, the PostgreSQL rows are skipped (the notes say so)."""

ROOT = Path(__file__).resolve().parents[1]
"""The repository, where the workers run (`python -m benchmarks.search_worker`)."""

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ('"connection refused on port 61234"', {}),
    ("error", {}),
    ("AssertionError expected", {}),
    ("nonexistentword", {}),
    ("timeout", {"kind": "tool", "tool": "pytest"}),
    (r"port \d{5}\b", {"regex": True}),
]
"""A rare phrase, common words, a missing word, a filter, a regular expression."""

EVERY_LINE = "e"
"""A query every generated line matches."""

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


@dataclass(frozen=True)
class Sizes:
    """How much each goal archives and how often it is measured."""

    thread: int
    big: int | None
    together: int
    together_size: int
    many: int
    many_size: int
    repeats: int
    rounds: int


FULL = Sizes(5_000, 50_000, 16, 500, 100, 100, 3, 5)
"""The issue's sizes; three fresh workers per figure."""

QUICK = Sizes(500, None, 16, 50, 100, 10, 1, 2)
"""`--quick`: small threads, no 50,000-output thread, one worker per figure."""


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


def _chunks(seed: int, size: int, chunk: int = 100) -> Iterator[list[ToolMessage]]:
    rng = random.Random(seed)
    batch: list[ToolMessage] = []
    for n in range(size):
        text, name = _output(rng, n)
        batch.append(ToolMessage(text, tool_call_id=f"call-{n}", name=name, id=f"m-{n}"))
        if len(batch) == chunk:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class Database:
    """One backend's database for one path, and the parent's store that writes it."""

    backend: str
    path: str
    conn: str
    store: Any
    archive_backend: Any
    """The `StoreBackend` of `path` on `store`, built once as an application would."""


@dataclass
class Built:
    """What building some threads archived, and each path's time per output by chunk."""

    chars: int = 0
    archived: int = 0
    seconds: float = 0.0
    per_output: dict[str, list[float]] = field(default_factory=dict)


def _build(dbs: dict[str, Database], thread: str, seed: int, size: int, built: Built) -> None:
    """Archive `size` outputs into `thread` of every path's database, interleaved by chunk."""
    archives = {path: Archive(db.archive_backend, thread_id=thread) for path, db in dbs.items()}
    started = time.perf_counter()
    for k, batch in enumerate(_chunks(seed, size)):
        built.chars += sum(len(str(m.content)) for m in batch)
        built.archived += sum(len(encode_message(m)) for m in batch)
        order = list(archives) if k % 2 == 0 else list(reversed(archives))
        for path in order:
            began = time.perf_counter()
            for message in batch:
                archives[path].put_message(message)
            took = time.perf_counter() - began
            built.per_output.setdefault(path, []).append(took / len(batch))
    built.seconds += time.perf_counter() - started


@contextlib.contextmanager
def _throwaway(base: str) -> Iterator[str]:
    """A new PostgreSQL database's conninfo; the database is dropped afterwards."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"lgctx_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(base, dbname=name)
    finally:
        with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


@contextlib.contextmanager
def _databases(
    root: Path, backends: list[str], base: str | None
) -> Iterator[dict[str, dict[str, Database]]]:
    """backend -> path -> its database, set up as that path's deployment would be."""
    with contextlib.ExitStack() as stack:
        found: dict[str, dict[str, Database]] = {}
        for backend in backends:
            for path in PATHS:
                if backend == "sqlite":
                    root.mkdir(exist_ok=True)
                    conn = str(root / f"{path}.db")
                else:
                    conn = stack.enter_context(_throwaway(base or ""))
                store = stack.enter_context(open_store(backend, conn, path))
                built = set_up(store, path)
                found.setdefault(backend, {})[path] = Database(backend, path, conn, store, built)
        yield found


@contextlib.contextmanager
def _without_fsync(dbs: dict[str, Database]) -> Iterator[None]:
    """PostgreSQL writes that do not wait for the WAL to reach the disk, for building only."""
    postgres = [db.store for db in dbs.values() if db.backend == "postgres"]
    for store in postgres:
        store.conn.execute("SET synchronous_commit = off")
    try:
        yield
    finally:
        for store in postgres:
            store.conn.execute("RESET synchronous_commit")


def _settle(dbs: dict[str, Database]) -> None:
    """What autovacuum does to tables a thread was written into over days, done now, on every
    path's PostgreSQL database alike: `VACUUM (ANALYZE)`, so a search is measured on the
    steady state (visibility and statistics known, the GIN index's pending entries merged),
    not on the one-time cleanup of a bulk load running beside it on the same two cores."""
    for db in dbs.values():
        if db.backend == "postgres":
            db.store.conn.execute("VACUUM (ANALYZE)")


def _memory_dir() -> str | None:
    """A RAM-backed folder (tmpfs `/dev/shm`) when there is one: SQLite without fsync."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _worker(db: Database, jobs: list[dict[str, Any]], **options: bool) -> dict[str, Any]:
    """Run `jobs` in a fresh `benchmarks.search_worker` process; its JSON report."""
    spec = {"backend": db.backend, "conn": db.conn, "path": db.path, "jobs": jobs, **options}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.search_worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=1_800,
        check=False,
    )
    if done.returncode != 0:
        msg = f"search worker failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        raise RuntimeError(msg)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"


@dataclass
class Row:
    """One goal's row: its measure on each path, and whether the index (else scan) meets it."""

    number: int
    goal: str
    target: str
    cells: dict[str, str]
    versus: str = ""
    ok: bool | None = None


@dataclass
class Fresh:
    """Fresh workers' first searches (connection included) and later searches."""

    first: list[float] = field(default_factory=list)
    opened: list[float] = field(default_factory=list)
    later: list[float] = field(default_factory=list)
    later_words: list[float] = field(default_factory=list)
    """Later searches but the regular expression (the index serves it through its literal)."""
    by_query: dict[str, list[float]] = field(default_factory=dict)
    """Later searches by query."""
    first_partial: list[bool] = field(default_factory=list)


def _fresh(db: Database, thread: str, queries: list[Any], repeats: int) -> Fresh:
    found = Fresh()
    for _ in range(repeats):
        job = _worker(db, [{"thread": thread, "queries": queries}])["jobs"][0]
        found.opened.append(job["open"])
        found.first.append(job["open"] + job["times"][0])
        found.later.extend(job["times"][1:])
        for (query, options), seconds in zip(queries[1:], job["times"][1:], strict=True):
            found.by_query.setdefault(query, []).append(seconds)
            if not options.get("regex"):
                found.later_words.append(seconds)
        found.first_partial.append(job["partial"][0])
    return found


def _speedup(values: dict[str, float]) -> str:
    if "index" not in values or "scan" not in values or min(values.values()) <= 0:
        return ""
    ratio = values["scan"] / values["index"]
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


def _judge(values: dict[str, float], limit: float) -> bool:
    judged = "index" if "index" in values else "scan"
    return values[judged] <= limit


def _row_latency(
    number: int,
    dbs: dict[str, Database],
    thread: str,
    label: str,
    sizes: Sizes,
    limit: float,
    notes: list[str],
) -> list[Row]:
    queries = [QUERIES[0], *[q for _ in range(sizes.rounds) for q in QUERIES]]
    runs = {path: _fresh(db, thread, queries, sizes.repeats) for path, db in dbs.items()}
    first = {path: statistics.median(run.first) for path, run in runs.items()}
    cells = {
        path: _ms(first[path]) + (" PARTIAL" if any(run.first_partial) else "")
        for path, run in runs.items()
    }
    first_row = Row(number, f"first search, {label}", f"<= {_ms(limit)}", cells, _speedup(first))
    first_row.ok = _judge(first, limit)
    rows = [first_row]
    opened = ", ".join(f"{p} {_ms(statistics.median(r.opened))}" for p, r in runs.items())
    notes.append(f"{label}: opening the store's connection, of the first search: {opened}")
    if sizes.rounds and all(run.later for run in runs.values()):
        p95 = {path: _p95(run.later) for path, run in runs.items()}
        later = Row(
            1,
            f"later searches p95, {label}",
            "<= 100 ms",
            {path: _ms(value) for path, value in p95.items()},
            _speedup(p95),
            _judge(p95, 0.1),
        )
        rows.append(later)
        words = ", ".join(f"{path} {_ms(_p95(run.later_words))}" for path, run in runs.items())
        notes.append(
            f"{label}: later searches p95 without the regular expression (which the index "
            f"serves through its literal `port `): {words}"
        )
        for path, run in runs.items():
            medians = ", ".join(
                f"{query} {_ms(statistics.median(times))}" for query, times in run.by_query.items()
            )
            notes.append(f"{label}, {path}: later searches' median by query: {medians}")
    return rows


def _row_every_line(dbs: dict[str, Database], thread: str, label: str, repeats: int) -> Row:
    times: dict[str, float] = {}
    cells: dict[str, str] = {}
    ok = True
    for path, db in dbs.items():
        run = _fresh(db, thread, [(EVERY_LINE, {})], repeats)
        times[path] = statistics.median(f - o for f, o in zip(run.first, run.opened, strict=True))
        partial = all(run.first_partial)
        cells[path] = f"{_ms(times[path])} {'PARTIAL' if partial else 'NOT PARTIAL'}"
        judged = "index" if "index" in dbs else "scan"
        if path == judged:
            ok = partial and times[path] <= bound_seconds(path)
    bounds = "/".join(dict.fromkeys(_ms(bound_seconds(path)) for path in dbs))
    return Row(
        4,
        f"query {EVERY_LINE!r} (every line), first, no connect, {label}",
        f"<= {bounds}, PARTIAL",
        cells,
        "",
        ok,
    )


def _row_together(dbs: dict[str, Database], sizes: Sizes) -> Row:
    ratio: dict[str, float] = {}
    cells: dict[str, str] = {}
    for path, db in dbs.items():
        jobs = [
            {"thread": f"together-{n}", "queries": [QUERIES[n % len(QUERIES)]]}
            for n in range(sizes.together)
        ]
        worst: list[float] = []
        slowest: list[float] = []
        for _ in range(sizes.repeats):
            alone = _worker(db, jobs)["jobs"]
            together = _worker(db, jobs, concurrent=True)["jobs"]
            each = [
                (t["open"] + t["times"][0]) / (a["open"] + a["times"][0])
                for a, t in zip(alone, together, strict=True)
            ]
            worst.append(max(each))
            slowest.append(max(t["open"] + t["times"][0] for t in together))
        ratio[path] = statistics.median(worst)
        cells[path] = f"{ratio[path]:.1f}x (slowest {_ms(statistics.median(slowest))})"
    return Row(
        3,
        f"{sizes.together} searches at once, {sizes.together} threads x "
        f"{sizes.together_size:,} outputs, postgres: worst time / alone",
        "<= 2.0x",
        cells,
        "",
        _judge(ratio, 2.0),
    )


def _row_memory(dbs: dict[str, Database], sizes: Sizes, label: str) -> Row:
    grown: dict[str, float] = {}
    cells: dict[str, str] = {}
    for path, db in dbs.items():
        jobs = [{"thread": f"many-{n}", "queries": QUERIES[:2]} for n in range(sizes.many)]
        report = _worker(db, jobs, open_per_job=False)
        before, after = report["before"]["rss"] / 1024, report["after"]["rss"] / 1024
        grown[path] = after - before
        cells[path] = f"{after:.0f} MB (+{grown[path]:.0f})"
    return Row(
        5,
        f"worker RSS after searching {sizes.many} threads x {sizes.many_size} outputs, {label}",
        "growth <= 64 MB",
        cells,
        "",
        _judge(grown, 64),
    )


def _row_archiving(built: Built, label: str) -> Row:
    per = {path: statistics.median(times) for path, times in built.per_output.items()}
    cells = {path: _ms(value) for path, value in per.items()}
    if "index" in per:
        extra = per["index"] / per["scan"] - 1
        return Row(
            6, f"archiving, per output, {label}", "<= +20%", cells, f"{extra:+.0%}", extra <= 0.2
        )
    return Row(6, f"archiving, per output, {label}", "<= +20%", cells, "no index to compare", None)


def _row_space(dbs: dict[str, Database], built: Built, label: str) -> Row:
    if "index" not in dbs:
        return Row(7, f"index bytes per archived byte, {label}", "reported", {}, "no index", None)
    ours = index_bytes(dbs["index"], dbs["scan"])
    plain = database_bytes(dbs["scan"].backend, dbs["scan"].store)
    cells = {
        "scan": f"0 (database {plain / 1e6:.1f} MB)",
        "index": f"{ours / built.archived:.2f} (+{ours / 1e6:.1f} MB)",
    }
    versus = f"database {(plain + ours) / plain:.1f}x"
    return Row(7, f"index bytes per archived byte, {label}", "reported", cells, versus, None)


def run(args: argparse.Namespace) -> None:
    """Print issue 52's goals as one table (`--quick`: small sizes, one worker each)."""
    sizes = QUICK if args.quick else FULL
    base = os.environ.get(POSTGRES_ENV)
    backends = ["sqlite", "postgres"] if base else ["sqlite"]
    rows: list[Row] = []
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        memory = stack.enter_context(tempfile.TemporaryDirectory(dir=_memory_dir()))
        disk = memory if args.quick else stack.enter_context(tempfile.TemporaryDirectory())
        databases = stack.enter_context(_databases(Path(disk), backends, base))
        for backend, dbs in databases.items():
            label = f"{sizes.thread:,} outputs, {backend}"
            built = Built()
            progress(f"search: archiving {sizes.thread:,} outputs into {backend} ({'/'.join(dbs)})")
            with _without_fsync(dbs) if args.quick else contextlib.nullcontext():
                _build(dbs, "main", 40, sizes.thread, built)
            _settle(dbs)
            notes.append(
                f"{backend}: {built.chars / 1e6:.1f} MB of text in {sizes.thread:,} outputs "
                f"({built.archived / 1e6:.1f} MB archived), built in {built.seconds:.0f} s"
            )
            rows.append(_row_archiving(built, backend + (", no fsync" if args.quick else "")))
            rows.append(_row_space(dbs, built, backend))
            progress(f"search: fresh workers on {backend}")
            rows += _row_latency(1, dbs, "main", label, sizes, 0.15, notes)
            rows.append(_row_every_line(dbs, "main", label, sizes.repeats))
        if "postgres" in databases:
            with _without_fsync(databases["postgres"]):
                rows += _postgres_rows(databases["postgres"], sizes, notes)
        else:
            notes.append(f"PostgreSQL rows skipped: set {POSTGRES_ENV} to a server's URI.")
        in_memory = stack.enter_context(_databases(Path(memory) / "many", ["sqlite"], None))
        progress(f"search: {sizes.many} threads into sqlite in memory for the memory row")
        many = Built()
        for n in range(sizes.many):
            _build(in_memory["sqlite"], f"many-{n}", 1_000 + n, sizes.many_size, many)
        rows.append(_row_archiving(many, "sqlite on tmpfs (no fsync: the CPU's share)"))
        rows.append(_row_memory(in_memory["sqlite"], sizes, "sqlite"))
    if args.quick:
        notes.append("--quick: SQLite on tmpfs and PostgreSQL without fsync throughout.")
    _print(rows, notes, sizes)


def _postgres_rows(dbs: dict[str, Database], sizes: Sizes, notes: list[str]) -> list[Row]:
    rows: list[Row] = []
    if sizes.big is None:
        notes.append("50,000 outputs: skipped (--quick)")
    else:
        big = Built()
        progress(f"search: archiving {sizes.big:,} outputs into postgres")
        _build(dbs, "big", 50, sizes.big, big)
        _settle(dbs)
        notes.append(
            f"postgres, {sizes.big:,} outputs: {big.chars / 1e6:.0f} MB of text, "
            f"built in {big.seconds:.0f} s ({' and '.join(dbs)} interleaved, one put_message each, "
            "synchronous_commit off: no batched write in the public API)"
        )
        label = f"{sizes.big:,} outputs, postgres"
        once = Sizes(**{**vars(sizes), "rounds": 0})
        rows += _row_latency(2, dbs, "big", label, once, 0.3, notes)
    progress(f"search: {sizes.together} threads at once on postgres")
    together = Built()
    for n in range(sizes.together):
        _build(dbs, f"together-{n}", 100 + n, sizes.together_size, together)
    _settle(dbs)
    rows.append(_row_together(dbs, sizes))
    return rows


def _print(rows: list[Row], notes: list[str], sizes: Sizes) -> None:
    def result(row: Row) -> str:
        return "reported" if row.ok is None else "OK" if row.ok else "MISSED"

    table = [
        [
            f"{row.number} {row.goal}",
            row.target,
            *(row.cells.get(path, "-") for path in ("scan", "index")),
            row.versus,
            result(row),
        ]
        for row in sorted(rows, key=lambda row: row.number)
    ]
    judged = "the index" if "index" in PATHS else "the scan path (no index in this tree)"
    print_table(
        "archive search, issue 52's goals: today's scan path and the database index",
        ["goal", "target", "scan", "index", "index vs scan", "result"],
        table,
        notes=[
            f"result: {judged} against the target. Fresh worker processes; times include "
            "opening the store's connection, not the interpreter or imports.",
            f"{sizes.repeats} fresh worker(s) per figure (median; p95 over all their later "
            f"searches: {len(QUERIES)} queries x {sizes.rounds} rounds each).",
            *notes,
        ],
    )
