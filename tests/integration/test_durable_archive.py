"""The default archive under a durable checkpointer with no store: in the checkpointer's database.

A graph compiled with `SqliteSaver` or `PostgresSaver` (or their async twins), no store and a
`ContextMemory()` without `archive=` keeps its archive next to its checkpoints (a LangGraph
store in the same SQLite file or Postgres database), so a new process restores and recalls
everything. The restart tests run each half in a fresh interpreter; the Postgres cases run
when `LANGGRAPH_CTX_TEST_POSTGRES_URI` is set (a fresh database per test) and fail when it is
set but the server is unreachable.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.archive import NAMESPACE_ROOT, decode_message, encode_message
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.graph.durable import checkpointer_archive
from langgraph_ctx.prompt.report import REPORT_KEY
from tests.conftest import run
from tests.fakes import ScriptedChatModel
from tests.integration._agents import (
    Script,
    Seen,
    adrive,
    check_history,
    check_prompts,
    compacting_memory,
    drive,
    hand_built,
    recall_script,
)
from tests.integration.conftest import POSTGRES_ENV, CheckpointerBackend, fresh_database

ROOT = Path(__file__).resolve().parents[2]


def graph_for(shell: str, memory: ContextMemory, script: Script, model: Any, saver: Any) -> Any:
    """The `create_agent` middleware (`agent`) or the hand-built nodes (`nodes`), no store."""
    if shell == "agent":
        return create_agent(
            model,
            script.tools(),
            system_prompt=script.system,
            middleware=[memory.middleware()],
            checkpointer=saver,
        )
    tools = [*script.tools(), memory.recall_tool()]
    return hand_built(memory, model, tools).compile(checkpointer=saver)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:12]}"}}


def archive_scopes(store: BaseStore) -> set[tuple[str, ...]]:
    return {ns[1:-1] for ns in store.list_namespaces(prefix=(NAMESPACE_ROOT,), limit=10_000)}


def recalled(seen: Seen) -> ToolMessage:
    found = [m for m in seen.messages.values() if isinstance(m, ToolMessage) and m.name == "recall"]
    assert len(found) == 1 and found[0].status == "success", found
    return found[0]


def recall_ref(seen: Seen) -> str:
    return next(
        str(tc["args"]["ref"])
        for m in seen.messages.values()
        if isinstance(m, AIMessage)
        for tc in m.tool_calls
        if tc["name"] == "recall"
    )


def same_bytes(found: BaseMessage, original: BaseMessage) -> bool:
    """Equal bytes, but for the report the after-turn step may have attached since."""
    if encode_message(found) == encode_message(original):
        return True

    def bare(m: BaseMessage) -> bytes:
        meta = {k: v for k, v in m.response_metadata.items() if k != REPORT_KEY}
        return encode_message(m.model_copy(update={"response_metadata": meta}))

    return bare(found) == bare(original)


# --- a restart in a new process ---------------------------------------------------------------


@asynccontextmanager
async def open_saver(saver: str, target: str) -> AsyncIterator[Any]:
    """A checkpointer of kind `saver` on `target` (a SQLite file, a Postgres conninfo)."""
    if saver == "sqlite-file":
        with SqliteSaver.from_conn_string(target) as sqlite_saver:
            yield sqlite_saver
    elif saver == "sqlite-connection":
        conn = sqlite3.connect(target, check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    elif saver == "async-sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(target) as async_sqlite_saver:
            yield async_sqlite_saver
    elif saver == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(target) as postgres_saver:
            postgres_saver.setup()
            yield postgres_saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(target) as async_postgres_saver:
            await async_postgres_saver.setup()
            yield async_postgres_saver


async def restart_half(half: str, saver: str, shell: str, target: str, workdir: str) -> None:
    """One process's half of the restart test: `first` compacts, `second` recalls and checks.

    The first half records every message the thread's state held (their bytes) in
    `workdir/first.json`; the second, a new process on the same database, finishes the thread
    and checks that the full history and `recall` give every one back byte for byte.
    """
    mode = "async" if saver.startswith("async") else "sync"
    record = Path(workdir) / "first.json"
    script = recall_script()
    memory = compacting_memory()  # a new process: a new memory, and no archive= or store
    config = {"configurable": {"thread_id": "restarted"}}
    seen, skip = Seen(), 0
    if half == "second":
        first = json.loads(record.read_text())
        skip = first["calls"]
        for hexed in first["messages"]:
            message = decode_message(bytes.fromhex(hexed))
            seen.order.append(str(message.id))
            seen.messages[str(message.id)] = message
    inputs = script.inputs[:-1] if half == "first" else script.inputs[-1:]
    model = script.model(skip=skip)
    async with open_saver(saver, target) as checkpointer:
        graph = graph_for(shell, memory, script, model, checkpointer)
        await run(mode, drive, adrive, graph, inputs, config, seen)
        check_prompts(model, memory)
        if half == "first":
            ledger = (await run(mode, graph.get_state, graph.aget_state, config)).values
            assert ledger["context_ledger"]["compacted"], "nothing was archived"
            messages = [encode_message(seen.messages[i]).hex() for i in seen.order]
            record.write_text(json.dumps({"calls": len(model.prompts), "messages": messages}))
            print("FIRST-OK", len(messages))
            return
        # `recall` found an output the first process archived, byte for byte.
        answer = recalled(seen)
        restored = await run(
            mode, memory.restore, memory.arestore, recall_ref(seen), config, graph=graph
        )
        assert isinstance(restored, ToolMessage) and restored.id in seen.messages
        assert encode_message(restored) == encode_message(seen.messages[str(restored.id)])
        assert str(restored.content)[:500] in str(answer.content)
        # The full history holds every message the thread ever held, in order, byte for byte.
        history = await run(mode, memory.get_full_history, memory.aget_full_history, graph, config)
        by_id = {m.id: m for m in history}
        assert [m.id for m in history if m.id in seen.messages] == seen.order
        for mid in seen.order:
            assert same_bytes(by_id[mid], seen.messages[mid]), mid
        print("SECOND-OK", len(seen.order))


def run_half(half: str, saver: str, shell: str, target: str, workdir: Path) -> None:
    code = (
        "import asyncio; from tests.integration.test_durable_archive import restart_half; "
        f"asyncio.run(restart_half({half!r}, {saver!r}, {shell!r}, {target!r}, "
        f"{str(workdir)!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"{half.upper()}-OK" in done.stdout, done.stdout[-2000:]


@contextmanager
def target_for(saver: str, tmp_path: Path) -> Iterator[str]:
    """A SQLite file, or a fresh Postgres database (skipped without the env var)."""
    if "postgres" not in saver:
        yield str(tmp_path / "threads.sqlite")
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"set {POSTGRES_ENV} to run the Postgres checkpointer")
    with fresh_database(base) as uri:  # unreachable with the env var set: an error
        yield uri


@pytest.mark.parametrize(
    ("saver", "shell"),
    [
        ("sqlite-file", "agent"),
        ("sqlite-file", "nodes"),
        ("sqlite-connection", "agent"),
        ("async-sqlite", "agent"),
        ("postgres", "agent"),
        ("postgres", "nodes"),
        ("async-postgres", "nodes"),
    ],
)
def test_a_new_process_restores_and_recalls_the_archive(
    saver: str, shell: str, tmp_path: Path
) -> None:
    with target_for(saver, tmp_path) as target:
        run_half("first", saver, shell, target, tmp_path)
        run_half("second", saver, shell, target, tmp_path)


# --- where the archive lives, in one process ----------------------------------------------------


def test_the_archive_is_in_the_database_of_the_checkpoints(
    checkpointer_backend: CheckpointerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not checkpointer_backend.persistent:
        pytest.skip("an InMemorySaver's archive is in-process (test_in_memory_...)")
    monkeypatch.chdir(tmp_path)
    script, memory, config = recall_script(), compacting_memory(), thread()
    model = script.model()
    with checkpointer_backend.open() as saver:
        agent = graph_for("agent", memory, script, model, saver)
        seen = drive(agent, script.inputs, config)
        check_prompts(model, memory)
        recalled(seen)
        check_history(memory, agent, config, seen)
    with open_store(checkpointer_backend) as store:  # what any store there reads
        assert archive_scopes(store) == {(config["configurable"]["thread_id"],)}
    # No archive directory, no other file: only the checkpoints' database (and its WAL).
    assert all(p.name.startswith("checkpoints.sqlite") for p in tmp_path.iterdir())


@contextmanager
def open_store(backend: CheckpointerBackend) -> Iterator[BaseStore]:
    if backend.name == "sqlite":
        with SqliteStore.from_conn_string(str(backend.target)) as store:
            yield store
    else:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(str(backend.target)) as pg_store:
            yield pg_store


async def test_in_memory_sqlite_keeps_the_archive_in_process(mode: str) -> None:
    script, memory, config = recall_script(), compacting_memory(), thread()
    model = script.model()
    if mode == "sync":
        saver: Any = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    else:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        saver = AsyncSqliteSaver(await aiosqlite.connect(":memory:"))
    try:
        agent = graph_for("agent", memory, script, model, saver)
        seen = await run(mode, drive, adrive, agent, script.inputs, config)
        recalled(seen)
        archive = checkpointer_archive(saver)
        assert archive is not None and isinstance(archive.store, InMemoryStore)
        assert archive_scopes(archive.store) == {(config["configurable"]["thread_id"],)}
    finally:
        if mode == "async":
            await saver.conn.close()


async def test_async_sqlite_views_from_the_loop_and_from_a_thread(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    script, memory, config = recall_script(), compacting_memory(), thread()
    model = script.model()
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as saver:
        agent = graph_for("agent", memory, script, model, saver)
        seen = await adrive(agent, script.inputs, config)
        recalled(seen)
        history = await memory.aget_full_history(agent, config)
        # The sync views work from another thread (the async saver's rule), on the same store.
        from_thread = await asyncio.to_thread(memory.get_full_history, agent, config)
        assert [encode_message(m) for m in from_thread] == [encode_message(m) for m in history]
        assert [m.id for m in history if m.id in seen.messages] == seen.order


def test_one_store_per_checkpointer_set_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setups: list[int] = []
    original = SqliteStore.setup

    def counted(store: SqliteStore) -> None:
        setups.append(1)
        original(store)

    monkeypatch.setattr(SqliteStore, "setup", counted)
    conn = sqlite3.connect(tmp_path / "threads.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    scripts = [recall_script() for _ in range(4)]
    memories = [compacting_memory(), compacting_memory()]
    agents = [
        graph_for("agent", memories[n % 2], script, script.model(), saver)
        for n, script in enumerate(scripts)
    ]
    configs = [thread() for _ in scripts]
    # Four threads at once, two memories, one SQLite file: one store, set up once, no race.
    with ThreadPoolExecutor(4) as pool:
        runs = [
            pool.submit(drive, agent, script.inputs, config)
            for agent, script, config in zip(agents, scripts, configs, strict=True)
        ]
        seens = [r.result(timeout=300) for r in runs]
    assert len(setups) == 1
    assert checkpointer_archive(saver) is checkpointer_archive(saver)
    for n, (agent, config, seen) in enumerate(zip(agents, configs, seens, strict=True)):
        recalled(seen)
        check_history(memories[n % 2], agent, config, seen)
    conn.close()


def test_reading_the_archive_while_iterating_the_checkpoints_does_not_block(
    checkpointer_backend: CheckpointerBackend,
) -> None:
    """`SqliteSaver.list()` and `PostgresSaver.list()` hold the saver's lock while the caller
    iterates; the archive has a connection of its own, so reading it in that loop can not
    deadlock."""
    script, memory, config = recall_script(), compacting_memory(), thread()
    with checkpointer_backend.open() as saver:
        agent = graph_for("agent", memory, script, script.model(), saver)
        seen = drive(agent, script.inputs, config)
        ref = recall_ref(seen)
        restored: list[BaseMessage] = []

        def walk() -> None:
            for _ in agent.get_state_history(config):
                restored.append(memory.restore(ref, config, graph=agent))

        walker = threading.Thread(target=walk, daemon=True)
        walker.start()
        walker.join(timeout=60)
        assert not walker.is_alive(), "reading the archive blocked on the saver's lock"
        assert len(restored) > 1 and len({encode_message(m) for m in restored}) == 1


def test_a_postgres_pool_is_shared_by_the_archive(postgres_uri: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    options = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(postgres_uri, max_size=4, kwargs=options) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        memory = compacting_memory()
        scripts = [recall_script() for _ in range(3)]
        agents = [graph_for("nodes", memory, s, s.model(), saver) for s in scripts]
        configs = [thread() for _ in scripts]
        with ThreadPoolExecutor(3) as workers:
            runs = [
                workers.submit(drive, agent, script.inputs, config)
                for agent, script, config in zip(agents, scripts, configs, strict=True)
            ]
            seens = [r.result(timeout=300) for r in runs]
        archive = checkpointer_archive(saver)
        assert archive is not None and getattr(archive.store, "conn", None) is pool
        for agent, config, seen in zip(agents, configs, seens, strict=True):
            recalled(seen)
            check_history(memory, agent, config, seen)


# --- a durable checkpointer whose database the archive can not share ----------------------------


class CustomSaver(BaseCheckpointSaver[str]):
    """A durable checkpointer of its own kind (here it keeps its checkpoints in a dict)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = InMemorySaver()

    def get_tuple(self, config: Any) -> Any:
        return self.inner.get_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Any:
        return self.inner.list(config, **kwargs)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.inner.put_writes(config, writes, task_id, task_path)


@pytest.mark.parametrize("shell", ["agent", "nodes"])
def test_a_custom_durable_checkpointer_is_refused_before_anything_is_archived(shell: str) -> None:
    script, memory = recall_script(), compacting_memory()
    model = ScriptedChatModel(messages=iter(script.replies))
    saver = CustomSaver()
    graph = graph_for(shell, memory, script, model, saver)
    config = thread()
    with pytest.raises(ConfigError, match=r"store=") as caught:
        drive(graph, script.inputs[:1], config)
    text = str(caught.value)
    assert "CustomSaver" in text and "archive=" in text
    assert model.prompts == []  # refused at the first call, before the model or the archive
    with pytest.raises(ConfigError, match="CustomSaver"):  # the views say so at once
        memory.get_full_history(graph, config)  # type: ignore[arg-type]
    # A store (or archive=) is the fix the message names.
    fixed = (
        create_agent(
            script.model(),
            script.tools(),
            system_prompt=script.system,
            middleware=[memory.middleware()],
            checkpointer=saver,
            store=InMemoryStore(),
        )
        if shell == "agent"
        else hand_built(memory, script.model(), [*script.tools(), memory.recall_tool()]).compile(
            checkpointer=saver, store=InMemoryStore()
        )
    )
    recalled(drive(fixed, script.inputs, thread()))
