"""Summaries prepared ahead (`langgraph_ctx.summaries.preparer`): taken at the trigger, never
mixed up."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.store.memory import InMemoryStore
from pydantic import PrivateAttr

from langgraph_ctx import ContextManager
from langgraph_ctx.archive import Archive, StoreBackend
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages import text_of
from langgraph_ctx.pipeline import BuildResult
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import SlidingWindow, default_strategies
from langgraph_ctx.strategies.ahead_span import span_digest
from langgraph_ctx.summaries.preparer import SpanToPrepare, SpanWanted, SummaryPreparer
from langgraph_ctx.summaries.summarizer import Summarizer
from langgraph_ctx.tokens import get_counter
from tests.conftest import call, summary_first_strategies

DELAY = 0.4


class SlowSummarizer(BaseChatModel):
    """Answers a four-section summary naming a digest of its input, after `delay` seconds."""

    delay: float = DELAY
    _inputs: list[str] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "slow-summary"

    @property
    def inputs(self) -> list[str]:
        return self._inputs

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        text = text_of(messages[-1])
        with self._lock:
            self._inputs.append(text)
        tag = hashlib.sha256(text.encode()).hexdigest()[:12]
        body = (
            f"<completed>\n- summarized input {tag}\n</completed>\n"
            "<remaining>\n- carry on\n</remaining>\n<current_state>\n- fine\n</current_state>\n"
            "<notes>\n</notes>"
        )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(body))])

    def _generate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
        time.sleep(self.delay)
        return self._answer(messages)

    async def _agenerate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
        await asyncio.sleep(self.delay)
        return self._answer(messages)


def _old_budget(window: int) -> ContextBudget:
    """The budget before targets above the fixed part and the cache-priced trigger: edits
    start at the trigger itself, and the cuts are shares of the whole limit."""
    return ContextBudget(
        context_window_tokens=window,
        target=0.25,
        summary_target=0.1,
        targets_above_fixed=False,
        cache_price=None,
    )


def _manager(
    model: SlowSummarizer, *, thread: str = "t", prepare: bool = True, **options: Any
) -> ContextManager:
    # One token per message: a 40-message window, trigger at 36, preparing from 34 (or
    # three calls of growth before the trigger). Prune, compact, then summarize (the list
    # before excerpts and shortened turns) with the trigger where the budget puts it: every
    # cut these tests wait for is a summary, at a place they can count to.
    return ContextManager(
        budget=_old_budget(40),
        token_counter=len,
        strategies=summary_first_strategies(),
        archive=Archive(StoreBackend(InMemoryStore()), thread_id=thread),
        summarizer=Summarizer(model=model),
        prepare_summaries=prepare,
        **options,
    )


def _step(prefix: str, k: int, text: str | None = None) -> list[BaseMessage]:
    call_id = f"{prefix}c{k}"
    return [
        AIMessage("", id=f"{prefix}ai{k}", tool_calls=[{"name": "ls", "args": {}, "id": call_id}]),
        ToolMessage(
            text or f"{prefix} output {k}", tool_call_id=call_id, name="ls", id=f"{prefix}t{k}"
        ),
    ]


def _start(prefix: str = "") -> list[BaseMessage]:
    return [SystemMessage("Be brief.", id="sys"), HumanMessage(f"{prefix} task", id=f"{prefix}h")]


def _edit_output(messages: list[BaseMessage], message_id: str) -> None:
    """Edit a tool output of the span in place (same id, new text), as `update_state` may."""
    at = next(i for i, m in enumerate(messages) if m.id == message_id)
    old = messages[at]
    assert isinstance(old, ToolMessage)
    messages[at] = old.model_copy(update={"content": "EDITED output"})


def _kinds(result: BuildResult) -> dict[str, Any]:
    return {d.kind: d for d in result.report.decisions}


async def _settle(manager: ContextManager, mode: str) -> None:
    """Let the background preparation finish (a worker thread, or a task of this loop)."""
    assert manager.preparer is not None
    if mode == "sync":
        assert manager.preparer.join(5)
    else:
        for _ in range(100):
            await asyncio.sleep(0.05)
            with manager.preparer._lock:
                preps = list(manager.preparer._preps.values())
            if all(p.done.is_set() for p in preps):
                return


async def _grow_until(
    manager: ContextManager,
    messages: list[BaseMessage],
    state: Any,
    kind: str,
    mode: str,
    prefix: str = "",
) -> tuple[BuildResult, Any, float]:
    """Add tool steps, building after each, until a build records `kind`."""
    k = sum(isinstance(m, ToolMessage) for m in messages)
    for _ in range(60):
        messages += _step(prefix, k)
        k += 1
        started = time.perf_counter()
        result = await call(manager, "build", messages, state=state, mode=mode)
        took = time.perf_counter() - started
        state = result.state
        if kind in _kinds(result):
            return result, state, took
    raise AssertionError(f"no {kind} decision")


def test_prepare_at_is_checked() -> None:
    with pytest.raises(ConfigError, match="below the budget's trigger"):
        ContextManager(
            context_window_tokens=1_000,
            strategies=[SlidingWindow(summarize=True, prepare_at=0.95)],
        )
    with pytest.raises(ConfigError, match="between 0 and the budget's trigger"):
        SlidingWindow(summarize=True, prepare_at=1.5)
    with pytest.raises(ConfigError, match="needs a window that summarizes"):
        ContextManager(context_window_tokens=1_000, prepare_summaries=True)
    manager = ContextManager(
        context_window_tokens=1_000, strategies=default_strategies(), prepare_summaries=True
    )
    window = next(s for s in manager.strategies if isinstance(s, SlidingWindow))
    assert window.prepare_at == 0.85 and manager.preparer is not None
    assert ContextManager(context_window_tokens=1_000).preparer is None


async def test_the_trigger_takes_the_prepared_summary_without_waiting(mode: str) -> None:
    model = SlowSummarizer()
    manager = _manager(model)
    messages = _start()
    prepared, state, _ = await _grow_until(manager, messages, None, "prepare", mode)
    entry = state["ahead"]
    assert entry["digest"] == _kinds(prepared)["prepare"].detail["digest"]
    await _settle(manager, mode)
    assert len(model.inputs) == 1  # summarized in the background
    result, state, took = await _grow_until(manager, messages, state, "auto_compact", mode)
    decision = _kinds(result)["auto_compact"]
    assert decision.detail["ahead"] == "prepared" and decision.detail["dump_ref"]
    assert took < DELAY / 2 and len(model.inputs) == 1  # no summarizer call in the build
    assert state["ahead"] is None
    assert len(decision.message_ids) == entry["count"]


async def test_the_same_prompt_with_the_preparation_lost_on_restart(mode: str) -> None:
    model = SlowSummarizer()
    manager = _manager(model)
    messages = _start()
    _, state, _ = await _grow_until(manager, messages, None, "prepare", mode)
    await _settle(manager, mode)
    # The same state, a new process: the ledger names the span, the outcome is gone.
    restarted = _manager(SlowSummarizer(), prepare=True)
    messages += _step("", 100)
    overflow = [*messages, *(m for k in range(101, 104) for m in _step("", k))]
    warm = await call(manager, "build", overflow, state=state, mode=mode)
    cold = await call(restarted, "build", overflow, state=state, mode=mode)
    assert _kinds(warm)["auto_compact"].detail["ahead"] == "prepared"
    assert _kinds(cold)["auto_compact"].detail["ahead"] == "not ready: summarized now"
    assert [text_of(m) for m in warm.messages] == [text_of(m) for m in cold.messages]
    assert warm.state["summary"]["text"] == cold.state["summary"]["text"]


async def test_a_changed_span_is_not_used(mode: str) -> None:
    model = SlowSummarizer()
    manager = _manager(model)
    messages = _start()
    _, state, _ = await _grow_until(manager, messages, None, "prepare", mode)
    await _settle(manager, mode)
    _edit_output(messages, "t2")
    overflow = [*messages, *(m for k in range(101, 104) for m in _step("", k))]
    result = await call(manager, "build", overflow, state=state, mode=mode)
    kinds = _kinds(result)
    assert kinds["skip"].detail["reason"] == "stale: the span changed"
    assert "ahead" not in kinds["auto_compact"].detail
    assert "EDITED output" in model.inputs[-1] and len(model.inputs) == 2
    assert result.state["ahead"] is None


async def test_an_edit_before_the_trigger_prepares_again(mode: str) -> None:
    model = SlowSummarizer()
    manager = _manager(model)
    messages = _start()
    first, state, _ = await _grow_until(manager, messages, None, "prepare", mode)
    await _settle(manager, mode)
    _edit_output(messages, "t2")
    again = await call(manager, "build", messages, state=state, mode=mode)
    assert _kinds(again)["prepare"].detail["digest"] != _kinds(first)["prepare"].detail["digest"]
    await _settle(manager, mode)
    assert "EDITED output" in model.inputs[-1] and len(model.inputs) == 2


def test_a_shared_manager_keeps_threads_apart() -> None:
    model = SlowSummarizer(delay=0.2)
    manager = _manager(model)
    states: dict[str, Any] = {}
    histories = {p: _start(p) for p in ("a", "b")}
    for prefix in histories:  # both threads reach the preparation, one after the other
        archive = Archive(StoreBackend(InMemoryStore()), thread_id=prefix)
        k = 0
        while "prepare" not in states.get(prefix, {}).get("kinds", ()):
            histories[prefix] += _step(prefix, k)
            k += 1
            result = manager.build(
                histories[prefix], state=states.get(prefix, {}).get("state"), archive=archive
            )
            states[prefix] = {
                "state": result.state,
                "kinds": _kinds(result),
                "archive": archive,
                "k": k,
            }
    assert manager.preparer is not None and manager.preparer.join(5)
    assert len(model.inputs) == 2
    for prefix, other in (("a", "b"), ("b", "a")):
        entry = states[prefix]["state"]["ahead"]
        k = states[prefix]["k"]
        overflow = [*histories[prefix], *(m for j in range(k, k + 4) for m in _step(prefix, j))]
        result = manager.build(
            overflow, state=states[prefix]["state"], archive=states[prefix]["archive"]
        )
        decision = _kinds(result)["auto_compact"]
        assert decision.detail["ahead"] == "prepared"
        assert entry["start_id"].startswith(prefix)
        assert all(i.startswith(prefix) for i in decision.message_ids)
        assert f"{other} output" not in result.state["summary"]["text"]
    assert len(model.inputs) == 2


def test_the_preparer_runs_one_preparation_per_thread() -> None:
    started = threading.Event()
    release = threading.Event()

    def plan(messages: list[BaseMessage], previous: str | None) -> Any:
        started.set()
        release.wait(5)
        return f"summary of {len(messages)}"
        yield  # a plan

    preparer = SummaryPreparer()
    one = (HumanMessage("x", id="x"),)
    assert preparer.start(SpanToPrepare("t", "d1", plan, one, None))
    assert started.wait(5)
    assert not preparer.start(SpanToPrepare("t", "d2", plan, one, None))  # busy
    assert preparer.start(SpanToPrepare("u", "d2", plan, one, None))  # other thread
    assert preparer.wait_prepared(SpanWanted("t", "d2", 0.01)) is None  # not this span
    assert preparer.wait_prepared(SpanWanted("t", "d1", 0.01)) is None  # still running
    release.set()
    outcome: Any = preparer.wait_prepared(SpanWanted("t", "d1", 5))  # the fake plan's str
    assert outcome == "summary of 1"
    assert preparer.pending("t") is None  # taken once
    assert span_digest(None, one) != span_digest("previous", one)


async def test_redaction_and_the_dump_apply_to_the_prepared_summary(mode: str) -> None:
    model = SlowSummarizer()
    archive = Archive(StoreBackend(InMemoryStore()), thread_id="r")
    manager = _manager(model, redact=lambda text: text.replace("SECRET", "***"))
    manager.archive = archive
    messages = _start()
    messages += _step("", 0, "the key is SECRET")
    _, state, _ = await _grow_until(manager, messages, None, "prepare", mode)
    await _settle(manager, mode)
    result, _, _ = await _grow_until(manager, messages, state, "auto_compact", mode)
    decision = _kinds(result)["auto_compact"]
    assert decision.detail["ahead"] == "prepared"
    assert all("SECRET" not in text for text in model.inputs)
    dumped = archive.read(decision.detail["dump_ref"])
    texts = [text_of(m) for m in dumped]
    assert "the key is ***" in texts and not any("SECRET" in t for t in texts)


def _tokens_manager(model: SlowSummarizer) -> ContextManager:
    """Real token counts (gpt-4o), so compaction brings a large output back under the trigger."""
    return ContextManager(
        budget=_old_budget(3_000),
        token_counter=get_counter("gpt-4o"),
        strategies=summary_first_strategies(),
        archive=Archive(StoreBackend(InMemoryStore()), thread_id="t"),
        summarizer=Summarizer(model=model),
        prepare_summaries=True,
    )


def _log_step(k: int, *, large: bool = False) -> list[BaseMessage]:
    """A tool step of about 140 tokens, or one of about 2,400 (`large`)."""
    words = " ".join(f"w{i}" for i in range(60))
    return _step("", k, f"log line {k} " * 600 if large else f"log line {k} {words}")


async def test_a_jump_over_the_trigger_with_nothing_prepared_is_cut_in_that_build(
    mode: str,
) -> None:
    """A large output jumps over the trigger before anything was prepared; compaction brings
    the prompt back under it, and the window cuts and summarizes in that build, as without
    preparing: that build's edits broke the cached prefix already, and a cut deferred to a
    later call broke it a second time."""
    model = SlowSummarizer(delay=0.05)
    manager = _tokens_manager(model)
    messages, state = _start(), None
    for k in range(5):  # well under the point where summaries are prepared
        messages += _log_step(k)
        state = (await call(manager, "build", messages, state=state, mode=mode)).state
    messages += _log_step(5, large=True)
    jumped = await call(manager, "build", messages, state=state, mode=mode)
    kinds = _kinds(jumped)
    assert jumped.report.tokens_in > manager.budget.trigger_tokens
    assert "compact" in kinds and "prepare" not in kinds
    assert "ahead" not in kinds["auto_compact"].detail  # summarized in the call
    assert len(model.inputs) == 1 and jumped.state["ahead"] is None


async def test_a_span_prepared_in_the_last_call_is_taken_where_the_prompt_passed_the_trigger(
    mode: str,
) -> None:
    """Prepared in the call before a jump over the trigger, the summary is taken in the build
    whose compaction brought the prompt back under it (waiting for it within the bound), so
    the cached prefix breaks once."""
    model = SlowSummarizer(delay=0.05)
    manager = _tokens_manager(model)
    messages, state, k = _start(), None, 0
    while state is None or not state["ahead"]:  # log steps until a summary is prepared
        messages += _log_step(k)
        k += 1
        result = await call(manager, "build", messages, state=state, mode=mode)
        assert "auto_compact" not in _kinds(result)
        state = result.state
    span = state["ahead"]["count"]
    await asyncio.sleep(0.01)  # the agent's model call: the preparation starts, still runs
    messages += _log_step(k, large=True)
    jumped = await call(manager, "build", messages, state=state, mode=mode)
    kinds = _kinds(jumped)
    assert jumped.report.tokens_in > manager.budget.trigger_tokens
    assert kinds["auto_compact"].detail["ahead"] == "prepared"
    assert len(kinds["auto_compact"].message_ids) == span
    assert len(model.inputs) == 1 and jumped.state["ahead"] is None


async def test_a_long_run_summarizes_as_often_as_without_preparing(mode: str) -> None:
    """80 tool steps in a small window: the window can keep only the task and the newest step,
    so each preparation's span takes the newest step too (`after`: by the trigger it is not
    the newest any more). The prepared summaries are taken where the window would summarize
    without preparing, every preparation is used, and the run summarizes as often as without
    preparing (before, the step prepared beside stayed in the window with what came after it:
    5 summaries against 4)."""

    async def run(prepare: bool) -> tuple[list[int], list[dict[str, Any]], SlowSummarizer]:
        model = SlowSummarizer(delay=0.0)
        manager = _tokens_manager(model)
        if not prepare:
            manager = ContextManager(
                budget=manager.budget,
                token_counter=get_counter("gpt-4o"),
                strategies=summary_first_strategies(),
                archive=Archive(StoreBackend(InMemoryStore()), thread_id="t"),
                summarizer=Summarizer(model=model),
            )
        messages, state = _start(), None
        cuts: list[int] = []
        entries: list[dict[str, Any]] = []
        for k in range(80):
            messages += _log_step(k)
            result = await call(manager, "build", messages, state=state, mode=mode)
            state = result.state
            kinds = _kinds(result)
            if "prepare" in kinds:
                entries.append(dict(state["ahead"]))
            if "auto_compact" in kinds:
                assert not prepare or kinds["auto_compact"].detail["ahead"] == "prepared"
                cuts.append(k)
            if prepare:
                await _settle(manager, mode)
        return cuts, entries, model

    off, _, off_model = await run(False)
    on, entries, on_model = await run(True)
    assert len(on) == len(off) == 4
    assert all(a <= b for a, b in zip(on, off, strict=True))  # never later than without
    assert len(entries) == len(on) and all(e.get("after") for e in entries)
    assert len(on_model.inputs) == len(off_model.inputs) == 4  # nothing prepared twice


async def test_a_span_with_the_newest_step_keeps_the_task_pinned(mode: str) -> None:
    """The window holds the turn's task (a long one) and its first step, near the trigger: the
    preparation's span is that step alone (`after`), the task pinned, as the window keeps it
    when it moves past the step; with the task in the span the record never matched."""
    manager = _tokens_manager(SlowSummarizer(delay=0.0))
    task = HumanMessage("task " + " ".join(f"t{i}" for i in range(1_150)), id="h")
    messages = [SystemMessage("Be brief.", id="sys"), task, *_log_step(0)]
    result = await call(manager, "build", messages, state=None, mode=mode)
    assert "prepare" in _kinds(result)
    entry = result.state["ahead"]
    assert entry["after"] and entry["start_id"] == "t0"
    assert entry["pin_id"] == "h" and entry["count"] == 2


async def test_taking_a_prepared_summary_does_not_read_the_span_again(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summarizer's reading of a span (`Reading.of`: long outputs as their used lines) is
    worked out when the preparation starts; the build that takes the prepared summary does
    not work it out again (it was most of that build's time)."""
    from langgraph_ctx.strategies import Compaction, DropMemory, PruneToolOutputs
    from langgraph_ctx.strategies.summaries import Reading

    reads: list[int] = []
    original = Reading.of

    def counted(self: Reading, view: Any, messages: Any) -> Any:
        reads.append(len(messages))
        return original(self, view, messages)

    monkeypatch.setattr(Reading, "of", counted)
    model = SlowSummarizer()
    manager = ContextManager(
        budget=_old_budget(40),
        token_counter=len,
        strategies=[
            DropMemory(),
            PruneToolOutputs(),
            Compaction(on_arrival=0.1),
            SlidingWindow(summarize=True, summarize_shown=True),
        ],
        archive=Archive(StoreBackend(InMemoryStore()), thread_id="t"),
        summarizer=Summarizer(model=model),
        prepare_summaries=True,
    )
    messages = _start()
    _, state, _ = await _grow_until(manager, messages, None, "prepare", mode)
    assert len(reads) == 1  # read once, for the preparation
    await _settle(manager, mode)
    result, state, _ = await _grow_until(manager, messages, state, "auto_compact", mode)
    assert _kinds(result)["auto_compact"].detail["ahead"] == "prepared"
    assert len(reads) == 1 and len(model.inputs) == 1  # taken: neither read nor summarized
