"""Shared helpers for the end-to-end graph tests: a scripted model, replay tools, checks.

- `Script.model()` builds a `ScriptedChatModel` (`tests/fakes.py`) replaying the AI turns
  of a recorded run, whatever prompt it gets.
- `replay_tools(replies, results)` builds real tools that answer each call with the output
  the recorded run got for it (same call id, same content and status), with the command
  line's replay machinery (`langgraph_ctx_tools.cli.playback.replay_tools`).
- `Script` splits a recorded run into the system prompt, the user inputs and the AI turns;
  `drive()` feeds the user inputs to a graph one turn at a time and records every message
  state ever held (`Seen`), so tests can prove nothing was lost.
- `check_prompts`, `check_history` and `check_ledger` pin the invariants.

The `checkpointer` fixtures that go with these live in `tests/integration/conftest.py`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx.archive import encode_message
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.graph.memory import ContextMemory
from langgraph_ctx.graph.state import ContextState
from langgraph_ctx.messages import validate_messages
from langgraph_ctx.prompt.report import REPORT_KEY
from langgraph_ctx_tools.cli.playback import replay_tools as cli_replay_tools
from tests.fakes import ScriptedChatModel, Step

# --- recorded runs ------------------------------------------------------------------------


@dataclass
class Script:
    """A recorded run split into what the user says and what the model said.

    Every message gets a deterministic id (`h-001`, `ai-0001`, and `tool-<call id>` for the
    tool results), so two runs of one script hold byte-identical states and prompts.
    """

    system: str | None
    inputs: list[HumanMessage]
    """The user's messages, one per turn."""
    replies: list[Step]
    """Every AI message, in order (a step may also be a function of the prompt)."""
    tool_results: list[ToolMessage]
    prefix: str = ""
    """Prepended to every id (message ids and tool call ids), to keep two scripts apart."""

    @classmethod
    def from_messages(
        cls, messages: Sequence[BaseMessage], *, max_turns: int | None = None, prefix: str = ""
    ) -> Script:
        """Split a recorded run; `max_turns` keeps only the first user turns."""
        system = None
        if messages and isinstance(messages[0], SystemMessage):
            system = str(messages[0].content)
            messages = messages[1:]
        inputs: list[HumanMessage] = []
        replies: list[Step] = []
        results: list[ToolMessage] = []
        for m in messages:
            if isinstance(m, HumanMessage):
                if max_turns is not None and len(inputs) == max_turns:
                    break
                inputs.append(HumanMessage(m.content, id=f"{prefix}h-{len(inputs) + 1:03d}"))
            elif isinstance(m, AIMessage):
                calls = [{**tc, "id": f"{prefix}{tc['id']}"} for tc in m.tool_calls]
                replies.append(
                    AIMessage(
                        content=m.content,
                        tool_calls=calls,
                        additional_kwargs=dict(m.additional_kwargs),
                        id=f"{prefix}ai-{len(replies) + 1:04d}",
                    )
                )
            elif isinstance(m, ToolMessage):
                results.append(m.model_copy(update={"tool_call_id": prefix + m.tool_call_id}))
        return cls(system, inputs, replies, results, prefix)

    def model(self, *, skip: int = 0, **kwargs: Any) -> ScriptedChatModel:
        """A scripted model replaying this run's AI turns (after the first `skip`)."""
        return ScriptedChatModel(messages=iter(list(self.replies[skip:])), **kwargs)

    def tools(self, *, calls: list[str] | None = None) -> list[BaseTool]:
        """Tools answering every recorded call with its recorded output."""
        return replay_tools(self.replies, self.tool_results, calls=calls)

    def system_message(self) -> SystemMessage:
        """The recorded system prompt as a message with a fixed id."""
        return SystemMessage(self.system or "You are a helpful agent.", id=f"{self.prefix}system")


def replay_tools(
    replies: Sequence[Step], results: Sequence[ToolMessage], *, calls: list[str] | None = None
) -> list[BaseTool]:
    """The command line's replay tools (`langgraph_ctx_tools.cli.playback`) over a script.

    Each result is answered as a fresh `ToolMessage` with the id `tool-<call id>`, so two runs
    of one script hold byte-identical states. `calls` (if given) collects the call ids in the
    order the tools ran.
    """
    answers = [
        ToolMessage(
            m.content, tool_call_id=m.tool_call_id, status=m.status, id=f"tool-{m.tool_call_id}"
        )
        for m in results
    ]
    recorded = [r for r in replies if isinstance(r, AIMessage)]
    return cli_replay_tools([*recorded, *answers], calls=calls)


def synthetic_script(
    turns: int = 8, *, seed: int = 0, recall: bool = True, prefix: str = ""
) -> Script:
    """A generated coding-agent run (`make_conversation`) with outputs large enough to compact.

    With `recall`, a last turn asks for an early output again: the model calls the `recall`
    tool with the reference it finds in its prompt (see `recall_step`).
    """
    from tests.conftest import make_conversation

    messages = make_conversation(turns, parallel=2, long_output=2_500, error_every=7, seed=seed)
    script = Script.from_messages(messages, prefix=prefix)
    if recall:
        script.inputs.append(
            HumanMessage("Show me the oldest output you compacted again.", id=f"{prefix}h-recall")
        )
        script.replies += [
            recall_step(f"{prefix}call_recall"),
            AIMessage("Here it is again.", id=f"{prefix}ai-recall"),
        ]
    return script


def long_turn_script(
    steps: int = 10,
    *,
    seed: int = 0,
    prefix: str = "",
    long_output: int = 6_000,
    parallel: int = 2,
    recall: bool = False,
) -> Script:
    """One user request worked through in `steps` tool-call rounds, then one answer.

    Within a single turn the window can only shrink block by block (the task stays pinned),
    so compacted and pruned outputs stay in the prompt as placeholders. With `recall`, the
    model calls the `recall` tool (see `recall_step`) just before its answer.
    """
    from tests.conftest import make_conversation

    messages = make_conversation(steps, parallel=parallel, long_output=long_output, seed=seed)
    keep = [
        m
        for m in messages
        if not (m.type == "human" and m.id != "h1")
        and not (m.type == "ai" and str(m.id).endswith("_final") and m.id != f"ai{steps}_final")
    ]
    script = Script.from_messages(keep, prefix=prefix)
    if recall:
        script.replies[-1:-1] = [recall_step(f"{prefix}call_recall")]
    return script


def recall_script() -> Script:
    """One long turn that compacts, then a turn where the model recalls an early output."""
    script = long_turn_script(10)
    script.inputs.append(HumanMessage("Show me the oldest output you compacted.", id="h-again"))
    script.replies += [recall_step("call_recall"), AIMessage("Here it is.", id="ai-again")]
    return script


def compacting_memory(**options: Any) -> ContextMemory:
    """Compaction without summaries, cut to 60%: placeholders stay in view for `recall`.

    For `recall_script`; no archive and no store unless `options` give one.
    """
    from langgraph_ctx import Compaction
    from langgraph_ctx.prompt.report import ContextBudget
    from tests.conftest import make_strategies

    budget = ContextBudget(context_window_tokens=14_000, trigger=0.95, target=0.6)
    strategies = make_strategies(compaction=Compaction())
    return ContextMemory(budget=budget, strategies=strategies, **options)


RECALL_RE = re.compile(r'recall\(ref="([^"]+)"\)')


def recall_step(call_id: str) -> Callable[[list[BaseMessage]], AIMessage]:
    """A step that calls `recall` with the first reference its prompt offers."""

    def step(prompt: list[BaseMessage]) -> AIMessage:
        for m in prompt:
            found = RECALL_RE.search(str(m.content))
            if found:
                call = {"name": "recall", "args": {"ref": found[1]}, "id": call_id}
                return AIMessage("", tool_calls=[call], id=f"ai-{call_id}")
        return AIMessage("Nothing was compacted.", id=f"ai-{call_id}")

    return step


# --- driving a graph and recording what it held -------------------------------------------


@dataclass
class Seen:
    """Every message a thread's state ever held, by id (the newest version of each)."""

    messages: dict[str, BaseMessage] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    snapshots: int = 0

    def add(self, values: Mapping[str, Any]) -> None:
        self.snapshots += 1
        for m in values.get("messages") or []:
            assert m.id, f"a message in state has no id: {m!r}"
            if m.id not in self.messages:
                self.order.append(m.id)
            self.messages[m.id] = m


def _payload(item: Any) -> Any:
    if isinstance(item, str):
        return {"messages": [HumanMessage(item)]}
    if isinstance(item, BaseMessage):
        return {"messages": [item]}
    return item  # a state update, a Command, or None (resume)


def drive(
    graph: Any, inputs: Sequence[Any], config: Mapping[str, Any], seen: Seen | None = None
) -> Seen:
    """Feed each input (a text, a message or a graph input) to `graph` as one turn.

    Records every state the graph streams (`stream_mode="values"`) in `seen`.
    """
    seen = seen if seen is not None else Seen()
    for item in inputs:
        for values in graph.stream(_payload(item), config, stream_mode="values"):
            seen.add(values)
    return seen


async def adrive(
    graph: Any, inputs: Sequence[Any], config: Mapping[str, Any], seen: Seen | None = None
) -> Seen:
    """Async twin of `drive`."""
    seen = seen if seen is not None else Seen()
    for item in inputs:
        async for values in graph.astream(_payload(item), config, stream_mode="values"):
            seen.add(values)
    return seen


# --- invariants ---------------------------------------------------------------------------


def check_prompts(model: ScriptedChatModel, memory: ContextMemory) -> int:
    """Every prompt the model got is valid and within the budget. Returns the call count."""
    counter = memory.manager.token_counter
    limit = memory.manager.budget.limit
    assert model.prompts, "the model was never called"
    for n, (prompt, tools) in enumerate(zip(model.prompts, model.prompt_tools, strict=True)):
        problems = validate_messages(prompt)
        assert problems == [], f"call {n}: invalid prompt: {[str(p) for p in problems]}"
        tokens = counter(prompt) + (counter.count_tools(tools) if tools else 0)  # type: ignore[attr-defined]
        assert tokens <= limit, f"call {n}: {tokens} tokens over the limit {limit}"
    return len(model.prompts)


def check_history(
    memory: ContextMemory, graph: Any, config: Mapping[str, Any], seen: Seen
) -> list[BaseMessage]:
    """Nothing lost: the full history holds every message ever in state, byte for byte."""
    history = memory.get_full_history(graph, config)  # type: ignore[arg-type]
    by_id = {m.id: m for m in history}
    missing = [i for i in seen.order if i not in by_id]
    assert not missing, f"{len(missing)} messages lost, e.g. {missing[:3]}"
    expected = set(seen.order)
    order = [m.id for m in history if m.id in expected]
    assert order == seen.order, "the full history is out of order"
    for mid in seen.order:
        original, found = seen.messages[mid], by_id[mid]
        if encode_message(found) != encode_message(original):
            # The after-turn step may attach the report to the newest AI message; the
            # archived copy can be the version from before. Nothing else may differ.
            assert _without_report(found) == _without_report(original), mid
    return history


def _without_report(message: BaseMessage) -> bytes:
    metadata = {k: v for k, v in message.response_metadata.items() if k != REPORT_KEY}
    return encode_message(message.model_copy(update={"response_metadata": metadata}))


def check_ledger(memory: ContextMemory, graph: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """Ledger ids all name messages of this thread; every archived ref restores byte for byte.

    Returns counters: pruned, compacted, summarized and dumps.
    """
    values = graph.get_state(config).values
    ledger = values.get("context_ledger") or {}
    live = {m.id: m for m in values.get("messages", [])}
    archive = memory.archive_for(config)  # type: ignore[arg-type]
    history_ids = {m.id for m in memory.get_full_history(graph, config)}  # type: ignore[arg-type]
    for kind in ("pruned", "compacted"):
        for mid, entry in (ledger.get(kind) or {}).items():
            assert mid in live, f"{kind} id {mid} is not in the live state"
            ref = entry.get("ref")
            if ref:
                restored = archive.restore(ref)
                assert encode_message(restored) == encode_message(live[mid]), (kind, mid)
                assert archive.lookup(mid) is not None, mid
    summary = ledger.get("summary") or {}
    last = summary.get("covered_last")
    assert last is None or last in history_ids, last
    refs = all_dump_refs(ledger, archive)
    dumped: set[str] = set()
    for ref in refs:
        dumped.update(m.id or "" for m in archive.read(ref))
    if refs and last is not None:
        assert last in dumped, "the newest summarized message has no insurance dump"
    window = ledger.get("window") or {}
    for key in ("start_id", "pin_id"):
        if window.get(key):
            assert window[key] in live, f"window {key} {window[key]} is not live"
    hint = ledger.get("hint") or {}
    for mid in hint.get("cleared_ids", []):
        assert mid in dumped, f"cleared id {mid} has no dump"
        assert mid not in live, f"cleared id {mid} is still live"
    return {
        "pruned": len(ledger.get("pruned") or {}),
        "compacted": len(ledger.get("compacted") or {}),
        "summarized": int(summary.get("covered", 0)),
        "dumps": len(refs),
    }


def report_kinds(graph: Any, memory: ContextMemory, config: Mapping[str, Any]) -> set[str]:
    """Every decision kind any report of the thread recorded."""
    return {
        d.get("kind") if isinstance(d, dict) else d.kind
        for r in memory.get_reports(graph, config)  # type: ignore[arg-type]
        for d in r.decisions
    }


def ai_reports(seen: Seen) -> list[dict[str, Any]]:
    """The `context_cost` reports on every AI message ever in state."""
    return [
        m.response_metadata[REPORT_KEY]
        for m in seen.messages.values()
        if isinstance(m, AIMessage) and REPORT_KEY in m.response_metadata
    ]


_ids = itertools.count()


def unique(prefix: str) -> str:
    """A process-unique name."""
    return f"{prefix}-{next(_ids)}"


# --- graphs -----------------------------------------------------------------------------------


def hand_built(
    memory: ContextMemory,
    model: ScriptedChatModel,
    tools: list[Any],
    *,
    context_node: Any = None,
) -> StateGraph[Any]:
    """context -> model -> tools -> context ... -> after_turn, as a user would write it."""
    bound = model.bind_tools(tools)

    def call_model(state: ContextState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["llm_input_messages"])]}

    async def acall_model(state: ContextState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["llm_input_messages"])]}

    builder = StateGraph(ContextState)
    builder.add_node("context", context_node or memory.node(tools=tools))
    builder.add_node("model", RunnableLambda(call_model, afunc=acall_model))
    builder.add_node("tools", ToolNode(tools))
    builder.add_node("after_turn", memory.after_turn_node())
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    builder.add_conditional_edges(
        "model", tools_condition, {"tools": "tools", "__end__": "after_turn"}
    )
    builder.add_edge("tools", "context")
    builder.add_edge("after_turn", END)
    return builder
