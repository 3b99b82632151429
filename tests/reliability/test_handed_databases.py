"""Checkpoint databases and long inputs handed to the commands (issue 50, breaks 7, 8, 11, 4).

Each case failed against c9d7445 before its fix: `inspect`, `view` and `frontier` created a
`-shm` file beside a WAL database that came without one; a `checkpoints` table of another
program and a damaged page ended in tracebacks; the memory guard took a transcript to need 8
times its bytes (one long word takes 47) and did not bound databases at all, so a file the
guard let in raised `MemoryError` under a memory limit; `view --db postgresql://...` showed
every archived entry as unreadable (`PostgresStore.get` writes). Real files, real graphs, the
commands run through `langgraph_ctx_tools.cli.main` (in a subprocess where memory is limited).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_ctx import ContextMemory
from langgraph_ctx_tools.cli import main
from tests.fakes import ScriptedChatModel
from tests.reliability.test_handed_files import (
    folder_state,
    one_error_line,
    record_agent_thread,
    typed_uri,
)

ROOT = Path(__file__).resolve().parents[2]


def reads(db: Path | str, thread: str, out: Path) -> list[list[str]]:
    """The three commands that read a database they are handed, on one thread."""
    return [
        ["inspect", "--db", str(db), "--thread", thread],
        ["view", "--db", str(db), "--thread", thread, "--html", str(out)],
        ["frontier", "--db", str(db), "--thread", thread, "--window", "4000", "--no-neighbours",
         "--no-alternatives"],
    ]  # fmt: skip


# --- a WAL database without its -shm -----------------------------------------------------------


def test_a_wal_without_shm_is_read_whole_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The -wal's committed pages are read (thread t2 lives only there); no -shm appears."""
    source = tmp_path / "source.sqlite"
    record_agent_thread(source, "t1")
    holder = sqlite3.connect(source)  # keeps the -wal from being folded back at close
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("PRAGMA wal_autocheckpoint=0")
    record_agent_thread(source, "t2")
    handed = tmp_path / "handed"
    handed.mkdir()
    shutil.copyfile(source, handed / "db.sqlite")  # the -shm is not handed over
    shutil.copyfile(tmp_path / "source.sqlite-wal", handed / "db.sqlite-wal")
    holder.close()
    db = handed / "db.sqlite"
    stale = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    assert ("t2",) not in stale.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
    stale.close()  # so t2 is in the -wal only: reading without it would not find it
    before = folder_state(handed)
    for argv in reads(db, "t2", tmp_path / "page.html"):
        assert main(argv) == 0, argv
        assert sorted(os.listdir(handed)) == ["db.sqlite", "db.sqlite-wal"], argv
        assert folder_state(handed) == before, argv
    assert "t2" in capsys.readouterr().out


# --- a file that is not what its tables say ----------------------------------------------------


def test_a_checkpoints_table_of_another_program_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE checkpoints (thread_id TEXT, note TEXT)")
        conn.execute("INSERT INTO checkpoints VALUES ('t1', 'an order')")
    before = folder_state(tmp_path)
    for argv in reads(db, "t1", tmp_path / "page.html"):
        assert main(argv) == 2, argv
        assert "checkpoints table is another program's (no checkpoint," in one_error_line(capsys)
    assert folder_state(tmp_path) == before


def test_a_damaged_page_is_one_line_whichever_page_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.sqlite"
    record_agent_thread(good)
    data = good.read_bytes()
    page = int.from_bytes(data[16:18], "big")
    for number in range(1, len(data) // page):  # every page but the header's
        damaged = bytearray(data)
        start = number * page + 100  # past the page header: cells and their values
        damaged[start : (number + 1) * page - 8] = bytes(range(256)) * (page // 256 - 1)
        db = tmp_path / "damaged.sqlite"
        db.write_bytes(bytes(damaged))
        for argv in reads(db, "t1", tmp_path / "page.html"):
            code = main(argv)
            out = capsys.readouterr()
            assert "Traceback" not in out.err, (number, argv)
            if code != 0:  # a page nothing reads can stay unnoticed; one that is read cannot
                assert code == 2, (number, argv, out.err)
                assert len(out.err.strip().splitlines()) == 1, (number, argv, out.err)
                assert "cannot be read (database disk image is malformed)" in out.err


# --- memory: the guard measured ----------------------------------------------------------------

_UNDER_A_LIMIT = textwrap.dedent(
    """
    import json, resource, sys
    from langgraph_ctx_tools.cli import inputs, main
    free, runs = int(sys.argv[1]), json.loads(sys.argv[2])
    assert main(runs[0]) == 0  # imports, the token counter's tables: before the limit
    with open("/proc/self/status") as fh:
        size = next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmSize:"))
    inputs._available_bytes = lambda: free  # the guard sees what the limit leaves
    resource.setrlimit(resource.RLIMIT_AS, (size + free + (32 << 20), resource.RLIM_INFINITY))
    print(json.dumps([main(argv) for argv in runs[1:]]))
    """
)
FREE = 96 << 20
"""The memory a reader is left under the limit: 1.6 MB of one word is under the cap it sets
(1.6 x 56 < 96), 4 MB over it (before: let in, and `MemoryError`)."""


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="the memory limit is set from /proc (Linux)"
)


def under_a_limit(runs: list[list[str]]) -> list[int]:
    """The exit codes of `runs[1:]` in a process left `FREE` bytes (`runs[0]` warms up)."""
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_A_LIMIT, str(FREE), json.dumps(runs)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    codes: list[int] = json.loads(done.stdout.strip().splitlines()[-1])
    return codes


def one_word_transcript(path: Path, megabytes: float) -> Path:
    """A transcript whose tool output is one word of `megabytes` (the costliest to count)."""
    call = {"name": "dump", "args": {}, "id": "c1"}
    messages = [
        HumanMessage("dump it", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("x" * int(megabytes * (1 << 20)), tool_call_id="c1", id="t1"),
        AIMessage("done", id="a2"),
    ]
    path.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    return path


def one_word_thread(db: Path, megabytes: float, thread: str = "t1") -> Path:
    """A real agent's thread on a SQLite checkpointer whose tool returned one long word."""

    @tool
    def dump() -> str:
        """One long word."""
        return "x" * int(megabytes * (1 << 20))

    call = {"name": "dump", "args": {}, "id": "c1"}
    model = ScriptedChatModel(messages=[AIMessage("", tool_calls=[call]), AIMessage("done")])
    with SqliteSaver.from_conn_string(str(db)) as saver:
        agent = create_agent(model, [dump], checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        agent.invoke({"messages": [HumanMessage("dump it", id="h1")]}, config)  # type: ignore[arg-type]
    return db


@needs_proc
@pytest.mark.parametrize(
    "command",
    [
        ["count"],
        ["view", "--html", "{out}"],
        ["compact", "--window", "4000", "--out", "{out}"],
        ["frontier", "--window", "4000", "--no-neighbours", "--no-alternatives"],
    ],
    ids=lambda c: c[0],
)
def test_a_transcript_at_the_memory_cap_is_read_and_one_over_it_refused(
    command: list[str], tmp_path: Path
) -> None:
    small = one_word_transcript(tmp_path / "small.json", 0.01)
    at_cap = one_word_transcript(tmp_path / "at-cap.json", 1.6)
    over = one_word_transcript(tmp_path / "over.json", 4)

    def argv(file: Path) -> list[str]:
        rest = [a.replace("{out}", str(tmp_path / f"out-{file.stem}")) for a in command[1:]]
        return [command[0], str(file), *rest]

    assert under_a_limit([argv(small), argv(at_cap), argv(over)]) == [0, 2]


@needs_proc
@pytest.mark.parametrize("command", ["inspect", "frontier"])
def test_a_checkpoint_at_the_memory_cap_is_read_and_one_over_it_refused(
    command: str, tmp_path: Path
) -> None:
    small, at_cap, over = (
        one_word_thread(tmp_path / f"{name}.sqlite", size)
        for name, size in (("small", 0.01), ("at-cap", 1.6), ("over", 4))
    )

    def argv(db: Path) -> list[str]:
        replay = ["--window", "4000", "--no-neighbours", "--no-alternatives"]
        extra = replay if command == "frontier" else []
        return [command, "--db", str(db), "--thread", "t1", *extra]

    assert under_a_limit([argv(small), argv(at_cap), argv(over)]) == [0, 2]


def test_a_checkpoint_value_over_the_cap_is_refused_before_it_is_loaded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = one_word_thread(tmp_path / "big.sqlite", 3)
    for argv in reads(db, "t1", tmp_path / "page.html"):
        assert main([*argv, "--max-input-mb", "2"]) == 2, argv
        error = one_error_line(capsys)
        assert "holds a value of 3 MB, over 2 MB, the cap on one input" in error, error


def test_a_value_over_the_cap_in_another_thread_does_not_block_this_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = one_word_thread(tmp_path / "two.sqlite", 3, thread="big")
    one_word_thread(db, 0.01, thread="small")
    for argv in reads(db, "small", tmp_path / "page.html"):
        assert main([*argv, "--max-input-mb", "2"]) == 0, (argv, capsys.readouterr().err)
    capsys.readouterr()
    for argv in reads(db, "big", tmp_path / "page.html"):
        assert main([*argv, "--max-input-mb", "2"]) == 2, argv
        assert "over 2 MB, the cap on one input" in one_error_line(capsys)
    # frontier over every thread reads the big one too: refused.
    every = [
        "frontier",
        "--db",
        str(db),
        "--window",
        "4000",
        "--no-neighbours",
        "--no-alternatives",
    ]
    assert main([*every, "--max-input-mb", "2"]) == 2


# --- PostgreSQL: the archive read without writing ----------------------------------------------


@tool
def read_log(part: int) -> str:
    """A long log part."""
    return "\n".join(
        f"part {part} line {i}: request_id=r{part}-{i} status=ok latency={i * 7}ms"
        for i in range(120)
    )


@pytest.mark.postgres
def test_view_reads_a_postgres_archive_without_writing(
    postgres_uri: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The archive in the database's store (a graph with no store of its own) reads whole."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    thread = f"archived-{tmp_path.name}"
    calls = [
        AIMessage("", tool_calls=[{"name": "read_log", "args": {"part": p}, "id": f"c{p}"}])
        for p in range(4)
    ]
    model = ScriptedChatModel(messages=[*calls, AIMessage("done")])
    with PostgresSaver.from_conn_string(postgres_uri) as saver:
        saver.setup()
        memory = ContextMemory(context_window_tokens=3_000)  # archives into the twin store
        middleware = [memory.middleware()]
        agent = create_agent(model, [read_log], middleware=middleware, checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        agent.invoke({"messages": [HumanMessage("read the logs", id="h1")]}, config)  # type: ignore[arg-type]
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        stored = conn.execute(
            "SELECT count(*), max(updated_at), max(expires_at) FROM store WHERE prefix LIKE %s",
            (f"%{thread}%",),
        ).fetchone()
        assert stored is not None and stored[0] > 0  # the thread's archive is in the store
        page = tmp_path / "thread.html"
        argv = ["view", "--db", typed_uri(postgres_uri), "--thread", thread, "--html", str(page)]
        caplog.clear()
        assert main(argv) == 0
        out = capsys.readouterr()
        said = out.out + out.err + "\n".join(r.getMessage() for r in caplog.records)
        assert "failed to read" not in said and "ReadOnlySql" not in said, said[:500]
        assert (
            conn.execute(
                "SELECT count(*), max(updated_at), max(expires_at) FROM store WHERE prefix LIKE %s",
                (f"%{thread}%",),
            ).fetchone()
            == stored
        )
