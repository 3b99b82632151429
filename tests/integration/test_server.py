"""The real LangGraph API server: `langgraph dev` (langgraph-api, in-memory runtime) serving a
`create_agent` agent with the middleware and a `StateGraph` with the nodes
(`tests/integration/server/`), driven over HTTP with `langgraph_sdk`.

The server runs as a subprocess on 127.0.0.1 with analytics and tracing off (no network). It
writes `configurable["user_id"] = ""` into every run, supplies the checkpointer and the store
at run time, and runs graphs on an event loop guarded by blockbuster (a blocking call in a
run fails the run and is logged). The in-memory runtime writes its checkpoints and its store
to `.langgraph_api/` in its working directory when it stops, so a second server started in the
same directory is a restart with persistent state.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph_api", reason="needs the test extra (langgraph-cli[inmem])")
from langgraph_sdk import get_client, get_sync_client

from langgraph_ctx.archive import encode_message
from langgraph_ctx.errors import ArchiveAccessError, ConfigError
from langgraph_ctx.graph.client import aserver_history_page, server_history_page, state_messages
from tests.test_readme import section

pytestmark = pytest.mark.slow

SERVER_DIR = Path(__file__).parent / "server"
ROOT = Path(__file__).resolve().parents[2]
GRAPHS = ("agent", "nodes")
BLOCKING_MARKERS = ("BlockingError", "identified a synchronous blocking call")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One `langgraph dev` process; `restart()` stops it and starts another in the same dir."""

    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    logs: list[Path] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port = free_port()
        self.logs = [*(self.logs or []), self.workdir / f"server-{len(self.logs or [])}.log"]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGSMITH_API_KEY": "",
            "NO_COLOR": "1",
        }
        command = [
            str(Path(sys.executable).parent / "langgraph"),
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--config",
            str(SERVER_DIR / "langgraph.json"),
        ]
        log = self.logs[-1].open("wb")
        self.process = subprocess.Popen(
            command, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server exited early:\n{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/ok", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        pytest.fail(f"the server did not answer /ok within 120 s:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)  # a clean shutdown writes .langgraph_api/
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs or [] if p.exists())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module (each test uses threads of its own; one test restarts it)."""
    running = Server(tmp_path_factory.mktemp("server"))
    running.start()
    try:
        yield running
    finally:
        running.stop()


async def ask(client: Any, thread_id: str, graph: str, text: str) -> list[dict[str, Any]]:
    """One run; returns the thread's messages after it (raises when the run failed)."""
    values = await client.runs.wait(
        thread_id, graph, input={"messages": [{"role": "user", "content": text}]}
    )
    assert isinstance(values, dict) and "messages" in values, values
    return list(values["messages"])


def recall_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == "tool" and m.get("name") == "recall"]


async def test_server_runs_both_graphs_and_recalls_across_a_restart(server: Server) -> None:
    client = get_client(url=server.url)
    threads: dict[tuple[str, int], str] = {}
    for graph in GRAPHS:
        for n in range(2):
            threads[graph, n] = (await client.threads.create())["thread_id"]
    # Several threads of both graphs, interleaved, each long enough to compact.
    for part in range(1, 5):
        for (graph, _), thread_id in threads.items():
            messages = await ask(client, thread_id, graph, f"read part {part}")
            answer = messages[-1]
            assert answer["type"] == "ai" and not answer.get("tool_calls")
            # The report travels over the wire on the AI message.
            report = answer["response_metadata"]["context_cost"]
            assert 0 < report["tokens"] <= report["limit"]
    # The archive lives in the server's store, scoped by thread (no user: `user_id` is "").
    scopes = set()
    for thread_id in threads.values():
        found = await client.store.search_items(("langgraph_ctx", thread_id), limit=100)
        scopes |= {tuple(item["namespace"][1:-1]) for item in found["items"]}
    assert scopes == {(t,) for t in threads.values()}, scopes
    # `recall` across runs: the model reads back an output compacted in an earlier run.
    first = threads["agent", 0]
    messages = await ask(client, first, "agent", "recall the oldest output")
    [result] = recall_results(messages)
    assert result["status"] == "success" and "part 1 line 0:" in result["content"]

    server.restart()  # the in-memory runtime persists its checkpoints and store to disk
    client = get_client(url=server.url)
    for graph in GRAPHS:
        thread_id = threads[graph, 1]
        messages = await ask(client, thread_id, graph, "recall the oldest output")
        results = recall_results(messages)
        assert results and results[-1]["status"] == "success", results
        assert "part 1 line 0:" in results[-1]["content"]
        report = messages[-1]["response_metadata"]["context_cost"]
        assert 0 < report["tokens"] <= report["limit"]
    log = server.log()
    assert not any(marker in log for marker in BLOCKING_MARKERS), log[-4000:]


async def test_a_ui_reads_the_full_history_of_a_thread_a_rebuild_emptied(server: Server) -> None:
    """`langgraph_ctx.graph.client`: what a UI renders is every message the thread produced, in
    order, byte for byte, although the thread state keeps only the last turn."""
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    assert await aserver_history_page(client, thread_id) == []  # a thread with no run yet
    produced: dict[str, dict[str, Any]] = {}  # latest wire version, in first-seen order
    for part in range(1, 6):
        request = {"messages": [{"role": "user", "content": f"read part {part}"}]}
        async for chunk in client.runs.stream(
            thread_id, "history", input=request, stream_mode="values"
        ):
            assert chunk.event != "error", chunk.data
            if chunk.event == "values":
                produced.update({m["id"]: m for m in chunk.data["messages"]})
    state = (await client.threads.get_state(thread_id))["values"]
    assert len(state["messages"]) < len(produced) / 2, "no rebuild emptied the state"
    summary = state["context_ledger"]["summary"]  # the newest dump, older ones in the index
    assert len(summary["dump_refs"]) + bool(summary.get("dump_index")) >= 2
    expected = [encode_message(m) for m in state_messages({"messages": [*produced.values()]})[0]]

    history = await aserver_history_page(client, thread_id)
    assert [encode_message(m) for m in history] == expected
    sync = get_sync_client(url=server.url)
    assert [encode_message(m) for m in server_history_page(sync, thread_id)] == expected
    # Pages, as a UI scrolls up: the last 4, then the 4 before the first one shown.
    last = await aserver_history_page(client, thread_id, limit=4)
    assert [encode_message(m) for m in last] == expected[-4:]
    before = server_history_page(sync, thread_id, limit=4, before=last[0].id)
    assert [encode_message(m) for m in before] == expected[-8:-4]
    log = server.log()
    assert not any(marker in log for marker in BLOCKING_MARKERS), log[-4000:]
    # The README's server block, as written but for the URL and the thread.
    page, text = section("Showing the conversation in a UI")
    code = re.findall(r"```py\n(.*?)```", text, flags=re.S)[0]
    code = code.replace('"http://127.0.0.1:2024"', repr(server.url))
    code = re.sub(r"(?m)^thread_id = .*$", f"thread_id = {thread_id!r}", code)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(page), "exec"), {})
    lines = out.getvalue().splitlines()
    assert len(lines) == len(expected) and lines[0] == "human: read part 1", lines


@pytest.mark.parametrize("user", ["alice", "alice@example.com"])
async def test_a_ui_reads_a_user_scoped_history(server: Server, user: str) -> None:
    """A thread archived under a user: the scope comes from the thread's references; a user
    id they hide (hashed) must be passed, and another user's id is refused."""
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    config = {"configurable": {"user_id": user}}
    for part in range(1, 5):
        request = {"messages": [{"role": "user", "content": f"read part {part}"}]}
        await client.runs.wait(thread_id, "history", input=request, config=config)
    state = (await client.threads.get_state(thread_id))["values"]
    summary = state["context_ledger"]["summary"]
    refs = [*summary["dump_refs"], *([summary["dump_index"]] if summary.get("dump_index") else [])]
    assert all(ref.split(":")[1].endswith(f"/{thread_id}") for ref in refs), refs
    expected = await aserver_history_page(client, thread_id, user_id=user)
    assert len(expected) > len(state["messages"])
    if "@" in user:  # the references carry the sha256 of the id, not the id
        with pytest.raises(ConfigError, match="user_id="):
            await aserver_history_page(client, thread_id)
    else:
        history = await aserver_history_page(client, thread_id)
        assert [encode_message(m) for m in history] == [encode_message(m) for m in expected]
    with pytest.raises(ArchiveAccessError, match="another thread's archive"):
        await aserver_history_page(client, thread_id, user_id="mallory")


async def test_search_history_finds_a_line_only_in_its_own_thread(server: Server) -> None:
    """Two threads of the `agent` graph: A reads a part numbered 77 between parts 1-4, B reads
    parts 1-4 only. Once part 77 has left A's prompt, the same search finds its line in A,
    with the `recall` call that reads around it, and nothing in B: each thread searches its own
    archive in the server's store. The answer comes back as a tool message."""
    client = get_client(url=server.url)
    a, b = [(await client.threads.create())["thread_id"] for _ in range(2)]
    for part in (1, 2, 77, 3, 4):
        await ask(client, a, "agent", f"read part {part}")
    for part in (1, 2, 3, 4):
        await ask(client, b, "agent", f"read part {part}")
    query = '"part 77 line 3"'

    messages = await ask(client, b, "agent", f"search {query}")
    [result] = [m for m in messages if m["type"] == "tool" and m.get("name") == "search_history"]
    assert result["content"].startswith(f"search_history: no line matches {query!r}"), result
    assert "part 77 line 3:" not in result["content"]
    assert messages[-1]["type"] == "ai" and messages[-1]["content"] == result["content"]

    messages = await ask(client, a, "agent", f"search {query}")
    [result] = [m for m in messages if m["type"] == "tool" and m.get("name") == "search_history"]
    assert result["status"] == "success"
    hit = re.search(
        r"> *\d+: (part 77 line 3: [^\n]*)\n.*?recall\(ref=\"([^\"]+)\"", result["content"], re.S
    )
    assert hit, result["content"]
    assert hit[1] == "part 77 line 3: step 231 finished, cache warm, artifacts uploaded"
    assert hit[2].startswith(f"lgctx:{a}:")  # a reference into thread A's archive
    assert messages[-1]["type"] == "ai" and "part 77 line 3: step 231" in messages[-1]["content"]
    # The search answer is a tool message, never system text of the prompt.
    assert not any(m["type"] == "system" and "part 77" in str(m["content"]) for m in messages)
    log = server.log()
    assert not any(marker in log for marker in BLOCKING_MARKERS), log[-4000:]
