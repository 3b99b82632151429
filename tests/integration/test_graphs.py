"""Real graphs end to end: `create_agent`, `create_react_agent`, a hand-built `StateGraph`, and
sub-graphs, each driven by a scripted model over real tools and checkpointed on every backend.

Every prompt the model receives is checked: valid for OpenAI and Anthropic, within the budget.
After each run the thread's full history must hold every message the state ever held, the
archive must restore what it holds byte for byte, and the ledger must only name messages of
its own thread.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.warnings import LangGraphDeprecatedSinceV10
from typing_extensions import TypedDict

from langgraph_ctx import Compaction, ContextMemory
from langgraph_ctx.archive import encode_message
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.graph.state import ContextReactState
from langgraph_ctx.ledger import covered_ids
from langgraph_ctx.prompt.report import REPORT_KEY, ContextBudget
from tests.conftest import load_trajectories, make_strategies, summary_first_strategies
from tests.fakes import ScriptedChatModel
from tests.integration._agents import (
    Script,
    Seen,
    adrive,
    ai_reports,
    check_history,
    check_ledger,
    check_prompts,
    drive,
    hand_built,
    long_turn_script,
    report_kinds,
    synthetic_script,
)
from tests.integration.conftest import CheckpointerBackend

TRAJECTORY_CASES = [
    # name, window: small enough that pruning, compaction and summaries all happen
    ("taubench-gpt4o-airline__task002_trial1", 6_000),
    ("mini-gemini3pro__psf__requests-5414", 12_000),
]


def trajectory_script(name: str, **kwargs: Any) -> Script:
    return Script.from_messages(load_trajectories()[name], **kwargs)


def thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:12]}"}}


# --- 1. create_agent with the middleware ------------------------------------------------------


def run_create_agent(
    script: Script, window: int, checkpointer: Any, *, usage: bool = True, **options: Any
) -> tuple[Any, ContextMemory, ScriptedChatModel, Seen, RunnableConfig]:
    """Run `script` through `create_agent`; with `usage` the model reports its prompt tokens
    (so the after-turn hint rebuild can fire)."""
    options.setdefault("archive", InMemoryStore())  # the test keeps it across restarts
    memory = ContextMemory(context_window_tokens=window, **options)
    model = script.model(usage_counter=memory.manager.token_counter if usage else None)
    agent = create_agent(
        model,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=checkpointer,
    )
    config = thread()
    seen = drive(agent, script.inputs, config)
    return agent, memory, model, seen, config


def assert_agent_run(
    agent: Any, memory: ContextMemory, model: ScriptedChatModel, seen: Seen, config: Any
) -> set[str]:
    calls = check_prompts(model, memory)
    reports = ai_reports(seen)
    model_replies = [m for m in seen.messages.values() if isinstance(m, AIMessage)]
    # Every AI message the model produced carries the report of the build that prompted it.
    assert len(reports) == len(model_replies) == calls
    assert all(
        r["ok"] and r["tokens"] <= r["limit"] == memory.manager.budget.limit for r in reports
    )
    last = agent.get_state(config).values["context_ledger"]["last_report"]
    assert last["limit"] == memory.manager.budget.limit and last["tokens"] <= last["limit"]
    check_history(memory, agent, config, seen)
    check_ledger(memory, agent, config)
    return report_kinds(agent, memory, config)


@pytest.mark.trajectories
@pytest.mark.parametrize(("name", "window"), TRAJECTORY_CASES)
def test_create_agent_replays_trajectory(checkpointer: Any, name: str, window: int) -> None:
    script = trajectory_script(name)
    agent, memory, model, seen, config = run_create_agent(script, window, checkpointer)
    kinds = assert_agent_run(agent, memory, model, seen, config)
    assert {"compact", "auto_compact"} <= kinds, kinds
    assert len(model.prompts) >= len(script.replies)


async def test_create_agent_long_turn_with_recall(
    checkpointer_backend: CheckpointerBackend, mode: str
) -> None:
    # One long turn, compaction without summaries: compacted outputs stay in view (as
    # placeholders with their references) for the model to recall. Marks 0.95/0.6: a cut to
    # 60% keeps several placeholders in the window (a deep cut would keep the newest block only).
    script = long_turn_script(10, recall=True)
    budget = ContextBudget(context_window_tokens=14_000, trigger=0.95, target=0.6)
    if mode == "sync":
        with checkpointer_backend.open() as saver:
            # No usage reported: no hint rebuild clears the history; compaction does the work.
            agent, memory, model, seen, config = run_create_agent(
                script,
                14_000,
                saver,
                usage=False,
                strategies=make_strategies(compaction=Compaction()),
                budget=budget,
            )
            kinds = assert_agent_run(agent, memory, model, seen, config)
    else:
        memory = ContextMemory(
            budget=budget,
            strategies=make_strategies(compaction=Compaction()),
            archive=InMemoryStore(),
        )
        model = script.model()
        config = thread()
        async with checkpointer_backend.aopen() as saver:
            agent = create_agent(
                model,
                script.tools(),
                system_prompt=script.system,
                middleware=[memory.middleware()],
                checkpointer=saver,
            )
            seen = await adrive(agent, script.inputs, config)
            full = await memory.aget_full_history(agent, config)
            assert [m.id for m in full if m.id in seen.messages] == seen.order
            assert len(await memory.aget_reports(agent, config)) > 1
        with checkpointer_backend.open() as saver:  # the same thread, checked in sync
            agent = create_agent(
                script.model(), script.tools(), middleware=[memory.middleware()], checkpointer=saver
            )
            kinds = assert_agent_run(agent, memory, model, seen, config)
    # Compacted outputs (short placeholders naming their ids) let the long turn fit.
    assert "compact" in kinds, kinds
    # The model called `recall` with a reference from its prompt and got the original back.
    recalled = [
        m for m in seen.messages.values() if isinstance(m, ToolMessage) and m.name == "recall"
    ]
    assert len(recalled) == 1 and recalled[0].status == "success"
    originals = [
        m.content
        for m in seen.messages.values()
        if isinstance(m, ToolMessage) and m.name != "recall"
    ]
    assert any(str(o)[:500] in str(recalled[0].content) for o in originals)


@pytest.mark.parametrize("shape", ["turns", "one_long_turn"])
def test_remove_summarized_keeps_the_full_history(checkpointer: Any, shape: str) -> None:
    """Summarized messages leave the live state by id; the full history keeps them in place.

    In one long turn the task stays pinned while the blocks after it are summarized away.
    """
    script = synthetic_script(turns=8) if shape == "turns" else long_turn_script(10)
    # Prune, compact, then summarize (the list before excerpts and shortened turns): the
    # short run reaches the summaries whose messages leave the state.
    memory = ContextMemory(
        context_window_tokens=5_000,
        remove_summarized=True,
        archive=InMemoryStore(),
        strategies=summary_first_strategies(),
    )
    model = script.model()
    agent = create_agent(
        model,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=checkpointer,
    )
    config = thread()
    seen = drive(agent, script.inputs, config)
    check_prompts(model, memory)
    values = agent.get_state(config).values
    summary = values["context_ledger"]["summary"]
    live = {m.id for m in values["messages"]}
    assert summary["covered"] and summary["covered_last"] not in live
    assert covered_ids(values["messages"], values["context_ledger"]) == [], (
        "summarized messages should have left the state"
    )
    assert len(live) < len(seen.order)
    check_history(memory, agent, config, seen)
    check_ledger(memory, agent, config)

    # The same with the nodes of a hand-built graph (the state also holds the system prompt).
    memory = ContextMemory(
        context_window_tokens=5_000,
        remove_summarized=True,
        archive=InMemoryStore(),
        strategies=summary_first_strategies(),
    )
    model = script.model()
    graph = hand_built(memory, model, script.tools()).compile(checkpointer=checkpointer)
    inputs: list[Any] = [{"messages": [script.system_message(), script.inputs[0]]}]
    seen = drive(graph, inputs + script.inputs[1:], config := thread())
    check_prompts(model, memory)
    live = {m.id for m in graph.get_state(config).values["messages"]}
    assert "system" in live and len(live) < len(seen.order)
    check_history(memory, graph, config, seen)
    check_ledger(memory, graph, config)


def test_create_agent_retries_once_on_provider_overflow(checkpointer: Any) -> None:
    """The provider counts 25% more than we do: its rejections are retried on a 30% smaller
    window, and a provider that still rejects raises `ContextWindowExceededError`.

    Sixteen turns: with the defaults (excerpts, shortened turns, edits started early by the
    cache price) the prompt of a shorter run never nears the window, so nothing overflows.
    """
    script = synthetic_script(turns=16, recall=False)
    window = 6_000
    memory = ContextMemory(
        context_window_tokens=window, hint_threshold=1.0, archive=InMemoryStore()
    )
    model = script.model(
        usage_counter=memory.manager.token_counter, usage_scale=1.25, provider_limit=window
    )
    agent = create_agent(
        model,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=checkpointer,
    )
    config = thread()
    seen = drive(agent, script.inputs, config)
    assert model.rejected, "the provider never overflowed: the test proves nothing"
    check_prompts(model, memory)
    replies = [m for m in seen.messages.values() if isinstance(m, AIMessage)]
    assert all(m.usage_metadata and m.usage_metadata["input_tokens"] <= window for m in replies)
    retried = [r for r in ai_reports(seen) if r["limit"] < memory.manager.budget.limit]
    assert len(retried) == len(model.rejected)  # the retried builds report their smaller limit
    check_history(memory, agent, config, seen)
    check_ledger(memory, agent, config)

    # A provider that overflows even then: the error carries the report; the thread is intact.
    stingy = script.model(
        usage_counter=memory.manager.token_counter, usage_scale=5.0, provider_limit=window
    )
    agent = create_agent(
        stingy,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=checkpointer,
    )
    before = agent.get_state(config).values
    with pytest.raises(ContextWindowExceededError) as caught:
        agent.invoke({"messages": [HumanMessage("One more thing.", id="h-more")]}, config)
    assert not caught.value.report.ok and "still overflowed" in str(caught.value.report.error)
    assert len(stingy.rejected) == 2 and not stingy.prompts
    after = agent.get_state(config).values
    assert after["context_ledger"] == before["context_ledger"]


# --- 2. create_react_agent with the pre-model hook ---------------------------------------------


def react_agent(memory: ContextMemory, model: Any, tools: list[Any], **kwargs: Any) -> Any:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    with pytest.warns(LangGraphDeprecatedSinceV10):
        return create_react_agent(
            model,
            tools,
            pre_model_hook=memory.node(tools=tools),
            state_schema=ContextReactState,
            checkpointer=kwargs.pop("checkpointer", None) or InMemorySaver(),
            **kwargs,
        )


def test_create_react_agent_pre_model_hook(mode: str) -> None:
    # Fourteen turns: excerpts and shortened turns hold a shorter run without a summary, and
    # the hook should also hand the model a prompt the window summarized.
    script = synthetic_script(turns=14, recall=False)
    memory = ContextMemory(context_window_tokens=5_000, archive=InMemoryStore())
    model = script.model()
    tools = script.tools()
    # `prompt=` would be prepended after the hook, outside the budget: the system prompt
    # goes into the messages instead, where the pipeline sees (and counts) it.
    agent = react_agent(memory, model, tools, post_model_hook=memory.after_turn_node())
    config = thread()
    hook_outputs: list[list[BaseMessage]] = []
    first = [script.system_message(), script.inputs[0]]
    for n, human in enumerate(script.inputs):
        payload = {"messages": first if n == 0 else [human]}
        for update in agent.stream(payload, config, stream_mode="updates"):
            if "pre_model_hook" in update:
                assert "llm_input_messages" in update["pre_model_hook"]
                assert "context_ledger" in update["pre_model_hook"]
                hook_outputs.append(update["pre_model_hook"]["llm_input_messages"])
    # The model saw exactly what the hook built, on every call.
    assert len(hook_outputs) == len(model.prompts)
    for built, seen_prompt in zip(hook_outputs, model.prompts, strict=True):
        assert [encode_message(m) for m in built] == [encode_message(m) for m in seen_prompt]
    check_prompts(model, memory)
    values = agent.get_state(config).values
    kinds = report_kinds(agent, memory, config)
    assert {"compact", "auto_compact"} <= kinds, kinds
    # The post-model hook wrote each call's report onto its AI message.
    ais = [m for m in values["messages"] if isinstance(m, AIMessage)]
    assert ais and all(REPORT_KEY in m.response_metadata for m in ais)
    seen = Seen()
    seen.add(values)
    check_history(memory, agent, config, seen)
    check_ledger(memory, agent, config)


def test_create_react_agent_post_model_hook_with_rebuild() -> None:
    # The rebuild keeps the last request and the final answer live, so the prebuilt agent's
    # post-model router still finds its AI message and the thread still ends on the answer.
    script = synthetic_script(turns=3, recall=False)
    memory = ContextMemory(context_window_tokens=5_000, hint_threshold=0.1, archive=InMemoryStore())
    model = script.model(usage_counter=memory.manager.token_counter)
    tools = script.tools()
    agent = react_agent(memory, model, tools, post_model_hook=memory.after_turn_node())
    config = thread()
    seen = drive(agent, [{"messages": [script.system_message(), script.inputs[0]]}], config)
    values = agent.get_state(config).values
    ledger = values["context_ledger"]
    assert any(d["kind"] == "rebuild" for d in ledger["last_report"]["decisions"])
    last = values["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert [m.type for m in values["messages"] if m.type != "system"] == ["human", "ai"]
    check_prompts(model, memory)
    check_history(memory, agent, config, seen)


# --- 3. a hand-built StateGraph -----------------------------------------------------------------


async def test_hand_built_graph(checkpointer_backend: CheckpointerBackend, mode: str) -> None:
    script = synthetic_script(turns=12)
    # Excerpts and shortened turns alone cannot hold 12 turns (they can 8): a summary comes.
    memory = ContextMemory(context_window_tokens=4_500, archive=InMemoryStore())
    model = script.model()  # no usage reported: no hint rebuild (tested in test_persistence)
    tools = [*script.tools(), memory.recall_tool()]
    builder = hand_built(memory, model, tools)
    config = thread()
    inputs: list[Any] = [{"messages": [script.system_message(), script.inputs[0]]}]
    inputs += script.inputs[1:]
    if mode == "sync":
        with checkpointer_backend.open() as saver:
            graph = builder.compile(checkpointer=saver)
            seen = drive(graph, inputs, config)
            check_run(graph, memory, model, seen, config)
    else:
        async with checkpointer_backend.aopen() as saver:
            graph = builder.compile(checkpointer=saver)
            seen = await adrive(graph, inputs, config)
            values = (await graph.aget_state(config)).values
            full = await memory.aget_full_history(graph, config)
            assert {m.id for m in full} >= set(seen.order)
            assert values["context_ledger"]["last_report"]["ok"]
        with checkpointer_backend.open() as saver:  # the same thread, read back in sync
            check_run(builder.compile(checkpointer=saver), memory, model, seen, config)


def check_run(
    graph: Any, memory: ContextMemory, model: ScriptedChatModel, seen: Seen, config: Any
) -> None:
    check_prompts(model, memory)
    kinds = report_kinds(graph, memory, config)
    assert {"compact", "auto_compact"} <= kinds, kinds
    values = graph.get_state(config).values
    # The model got what the context node wrote, and the turn's answer carries the report.
    assert [encode_message(m) for m in values["llm_input_messages"]] == [
        encode_message(m) for m in model.prompts[-1]
    ]
    finals = [m for m in values["messages"] if isinstance(m, AIMessage) and not m.tool_calls]
    assert finals and REPORT_KEY in finals[-1].response_metadata
    check_history(memory, graph, config, seen)
    check_ledger(memory, graph, config)


# --- 5. sub-graphs: one ledger per lane ----------------------------------------------------------


class ParentState(TypedDict):
    answers: Annotated[list[str], operator.add]


def test_subgraphs_keep_their_own_ledgers(checkpointer: Any) -> None:
    # Two agents, each a sub-graph with its own history and its own ContextMemory node, sharing
    # one archive store and one thread. Each lane keeps its history across parent turns.
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    turns = 16  # with excerpts and shortened turns, the lanes need this many to summarize
    scripts = {
        name: synthetic_script(turns=turns, seed=seed, recall=False, prefix=f"{name}-")
        for seed, name in enumerate(("coder", "tester"), start=1)
    }
    lanes: dict[str, tuple[Any, ContextMemory, ScriptedChatModel]] = {}
    for name, script in scripts.items():
        memory = ContextMemory(context_window_tokens=5_000, archive=store)
        model = script.model()
        sub = hand_built(memory, model, script.tools()).compile(name=name, checkpointer=True)
        lanes[name] = (sub, memory, model)

    def node(name: str) -> Any:
        sub, script = lanes[name][0], scripts[name]

        def run(state: ParentState) -> dict[str, Any]:
            turn = sum(a.startswith(f"{name}:") for a in state["answers"])
            messages: list[Any] = [script.inputs[turn]]
            if turn == 0:
                messages.insert(0, script.system_message())
            out = sub.invoke({"messages": messages})
            return {"answers": [f"{name}: {out['messages'][-1].content}"]}

        return run

    builder = StateGraph(ParentState)
    builder.add_node("coder", node("coder"))
    builder.add_node("tester", node("tester"))
    builder.add_edge(START, "coder")
    builder.add_edge("coder", "tester")
    builder.add_edge("tester", END)
    parent = builder.compile(checkpointer=checkpointer)
    config = thread()
    for _ in range(turns):
        parent.invoke({"answers": []}, config)
    assert len(parent.get_state(config).values["answers"]) == 2 * turns

    for name, (_, memory, model) in lanes.items():
        check_prompts(model, memory)
        lane_config: RunnableConfig = {
            "configurable": {**config["configurable"], "checkpoint_ns": name}
        }
        values = parent.get_state(lane_config).values
        ledger = values["context_ledger"]
        kinds = report_kinds(parent, memory, lane_config)
        assert {"compact", "auto_compact"} <= kinds, (name, kinds)
        history = memory.get_full_history(parent, lane_config)
        own = {m.id for m in history}
        assert own and not [i for i in own if f"{name}-" not in str(i)], name
        summary = ledger["summary"]
        assert summary["covered"] and summary["covered_last"] in own
        archive = memory.archive_for(lane_config)
        for ref in all_dump_refs(ledger, archive):
            assert all(m.id in own for m in archive.read(ref)), "a dump spans lanes"
        for entry_id in [*ledger["pruned"], *ledger["compacted"]]:
            assert entry_id in own
            restored = archive.restore(entry_id)
            assert restored.id == entry_id
        seen = Seen()
        seen.add(values)
        check_history(memory, parent, lane_config, seen)
        check_ledger(memory, parent, lane_config)
