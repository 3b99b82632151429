"""The ledger in checkpointed state: restarts, user edits, time travel, interrupts, strict
msgpack, and the after-turn hint rebuild, on every checkpointer backend.

Scripts carry deterministic message ids, so a run that restarts between turns can be compared
byte for byte with one that never stopped.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from langgraph_ctx import Compaction, ContextMemory
from langgraph_ctx.archive import encode_message
from langgraph_ctx.messages import get_tag, validate_messages
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.summaries.rebuild import HINT_NOTE
from tests.conftest import make_strategies, summary_first_strategies
from tests.fakes import ScriptedChatModel
from tests.integration._agents import (
    Script,
    Seen,
    check_history,
    check_ledger,
    check_prompts,
    drive,
    long_turn_script,
    report_kinds,
    synthetic_script,
)
from tests.integration.conftest import CheckpointerBackend


def agent_for(
    memory: ContextMemory, model: ScriptedChatModel, script: Script, saver: Any, **kwargs: Any
) -> Any:
    middleware = [memory.middleware(), *kwargs.pop("middleware", [])]
    return create_agent(
        model,
        script.tools(),
        system_prompt=script.system,
        middleware=middleware,
        checkpointer=saver,
        **kwargs,
    )


def thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:12]}"}}


def encoded(prompts: list[list[BaseMessage]]) -> list[list[bytes]]:
    return [[encode_message(m) for m in p] for p in prompts]


# --- restart between turns -------------------------------------------------------------------


def test_restart_between_turns_continues_the_ledger(
    checkpointer_backend: CheckpointerBackend, tmp_path: Path
) -> None:
    """A new process per turn (new saver, graph, memory and model) sends the same prompts."""
    if not checkpointer_backend.persistent:
        pytest.skip("an in-memory checkpointer does not survive a restart")
    script = synthetic_script(turns=8)
    config = thread()  # the same thread id in both runs, so archive refs are equal too

    # The reference: one uninterrupted run on its own storage.
    from langgraph.checkpoint.memory import InMemorySaver

    # Prune, compact, then summarize (the list before excerpts and shortened turns): the run
    # reaches every kind of ledger entry (with the defaults the hint rebuild comes first).
    ref_memory = ContextMemory(
        context_window_tokens=5_000,
        archive=tmp_path / "ref-archive",
        strategies=summary_first_strategies(),
    )
    ref_model = script.model(usage_counter=ref_memory.manager.token_counter)
    ref_agent = agent_for(ref_memory, ref_model, script, InMemorySaver())
    drive(ref_agent, script.inputs, config)
    kinds = report_kinds(ref_agent, ref_memory, config)
    assert {"prune", "compact", "auto_compact", "rebuild"} <= kinds, kinds

    # The same run, restarted before every turn.
    prompts: list[list[BaseMessage]] = []
    seen = Seen()
    for human in script.inputs:
        memory = ContextMemory(
            context_window_tokens=5_000,
            archive=tmp_path / "archive",
            strategies=summary_first_strategies(),
        )
        model = script.model(skip=len(prompts), usage_counter=memory.manager.token_counter)
        with checkpointer_backend.open() as saver:
            agent = agent_for(memory, model, script, saver)
            drive(agent, [human], config, seen)
            check_prompts(model, memory)
            prompts += model.prompts
            ledger = agent.get_state(config).values["context_ledger"]
    assert encoded(prompts) == encoded(ref_model.prompts)
    assert ledger == ref_agent.get_state(config).values["context_ledger"]

    with checkpointer_backend.open() as saver:
        agent = agent_for(memory, script.model(), script, saver)
        check_history(memory, agent, config, seen)
        check_ledger(memory, agent, config)


# --- user edits through update_state ---------------------------------------------------------


def test_update_state_edits_reach_the_next_prompt(checkpointer: Any) -> None:
    """Mid-turn (paused before the tools run), the user edits a compacted output and the task."""
    script = long_turn_script(10)
    # Compaction without summaries: compacted outputs stay in view while the turn goes on
    # (marks 0.95/0.6: a cut to 60% leaves room for them next to the newest blocks).
    budget = ContextBudget(context_window_tokens=14_000, trigger=0.95, target=0.6)
    memory = ContextMemory(
        budget=budget, strategies=make_strategies(compaction=Compaction()), archive=InMemoryStore()
    )
    model = script.model()
    agent = agent_for(memory, model, script, checkpointer, interrupt_before=["tools"])
    config = thread()
    seen = drive(agent, script.inputs, config)
    while not any(get_tag(m).get("compacted") for m in model.prompts[-1]):
        assert agent.get_state(config).next, "the turn ended before anything was compacted"
        drive(agent, [None], config, seen)
    values = agent.get_state(config).values
    by_id = {m.id: m for m in values["messages"]}
    compacted_id = next(m.id for m in model.prompts[-1] if get_tag(m).get("compacted"))
    assert compacted_id in values["context_ledger"]["compacted"]
    task = values["messages"][0]
    edited = by_id[compacted_id].model_copy(update={"content": "EDITED: the file is empty."})
    rewritten = task.model_copy(update={"content": "Actually, only list the files."})
    agent.update_state(config, {"messages": [edited, rewritten]})

    calls = len(model.prompts)
    drive(agent, [None], config, seen)
    check_prompts(model, memory)
    prompt = {m.id: m for m in model.prompts[calls]}
    # The model sees the messages as the user left them, not placeholders of the old text.
    assert prompt[compacted_id].content == "EDITED: the file is empty."
    assert prompt[task.id].content == "Actually, only list the files."
    ledger = agent.get_state(config).values["context_ledger"]
    assert compacted_id not in ledger["compacted"]
    while agent.get_state(config).next:
        drive(agent, [None], config, seen)
    check_prompts(model, memory)
    seen.messages[str(compacted_id)] = edited
    seen.messages[str(task.id)] = rewritten
    check_history(memory, agent, config, seen)
    check_ledger(memory, agent, config)


def test_update_state_removals_keep_the_ledger_consistent(checkpointer: Any) -> None:
    """At a turn boundary the user deletes an old tool exchange the ledger refers to."""
    script = synthetic_script(turns=8, recall=False)
    # The ledger names only what the prompt shows, so the edits must leave pruned and
    # compacted outputs in view: marks 0.95/0.7, a cut to 70% that pruning the first turn
    # cannot reach alone and compacting one more output does, with no window move.
    # Prune, compact, then summarize (the list before excerpts and shortened turns): pruned
    # outputs are what the user deletes.
    memory = ContextMemory(
        budget=ContextBudget(context_window_tokens=5_000, trigger=0.95, target=0.7),
        archive=InMemoryStore(),
        strategies=summary_first_strategies(),
    )
    model = script.model()
    agent = agent_for(memory, model, script, checkpointer)
    config = thread()
    seen, done = Seen(), 0
    # Turn by turn until the ledger refers to pruned and compacted outputs.
    while not (
        (ledger := agent.get_state(config).values.get("context_ledger") or {}).get("pruned")
        and ledger.get("compacted")
    ):
        assert done < len(script.inputs) - 2, "nothing was pruned and compacted in time"
        drive(agent, script.inputs[done : done + 1], config, seen)
        done += 1
    values = agent.get_state(config).values
    # The whole exchange of the first pruned output: the AI call and all of its results.
    target = next(iter(ledger["pruned"]))
    messages = values["messages"]
    at = next(i for i, m in enumerate(messages) if m.id == target)
    call = next(m for m in reversed(messages[:at]) if isinstance(m, AIMessage) and m.tool_calls)
    call_ids = {tc["id"] for tc in call.tool_calls}
    doomed = [call.id] + [m.id for m in messages if getattr(m, "tool_call_id", None) in call_ids]
    agent.update_state(config, {"messages": [RemoveMessage(id=i) for i in doomed]})

    live = memory.get_live_context(agent, config)
    assert validate_messages([SystemMessage(script.system or ""), *live.messages]) == []
    assert not set(doomed) & {m.id for m in live.messages}
    drive(agent, script.inputs[done:], config, seen)
    check_prompts(model, memory)
    ledger = agent.get_state(config).values["context_ledger"]
    assert not set(doomed) & set(ledger["pruned"]) and not set(doomed) & set(ledger["compacted"])
    assert (ledger.get("summary") or {}).get("covered_last") not in set(doomed)
    check_ledger(memory, agent, config)
    # Everything else the thread held is still in the full history (summarized or not).
    history_ids = {m.id for m in memory.get_full_history(agent, config)}
    assert set(seen.order) - set(doomed) <= history_ids


# --- time travel -------------------------------------------------------------------------------


def test_fork_from_an_earlier_checkpoint_stays_consistent(checkpointer: Any) -> None:
    script = synthetic_script(turns=8, recall=False)
    # Marks 0.95/0.6: the final window still shows compacted outputs next to the summary
    # (5,000 tokens for the messages, about 100 for the replay tools' typed schemas).
    # Prune, compact, then summarize (the list before excerpts and shortened turns): the
    # short run reaches a summary.
    memory = ContextMemory(
        budget=ContextBudget(context_window_tokens=5_100, trigger=0.95, target=0.6),
        archive=InMemoryStore(),
        strategies=summary_first_strategies(),
    )
    agent = agent_for(memory, script.model(), script, checkpointer)
    config = thread()
    drive(agent, script.inputs, config)
    history = list(agent.get_state_history(config))
    final = history[0].values["context_ledger"]
    assert final["compacted"] and final["summary"]

    # Turn boundaries (a finished turn: nothing left to run), oldest first.
    ends = [s for s in reversed(history) if not s.next and s.values.get("messages")]
    assert len(ends) == len(script.inputs)
    forks = [ends[1], ends[len(ends) // 2]]  # before any compaction, and in the middle
    for n, snapshot in enumerate(forks):
        fork_script = synthetic_script(turns=2, seed=10 + n, recall=False, prefix=f"fork{n}-")
        model = fork_script.model()
        fork_agent = agent_for(memory, model, fork_script, checkpointer)
        seen = Seen()
        seen.add(snapshot.values)
        drive(fork_agent, fork_script.inputs[:1], snapshot.config, seen)  # the fork
        drive(fork_agent, fork_script.inputs[1:], config, seen)  # continues at its head
        check_prompts(model, memory)
        latest = fork_agent.get_state(config)
        assert latest.values["messages"][-1].id.startswith(f"fork{n}-")
        # The fork's ledger names only messages of the fork.
        check_ledger(memory, fork_agent, config)
        check_history(memory, fork_agent, config, seen)
        # The main line is still intact and consistent at its own last checkpoint.
        main = agent.get_state(history[0].config)
        assert main.values["context_ledger"] == final

    # Replay from the middle of a turn (tool calls pending): the run finishes validly.
    mid = next(s for s in reversed(history) if "tools" in s.next and len(s.values["messages"]) > 12)
    made = sum(isinstance(m, AIMessage) for m in mid.values["messages"])
    model = script.model(skip=made)
    replay_agent = agent_for(memory, model, script, checkpointer)
    seen = Seen()
    seen.add(mid.values)
    drive(replay_agent, [None], mid.config, seen)
    check_prompts(model, memory)
    check_ledger(memory, replay_agent, config)
    check_history(memory, replay_agent, config, seen)


# --- human in the loop -------------------------------------------------------------------------


def test_interrupt_with_pending_tool_calls_is_never_compressed(checkpointer: Any) -> None:
    script = synthetic_script(turns=6, recall=False)
    memory = ContextMemory(context_window_tokens=6_000, archive=InMemoryStore())
    # The provider reports 12x our count: every call is over the rebuild threshold.
    model = script.model(usage_counter=memory.manager.token_counter, usage_scale=12.0)
    hitl = HumanInTheLoopMiddleware(interrupt_on={"run_tests": True})
    agent = agent_for(memory, model, script, checkpointer, middleware=[hitl])
    config = thread()
    seen = Seen()
    interrupts = 0
    for human in script.inputs:
        drive(agent, [human], config, seen)
        state = agent.get_state(config)
        while state.next:
            interrupts += 1
            values = state.values
            pending = values["messages"][-1]
            assert isinstance(pending, AIMessage) and pending.tool_calls
            assert pending.usage_metadata is not None
            assert pending.usage_metadata["input_tokens"] > 0.8 * 6_000  # a rebuild is due...
            # ...but the turn is not finished: the after-turn step must not compress it.
            update = memory.after_turn_node().invoke(values, config)
            assert "messages" not in update or not any(
                isinstance(m, RemoveMessage) for m in update["messages"]
            )
            skip = update["context_ledger"]["last_report"]["decisions"][-1]
            assert skip["kind"] == "skip" and "pending tool calls" in skip["detail"]["reason"]
            assert all(m.id in {v.id for v in values["messages"]} for m in [pending])
            requests = state.interrupts[0].value["action_requests"]
            decisions = [{"type": "approve"}] * len(requests)
            drive(agent, [Command(resume={"decisions": decisions})], config, seen)
            state = agent.get_state(config)
        # Each finished turn was rebuilt: live history cleared but for the last request and its
        # answer, and the hint waits for the next call.
        live = state.values["messages"]
        assert [m.type for m in live] == ["human", "ai"] and not live[-1].tool_calls
        assert state.values["context_ledger"]["hint"]["text"]
    assert interrupts >= 2
    check_prompts(model, memory)
    assert "rebuild" in report_kinds(agent, memory, config)
    check_history(memory, agent, config, seen)
    check_ledger(memory, agent, config)


# --- LANGGRAPH_STRICT_MSGPACK ---------------------------------------------------------------


def strict_msgpack_child(backend: str, target: str | None) -> None:
    """Run in a fresh interpreter started with LANGGRAPH_STRICT_MSGPACK=true.

    langgraph reads the variable once, at import (and builds the savers' default serializer
    then), so setting it inside a running test process would not make anything strict.
    """
    from langgraph.checkpoint.serde import _msgpack
    from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener

    assert _msgpack.STRICT_MSGPACK_ENABLED, "the child did not start in strict mode"
    events: list[dict[str, Any]] = []
    register_serde_event_listener(lambda event: events.append(dict(event)))
    storage = CheckpointerBackend(backend, target)
    if backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        storage = CheckpointerBackend("memory", _memory=InMemorySaver())
    # Fourteen turns: the defaults (excerpts, shortened turns) hold a shorter run without a
    # summary, and the summary's part of the ledger should make the round trip too.
    script = synthetic_script(turns=14)
    memory = ContextMemory(context_window_tokens=5_000, archive=InMemoryStore())
    config = thread()
    with storage.open() as saver:
        model = script.model()
        agent = agent_for(memory, model, script, saver)
        assert agent.checkpointer.serde._allowed_msgpack_modules is not True  # strict
        seen = drive(agent, script.inputs, config)
        check_prompts(model, memory)
    with storage.open() as saver:  # read everything back through the strict serializer
        agent = agent_for(memory, script.model(), script, saver)
        values = agent.get_state(config).values
        assert values["context_ledger"]["summary"] and values["context_ledger"]["last_report"]
        check_history(memory, agent, config, seen)
        check_ledger(memory, agent, config)
        kinds = report_kinds(agent, memory, config)
        assert {"compact", "auto_compact"} <= kinds, kinds
    blocked = [e for e in events if "blocked" in str(e.get("kind"))]
    assert blocked == [], blocked
    print("STRICT-OK", len(seen.order), sorted(kinds))


def test_strict_msgpack_round_trips_the_ledger(checkpointer_backend: CheckpointerBackend) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    code = (
        "from tests.integration.test_persistence import strict_msgpack_child; "
        f"strict_msgpack_child({checkpointer_backend.name!r}, {checkpointer_backend.target!r})"
    )
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning:langgraph_ctx", "-c", code],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "STRICT-OK" in done.stdout
    assert "Blocked deserialization" not in done.stderr, done.stderr[-2000:]


# --- the after-turn hint rebuild ------------------------------------------------------------


def test_hint_rebuild_after_a_large_turn(checkpointer: Any) -> None:
    script = synthetic_script(turns=4, recall=False)
    window = 8_000
    memory = ContextMemory(context_window_tokens=window, archive=InMemoryStore())
    # The provider reports 4x our count, so every finished turn passes 0.8 of the window.
    model = script.model(usage_counter=memory.manager.token_counter, usage_scale=4.0)
    agent = agent_for(memory, model, script, checkpointer)
    config = thread()
    seen = Seen()
    cleared: list[str] = []
    for n, human in enumerate(script.inputs):
        first_call = len(model.prompts)
        for kind, chunk in agent.stream(
            {"messages": [human]}, config, stream_mode=["updates", "values"]
        ):
            if kind == "values":
                seen.add(chunk)
                continue
            change = chunk.get("ContextMiddleware.after_agent") or {}
            removals = [m for m in change.get("messages", []) if isinstance(m, RemoveMessage)]
            # Removed one by one, never with REMOVE_ALL_MESSAGES.
            assert all(m.id != "__remove_all__" for m in removals)
            cleared += [str(m.id) for m in removals]
        values = agent.get_state(config).values
        live = values["messages"]
        # The live history is cleared after the turn, but for the request and its answer.
        assert [m.type for m in live] == ["human", "ai"], "only the final exchange stays live"
        assert live[0].id == human.id and not live[1].tool_calls
        kept = {m.id for m in live}
        hint = values["context_ledger"]["hint"]
        assert hint["text"] and hint["cleared_ids"] and set(hint["cleared_ids"]) <= set(cleared)
        assert hint["prompt_tokens"] > 0.8 * window
        # This turn's first call (after a rebuild) carried the hint in its one system message.
        prompt = model.prompts[first_call]
        if n > 0:
            assert isinstance(prompt[0], SystemMessage)
            assert "<compression_hint>" in str(prompt[0].content)
            assert HINT_NOTE.split("{count}")[0] in str(prompt[0].content)
            assert [m.type for m in prompt] == ["system", "human", "ai", "human"]
    check_prompts(model, memory)
    assert set(cleared) == set(seen.order) - kept
    check_history(memory, agent, config, seen)
    check_ledger(memory, agent, config)


def test_summarized_messages_leave_the_state_by_default_only_with_an_archive_that_lasts() -> None:
    """`remove_summarized=None`: removal unless the archive is in-process and the checkpoints
    are not (a restart would lose what was removed)."""
    import sqlite3

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.memory import InMemoryStore

    durable = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    on_disk = {"configurable": {"__pregel_checkpointer": durable}}
    in_memory = {"configurable": {"__pregel_checkpointer": InMemorySaver()}}
    assert ContextMemory(context_window_tokens=8000)._removes(on_disk)  # the graph's own store
    assert ContextMemory(context_window_tokens=8000, archive="unused-dir")._removes(on_disk)
    in_process = ContextMemory(context_window_tokens=8000, archive=InMemoryStore())
    assert not in_process._removes(on_disk)
    assert in_process._removes(in_memory)
    forced = ContextMemory(
        context_window_tokens=8000, archive=InMemoryStore(), remove_summarized=True
    )
    assert forced._removes(on_disk)
    assert not ContextMemory(context_window_tokens=8000, remove_summarized=False)._removes(
        in_memory
    )
