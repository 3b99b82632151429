"""Fault injection: the summarizer, the archive, the process and the database fail mid-run.

Every fault runs through a real LangGraph graph (a hand-built `StateGraph` with the context
node, or `create_agent` with the middleware) on a real checkpointer; only the chat models are
fakes. Each test shows that nothing is lost: after the fault the thread's full history
(live state plus archive dumps) holds every message the run committed, byte for byte, every
prompt the model got is valid for OpenAI and Anthropic and within the budget, and the ledger
names only messages that exist in the live state or the archive.

A process that dies is simulated by `ProcessDied`, a `BaseException`: like a `kill -9`, no
`except Exception` in the library or in LangGraph can swallow it. The thread is then resumed
by a fresh graph, memory and model (a new process) on the same checkpointer storage and the
same archive.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import re
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.archive import encode_message
from langgraph_ctx.archive._backends import Namespace, StoreBackend
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.errors import ArchiveError, ContextWindowExceededError
from langgraph_ctx.graph.state import ContextState
from langgraph_ctx.messages import text_of, validate_messages
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import Compaction
from langgraph_ctx.summaries.summarizer import Summarizer
from tests.conftest import make_strategies, run, summary_first_strategies
from tests.fakes import ScriptedChatModel
from tests.integration._agents import (
    Script,
    Seen,
    adrive,
    check_history,
    check_ledger,
    check_prompts,
    drive,
    hand_built,
    long_turn_script,
    synthetic_script,
)
from tests.integration.conftest import POSTGRES_ENV, CheckpointerBackend, fresh_database

WINDOW = 4_600
"""Small enough that pruning, compaction and summaries all happen in an 8-turn run under
`summary_first()` (the replay tools' typed schemas take about 110 tokens of it)."""


def summary_first() -> dict[str, Any]:
    """`ContextMemory` arguments for the summary-first policy this file's faults need.

    The faults here hit summaries, their dumps and the removals they allow; the defaults show
    excerpts and shorten turns first, so an 8-turn run in `WINDOW` would rarely summarize.
    """
    return {"context_window_tokens": WINDOW, "strategies": summary_first_strategies()}


class ProcessDied(BaseException):
    """The process dies here (a `BaseException`, so no `except Exception` swallows it)."""


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointerBackend:
    """Checkpointer storage: one in-memory saver, or a SQLite file reopened per "process"."""
    from langgraph.checkpoint.memory import InMemorySaver

    if request.param == "memory":
        return CheckpointerBackend("memory", _memory=InMemorySaver())
    return CheckpointerBackend("sqlite", str(tmp_path / "checkpoints.sqlite"))


def thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:12]}"}}


# --- fakes --------------------------------------------------------------------------------


class FaultyBackend:
    """An `ArchiveBackend` over an `InMemoryStore` whose writes and reads fail on demand.

    `fail_put` / `fail_get` make every write / read raise `ConnectionError` (sync and async);
    `fail_from_put` sets `fail_put` from the n-th write on; `die_at_put` kills the process
    right after the n-th successful write lands.
    """

    def __init__(self, store: BaseStore | None = None) -> None:
        self.inner = StoreBackend(store if store is not None else InMemoryStore())
        self.fail_put = False
        self.fail_get = False
        self.die_at_put: int | None = None
        self.fail_from_put: int | None = None
        self.puts = 0
        self.keys: set[tuple[Namespace, str]] = set()

    def put(self, namespace: Namespace, key: str, data: bytes) -> None:
        if self.fail_from_put is not None and self.puts + 1 >= self.fail_from_put:
            self.fail_put = True
        if self.fail_put:
            msg = "archive store unreachable (injected write fault)"
            raise ConnectionError(msg)
        self.inner.put(namespace, key, data)
        self.puts += 1
        self.keys.add((namespace, key))
        if self.die_at_put == self.puts:
            self.die_at_put = None
            msg = f"the process died right after archive write #{self.puts}"
            raise ProcessDied(msg)

    def get(self, namespace: Namespace, key: str) -> bytes | None:
        if self.fail_get:
            msg = "archive store unreachable (injected read fault)"
            raise ConnectionError(msg)
        return self.inner.get(namespace, key)

    async def aput(self, namespace: Namespace, key: str, data: bytes) -> None:
        await asyncio.sleep(0)
        self.put(namespace, key, data)

    async def aget(self, namespace: Namespace, key: str) -> bytes | None:
        await asyncio.sleep(0)
        return self.get(namespace, key)


GOOD_SUMMARY = (
    "<completed>\n- span {digest}: {count} characters of transcript read.\n</completed>\n"
    "<remaining>\n- Continue with the user's request.\n</remaining>\n"
    "<current_state>\n- Nothing pending.\n</current_state>\n<notes>\n- none\n</notes>"
)


def summary_llm(fault: str = "none", *, die_at: int | None = None) -> ScriptedChatModel:
    """Stands in for the summarizer's LLM: a valid summary (a digest of its prompt), or a fault.

    Faults: `raise` (every call), `timeout` (sleeps 0.6 seconds), `empty`, `garbage` (an
    unclosed section), `non_text` (an image block only), `enormous` (far over the bound).
    `die_at` kills the process on that call (1-based). Its calls are `len(model.prompts)`.
    """

    def reply(messages: list[BaseMessage]) -> AIMessage:
        transcript = text_of(messages[-1])
        if fault == "raise":
            msg = "summarizer provider unreachable (injected fault)"
            raise ConnectionError(msg)
        if fault == "empty":
            return AIMessage("")
        if fault == "garbage":
            return AIMessage("<completed>\n- half a section, never closed\n<remaining>\n???")
        if fault == "non_text":
            image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
            return AIMessage(content=[image])
        if fault == "enormous":
            filler = "\n".join(f"- step {i}: " + "x" * 60 for i in range(200))
            return AIMessage(f"<completed>\n{filler}\n</completed>\n<remaining>\n</remaining>")
        digest = hashlib.sha256(transcript.encode()).hexdigest()[:12]
        return AIMessage(GOOD_SUMMARY.format(digest=digest, count=len(transcript)))

    failures = {}
    if die_at is not None:
        failures[die_at] = ProcessDied(f"the process died inside summarizer call #{die_at}")
    return ScriptedChatModel(
        messages=itertools.repeat(reply),
        delay=0.6 if fault == "timeout" else 0.0,
        failures=failures,
    )


class DyingSummarizer(Summarizer):
    """A `Summarizer` whose process dies right after its n-th summary came back."""

    def _tick(self) -> None:
        calls = getattr(self, "calls", 0) + 1
        object.__setattr__(self, "calls", calls)
        if calls == getattr(self, "die_at", None):
            msg = f"the process died right after summary #{calls} came back"
            raise ProcessDied(msg)

    def plan(self, messages: Sequence[BaseMessage], previous: str | None = None) -> Any:
        # The pipeline composes the summarizer's plan, so the crash goes where it returns.
        outcome = yield from super().plan(messages, previous)
        self._tick()
        return outcome


# --- the graph and the checks ---------------------------------------------------------------


def inputs_of(script: Script) -> list[Any]:
    """The turns of a script; the first one carries the system prompt into the state."""
    return [{"messages": [script.system_message(), script.inputs[0]]}, *script.inputs[1:]]


def decisions(memory: ContextMemory, graph: Any, config: RunnableConfig) -> list[dict[str, Any]]:
    """Every decision of every report the thread's checkpoints hold."""
    from dataclasses import asdict

    return [asdict(d) for r in memory.get_reports(graph, config) for d in r.decisions]


def assert_intact(
    memory: ContextMemory,
    graph: Any,
    config: RunnableConfig,
    seen: Seen,
    models: Sequence[ScriptedChatModel],
) -> None:
    """Nothing lost, every prompt valid and within budget, the ledger consistent."""
    for model in models:
        if model.prompts:
            check_prompts(model, memory)
            assert all(validate_messages(p, provider="all") == [] for p in model.prompts)
    check_history(memory, graph, config, seen)
    check_ledger(memory, graph, config)


def committed(graph: Any, config: RunnableConfig) -> Seen:
    """Every message any checkpoint of the thread holds (what the run durably produced)."""
    seen = Seen()
    for snapshot in reversed(list(graph.get_state_history(config))):
        seen.add(snapshot.values)
    return seen


# --- 1. the summarizer fails -------------------------------------------------------------------

SUMMARIZER_FAULTS = {
    # fault: what the report must say about why the fallback took over
    "raise": "ConnectionError: summarizer provider unreachable",
    "timeout": "did not answer within 0.2s",
    "empty": "empty output",
    "garbage": "malformed output",
    "non_text": "empty output",
    "enormous": "enormous output",
}


@pytest.mark.parametrize("fault", list(SUMMARIZER_FAULTS))
async def test_summarizer_fault_falls_back_to_the_deterministic_summary(
    storage: CheckpointerBackend, fault: str
) -> None:
    """The summarizer's model fails on every attempt: the fallback summary takes its place.

    The graph removes what it summarizes (`remove_summarized`) and rebuilds after large turns,
    so a summary that did not happen would lose messages.
    """
    script = synthetic_script(turns=8, recall=False)
    summary_model = summary_llm(fault)
    summarizer = Summarizer(
        model=summary_model,
        timeout_seconds=0.2,
        retries=0 if fault == "timeout" else 1,
        max_output_tokens=256,
    )
    memory = ContextMemory(
        **summary_first(),
        summarizer=summarizer,
        remove_summarized=True,
        archive=InMemoryStore(),  # the test keeps it across the saver's restarts
    )
    model = script.model(usage_counter=memory.manager.token_counter)
    config = thread()
    graph_mode = "async" if fault in ("timeout", "garbage") else "sync"  # both drivers
    with storage.open() as saver:
        graph = hand_built(memory, model, script.tools()).compile(checkpointer=saver)
        if graph_mode == "sync":
            drive(graph, inputs_of(script), config)
    if graph_mode == "async":
        async with storage.aopen() as saver:
            graph = hand_built(memory, model, script.tools()).compile(checkpointer=saver)
            await adrive(graph, inputs_of(script), config)
    with storage.open() as saver:
        graph = hand_built(memory, model, script.tools()).compile(checkpointer=saver)
        seen = committed(graph, config)
        assert_intact(memory, graph, config, seen, [model])
        summaries = [
            d for d in decisions(memory, graph, config) if d["kind"] in ("auto_compact", "rebuild")
        ]
        values = graph.get_state(config).values
    assert summary_model.prompts and summaries, "the summarizer was never asked"
    for d in summaries:  # the report says the fallback wrote it, and why
        assert d["detail"]["source"] == "fallback", d
        assert SUMMARIZER_FAULTS[fault] in d["detail"]["error"], d["detail"]["error"]
    summary = values["context_ledger"]["summary"]
    assert summary["source"] == "fallback"
    assert "<completed>" in summary["text"] and "<remaining>" in summary["text"]
    assert not any(bad in summary["text"] for bad in ("ConnectionError", "x" * 60, "???"))
    # Nothing left the live state without a summary covering it (and its dump).
    live = {m.id for m in values["messages"]}
    removed = set(seen.order) - live
    assert removed, "nothing was removed: the test proves nothing"
    archive = memory.archive_for(config)
    dumped = {
        m.id for ref in all_dump_refs(values["context_ledger"], archive) for m in archive.read(ref)
    }
    assert removed <= dumped


# --- 2. the archive fails ---------------------------------------------------------------------


async def test_archive_write_failure_removes_and_compacts_nothing(
    storage: CheckpointerBackend, mode: str
) -> None:
    """From turn 4 on every archive write fails: no compaction, no summary, no removal without
    its archive copy; each build says why it skipped, and the model calls still fit."""
    script = synthetic_script(turns=8, recall=False)
    backend = FaultyBackend()
    memory = ContextMemory(**summary_first(), archive=backend, remove_summarized=True)
    model = script.model()
    tools = script.tools()
    config = thread()
    inputs = inputs_of(script)
    healthy, broken = inputs[:3], inputs[3:]
    if mode == "sync":
        with storage.open() as saver:
            graph = hand_built(memory, model, tools).compile(checkpointer=saver)
            drive(graph, healthy, config)
            before = graph.get_state(config).values
            history_before = memory.get_full_history(graph, config)
            n_reports = len(memory.get_reports(graph, config))
            backend.fail_put = True
            drive(graph, broken, config)
    else:
        async with storage.aopen() as saver:
            graph = hand_built(memory, model, tools).compile(checkpointer=saver)
            await adrive(graph, healthy, config)
            before = (await graph.aget_state(config)).values
            history_before = await memory.aget_full_history(graph, config)
            n_reports = len(await memory.aget_reports(graph, config))
            backend.fail_put = True
            await adrive(graph, broken, config)
    backend.fail_put = False  # reads work; the views below read the archive
    with storage.open() as saver:
        graph = hand_built(memory, model, tools).compile(checkpointer=saver)
        seen = committed(graph, config)
        assert_intact(memory, graph, config, seen, [model])
        after = graph.get_state(config).values
        reports = memory.get_reports(graph, config)
    # Before the fault the archive was used (so the fault had something to break).
    assert before["context_ledger"]["summary"]["dump_refs"]
    # After it: no new dump, no compaction without a ref that restores, nothing removed.
    assert (
        after["context_ledger"]["summary"]["dump_refs"]
        == before["context_ledger"]["summary"]["dump_refs"]
    )
    live_before = {m.id for m in before["messages"]}
    live_after = {m.id for m in after["messages"]}
    new_ids = set(seen.order) - {m.id for m in history_before}
    assert new_ids, "the broken turns produced nothing"
    assert live_before | new_ids <= live_after, (
        "a message left the state while the archive was down"
    )
    later = reports[n_reports:]
    reasons = [
        str(d.detail.get("reason") or d.detail.get("archive_error") or "")
        for r in later
        for d in r.decisions
    ]
    assert any("archive write failed" in r or "insurance dump failed" in r for r in reasons)
    assert any("injected write fault" in r for r in reasons), reasons
    assert all(r.ok and r.tokens <= r.limit for r in reports)
    broken_kinds = {d.kind for r in later for d in r.decisions if "injected" not in str(d.detail)}
    assert "compact" not in broken_kinds and "auto_compact" not in broken_kinds, broken_kinds


def test_a_relative_archive_dir_survives_a_tool_changing_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ContextMemory(archive="relative/dir")` is resolved once, when the memory is made: an
    agent whose tools `cd` between turns still writes and reads the one archive it started
    with, and the full history restores from it byte for byte."""
    from langgraph.checkpoint.memory import InMemorySaver

    start, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(start)  # restored after the test
    memory = ContextMemory(**summary_first(), archive="run/archive")
    script = synthetic_script(turns=8, recall=False)
    model = script.model()
    graph = hand_built(memory, model, script.tools()).compile(checkpointer=InMemorySaver())
    config = thread()
    for n, user_input in enumerate(inputs_of(script)):
        os.chdir(elsewhere if n % 2 else start)  # what a `cd` in a shell tool does
        drive(graph, [user_input], config)
    seen = committed(graph, config)
    os.chdir(elsewhere)
    assert_intact(memory, graph, config, seen, [model])
    context = graph.get_state(config).values["context_ledger"]
    assert context["summary"]["dump_refs"], "the archive was not used"
    assert not (elsewhere / "run").exists(), "an entry was written under the new directory"
    assert any((start / "run" / "archive").rglob("*")), "nothing was archived where it began"


def test_archive_down_from_any_write_on_never_stops_the_run() -> None:
    """The archive goes down at each write of a run in turn (mid-build too: between a summary's
    dump and the removal dump, between compaction writes): every run still completes with
    valid prompts, removes nothing without its archive copy, and says why it skipped."""
    from langgraph.checkpoint.memory import InMemorySaver

    reference = reference_run()
    for down_from in range(1, reference["puts"] + 1):
        script = synthetic_script(turns=8, recall=False)
        backend = FaultyBackend()
        backend.fail_from_put = down_from
        process = Process(script, backend, InMemorySaver())
        drive(process.graph, inputs_of(script), CRASH_THREAD)
        assert backend.puts == down_from - 1, "the fault never fired"
        backend.fail_from_put = None
        seen = committed(process.graph, CRASH_THREAD)
        assert_intact(process.memory, process.graph, CRASH_THREAD, seen, [process.model])
        reasons = [
            str(d["detail"].get("reason") or d["detail"].get("archive_error"))
            for d in decisions(process.memory, process.graph, CRASH_THREAD)
        ]
        assert any("injected write fault" in r for r in reasons), down_from


async def test_archive_write_failure_without_room_raises_and_recovers(mode: str) -> None:
    """When only compaction could make the prompt fit and the archive is down, the build raises
    `ContextWindowExceededError` (its report names the failed write) before the model is
    called; the state is untouched, and once the archive is back the thread resumes."""
    from langgraph.checkpoint.memory import InMemorySaver

    script = long_turn_script(4, long_output=6_000, parallel=2)
    backend = FaultyBackend()
    backend.fail_put = True
    memory = ContextMemory(
        context_window_tokens=3_000,
        archive=backend,
        strategies=make_strategies(summarize=True, compaction=Compaction(keep_last=0)),
    )
    model = script.model()
    agent = create_agent(
        model,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config = thread()
    seen = Seen()
    with pytest.raises(ContextWindowExceededError) as caught:
        await run(mode, drive, adrive, agent, script.inputs, config, seen)
    report = caught.value.report
    assert not report.ok and report.tokens > report.limit
    skips = [d for d in report.decisions if d.kind == "skip"]
    assert skips and "archive write failed" in skips[0].detail["reason"]
    assert "injected write fault" in skips[0].detail["reason"]
    # The error itself says why, instead of suggesting the Compaction() already configured.
    assert "Skipped on the way: compaction: archive write failed" in str(caught.value)
    assert "add Compaction()" not in str(caught.value)
    assert all(d.kind != "compact" for d in report.decisions)
    answered = len(model.prompts)
    stuck = agent.get_state(config)
    assert stuck.next, "the failed model call should be the pending step"
    assert all(validate_messages(p, provider="all") == [] for p in model.prompts)

    backend.fail_put = False  # the archive is back: resume from the last checkpoint
    await run(mode, drive, adrive, agent, [None], config, seen)
    assert len(model.prompts) > answered and not agent.get_state(config).next
    assert_intact(memory, agent, config, committed(agent, config), [model])
    assert "compact" in {d["kind"] for d in decisions(memory, agent, config)}


async def test_archive_read_failure_is_a_clear_archive_error(mode: str) -> None:
    """With reads failing, restore and the strict full history raise `ArchiveError` naming the
    backend, the entry and the cause; the full history returns the live messages and names the
    unreadable dumps; `recall` answers with tool error text; the state is untouched."""
    from langgraph.checkpoint.memory import InMemorySaver

    script = synthetic_script(turns=8, recall=False)
    backend = FaultyBackend()
    memory = ContextMemory(**summary_first(), archive=backend, remove_summarized=True)
    model = script.model()
    graph = hand_built(memory, model, script.tools()).compile(checkpointer=InMemorySaver())
    config = thread()
    seen = drive(graph, inputs_of(script), config)
    values = graph.get_state(config).values
    ledger = values["context_ledger"]
    compaction = next(d for d in decisions(memory, graph, config) if d["kind"] == "compact")
    archived_id, ref = compaction["message_ids"][0], compaction["detail"]["refs"][0]
    assert ledger["summary"]["dump_refs"]

    backend.fail_get = True
    expected = r"FaultyBackend failed to read .*ConnectionError: .*injected read fault"
    call = {"type": "tool_call", "name": "recall", "args": {"ref": ref}, "id": "call-r1"}
    recall = memory.recall_tool()
    with pytest.raises(ArchiveError, match=expected) as caught:
        await run(
            mode, memory.get_full_history, memory.aget_full_history, graph, config, strict=True
        )
    # Without `strict`, what cannot be read hides nothing else: the live messages come back
    # and each unreadable dump is named with the error.
    partial = await run(mode, memory.get_full_history, memory.aget_full_history, graph, config)
    assert [encode_message(m) for m in partial] == [encode_message(m) for m in values["messages"]]
    index = ledger["summary"].get("dump_index")  # older dumps are listed there
    assert [r for r, _ in partial.unreadable] == [
        *([index] if index else []),
        *ledger["summary"]["dump_refs"],
    ]
    assert all("injected read fault" in reason for _, reason in partial.unreadable)
    for key in (ref, archived_id):
        with pytest.raises(ArchiveError, match=expected):
            await run(mode, memory.restore, memory.arestore, key, config)
    answer = await run(mode, recall.invoke, recall.ainvoke, call, config)
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert "recall failed" in str(answer.content) and "injected read fault" in str(answer.content)
    after = graph.get_state(config).values
    assert [encode_message(m) for m in after["messages"]] == [
        encode_message(m) for m in values["messages"]
    ]
    assert after["context_ledger"] == ledger

    backend.fail_get = False  # reads are back: nothing was lost
    assert_intact(memory, graph, config, seen, [model])


async def test_recall_in_a_run_with_an_unreadable_archive_is_a_tool_error(mode: str) -> None:
    """The agent calls `recall` while archive reads fail: it gets an error result it can act
    on, and the run goes on to its answer."""
    from langgraph.checkpoint.memory import InMemorySaver

    script = long_turn_script(10, recall=True)
    backend = FaultyBackend()
    backend.fail_get = True
    budget = ContextBudget(context_window_tokens=14_000, trigger=0.95, target=0.6)
    memory = ContextMemory(
        budget=budget, strategies=make_strategies(compaction=Compaction()), archive=backend
    )
    model = script.model()
    agent = create_agent(
        model,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config = thread()
    seen = await run(mode, drive, adrive, agent, script.inputs, config)
    recalled = [
        m for m in seen.messages.values() if isinstance(m, ToolMessage) and m.name == "recall"
    ]
    assert len(recalled) == 1 and recalled[0].status == "error"
    assert "recall failed" in str(recalled[0].content)
    assert "injected read fault" in str(recalled[0].content)
    final = agent.get_state(config).values["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    backend.fail_get = False
    assert_intact(memory, agent, config, seen, [model])


# --- 3. the process dies between the archive write and the checkpoint ---------------------------

CRASH_THREAD: RunnableConfig = {"configurable": {"thread_id": "t-crash"}}
"""One thread id for the reference run and every crashed run (so archive keys compare)."""


class Process:
    """One "process": a memory, a scripted model, a summarizer model and a compiled graph on
    the given checkpointer and archive backend. `crash` arms one way of dying."""

    def __init__(
        self,
        script: Script,
        backend: FaultyBackend,
        saver: Any,
        *,
        skip: int = 0,
        crash: str | None = None,
        at: int = 0,
        on_build: Callable[[int], None] | None = None,
    ) -> None:
        self.summary_model = summary_llm(die_at=at if crash == "summarizer" else None)
        cls = DyingSummarizer if crash == "after_summarizer" else Summarizer
        summarizer = cls(model=self.summary_model, timeout_seconds=None, retries=0)
        if crash == "after_summarizer":
            object.__setattr__(summarizer, "die_at", at)
        self.memory = ContextMemory(
            **summary_first(),
            archive=backend,
            summarizer=summarizer,
            remove_summarized=True,
        )
        self.model = script.model(
            skip=skip, usage_counter=self.memory.manager.token_counter, usage_scale=1.1
        )
        tools = script.tools()
        self.builds = self.checkpoints = 0
        inner = self.memory.node(tools=tools)

        def context(state: ContextState, config: RunnableConfig) -> dict[str, Any]:
            self.builds += 1
            if on_build is not None:
                on_build(self.builds)
            puts = backend.puts
            update: dict[str, Any] = inner.invoke(state, config)
            if crash == "node_return" and self.builds >= at and backend.puts > puts:
                msg = f"the process died in build #{self.builds}, before its update was saved"
                raise ProcessDied(msg)
            return update

        put = saver.put

        def counted_put(*args: Any, **kwargs: Any) -> Any:
            self.checkpoints += 1
            if crash == "checkpoint_put" and self.checkpoints == at:
                msg = f"the process died while writing checkpoint #{self.checkpoints}"
                raise ProcessDied(msg)
            return put(*args, **kwargs)

        saver.put = counted_put
        self.saver, self.original_put = saver, put
        node = RunnableLambda(context, name="context")
        self.graph = hand_built(self.memory, self.model, tools, context_node=node).compile(
            checkpointer=saver
        )
        if crash == "archive_put":
            backend.die_at_put = backend.puts + at

    def close(self) -> None:
        self.saver.put = self.original_put


def history_bytes(process: Process) -> list[bytes]:
    history = process.memory.get_full_history(process.graph, CRASH_THREAD)
    return [encode_message(m) for m in history]


def ai_replies(history: Sequence[BaseMessage]) -> int:
    """How many scripted AI turns a history holds (they are replayed in order)."""
    return sum(isinstance(m, AIMessage) for m in history)


_REFERENCE: dict[str, Any] = {}


def reference_run() -> dict[str, Any]:
    """The uninterrupted run every crashed run is compared with (computed once)."""
    if not _REFERENCE:
        from langgraph.checkpoint.memory import InMemorySaver

        script = synthetic_script(turns=8, recall=False)
        backend = FaultyBackend()
        process = Process(script, backend, InMemorySaver())
        drive(process.graph, inputs_of(script), CRASH_THREAD)
        kinds = {d["kind"] for d in decisions(process.memory, process.graph, CRASH_THREAD)}
        assert {"prune", "compact", "auto_compact", "rebuild"} <= kinds, kinds
        _REFERENCE.update(
            history=history_bytes(process),
            ledger=process.graph.get_state(CRASH_THREAD).values["context_ledger"],
            keys=set(backend.keys),
            puts=backend.puts,
            builds=process.builds,
            checkpoints=process.checkpoints,
            summaries=len(process.summary_model.prompts),
        )
    return _REFERENCE


def resume(process: Process, inputs: Sequence[Any], died_in: int) -> None:
    """Carry a thread on after its process died during turn `died_in`, as a caller would.

    Resume from the last checkpoint when it has a pending step; when the turn still has no
    final answer (its input never landed, or a torn checkpoint holds the input but no pending
    step), send the turn's input again: same message ids, so it replaces, never duplicates.
    Then the remaining turns.
    """
    graph = process.graph
    if graph.get_state(CRASH_THREAD).next:
        drive(graph, [None], CRASH_THREAD)
    live = graph.get_state(CRASH_THREAD).values.get("messages", [])
    answered = bool(live) and isinstance(live[-1], AIMessage) and not live[-1].tool_calls
    history = {m.id for m in process.memory.get_full_history(graph, CRASH_THREAD)}
    item = inputs[died_in]
    opening = item["messages"][-1] if isinstance(item, dict) else item
    if not answered or opening.id not in history:
        drive(graph, [item], CRASH_THREAD)
    drive(graph, inputs[died_in + 1 :], CRASH_THREAD)


CRASH_POINTS = {
    # where the process dies: which count of the reference run to die half-way through
    "archive_put": "puts",
    "summarizer": "summaries",
    "after_summarizer": "summaries",
    "node_return": "builds",
    "checkpoint_put": "checkpoints",
}


@pytest.mark.parametrize("crash", list(CRASH_POINTS))
def test_process_death_then_resume_loses_nothing(storage: CheckpointerBackend, crash: str) -> None:
    """The process dies mid-run; a new one resumes the thread from its last checkpoint.

    The resumed thread ends exactly as an uninterrupted run does: the same full history byte
    for byte, the same ledger, and the same archive entries (writes are content-addressed, so
    doing one again adds nothing).
    """
    reference = reference_run()
    script = synthetic_script(turns=8, recall=False)
    backend = FaultyBackend()
    at = reference[CRASH_POINTS[crash]] // 2 + 1
    inputs = inputs_of(script)
    died_in: int | None = None
    with storage.open() as saver:
        process = Process(script, backend, saver, crash=crash, at=at)
        for turn, item in enumerate(inputs):
            try:
                drive(process.graph, [item], CRASH_THREAD)
            except ProcessDied:
                died_in = turn
                break
        process.close()
    assert died_in is not None, f"the process never died ({crash} #{at})"
    assert backend.die_at_put is None

    # A new process on the same storage: resume the thread, then carry on with the turns.
    with storage.open() as saver:
        probe = Process(script, backend, saver)
        done = probe.memory.get_full_history(probe.graph, CRASH_THREAD)
        process = Process(script, backend, saver, skip=ai_replies(done))
        resume(process, inputs, died_in)
        seen = committed(process.graph, CRASH_THREAD)
        assert_intact(process.memory, process.graph, CRASH_THREAD, seen, [process.model])
        assert history_bytes(process) == reference["history"]
        assert process.graph.get_state(CRASH_THREAD).values["context_ledger"] == reference["ledger"]
        process.close()
    # Writes were done again after the crash, yet they added no entry: the archive holds
    # exactly the reference run's entries.
    assert backend.puts > reference["puts"]
    assert backend.keys == reference["keys"]


# --- 4. the PostgreSQL connection drops mid-run ------------------------------------------------


@pytest.mark.postgres
def test_postgres_connection_dropped_mid_run_then_resumes() -> None:
    """Mid-run, every connection of the thread's database is terminated from outside (the
    checkpointer's and the archive store's). The run fails with an error naming the lost
    connection; new connections resume the thread, which ends exactly as the reference run.

    With the env var set, an unreachable server fails this test (`fresh_database` raises).
    """
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from psycopg.conninfo import conninfo_to_dict

    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"set {POSTGRES_ENV} to run the Postgres tests")
    reference = reference_run()
    script = synthetic_script(turns=8, recall=False)
    inputs = inputs_of(script)
    at = reference["builds"] // 2 + 1
    with fresh_database(base) as uri:
        dbname = conninfo_to_dict(uri)["dbname"]
        killed: list[int] = []

        def kill_connections(build: int) -> None:
            if build != at or killed:
                return
            with psycopg.connect(uri, autocommit=True) as admin:
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (dbname,),
                ).fetchall()
            killed.append(len(rows))

        died_in: int | None = None
        with (
            PostgresSaver.from_conn_string(uri) as saver,
            PostgresStore.from_conn_string(uri) as store,
        ):
            saver.setup()
            store.setup()
            backend = FaultyBackend(store)
            process = Process(script, backend, saver, on_build=kill_connections)
            for turn, item in enumerate(inputs):
                try:
                    drive(process.graph, [item], CRASH_THREAD)
                except (psycopg.OperationalError, ArchiveError) as exc:
                    error, died_in = exc, turn
                    break
        assert killed and killed[0] >= 2, "the saver's and the store's connections were not cut"
        assert died_in is not None, "the run went on without its database"
        assert re.search(r"connection|terminat", str(error), re.IGNORECASE), error

        # New connections, a new process: resume from the last checkpoint and carry on.
        with (
            PostgresSaver.from_conn_string(uri) as saver,
            PostgresStore.from_conn_string(uri) as store,
        ):
            backend = FaultyBackend(store)
            probe = Process(script, backend, saver)
            done = probe.memory.get_full_history(probe.graph, CRASH_THREAD)
            process = Process(script, backend, saver, skip=ai_replies(done))
            resume(process, inputs, died_in)
            seen = committed(process.graph, CRASH_THREAD)
            assert_intact(process.memory, process.graph, CRASH_THREAD, seen, [process.model])
            assert history_bytes(process) == reference["history"]
            assert (
                process.graph.get_state(CRASH_THREAD).values["context_ledger"]
                == reference["ledger"]
            )
