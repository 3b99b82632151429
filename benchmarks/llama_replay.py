"""The recorded agent runs replayed through `create_agent` against a llama.cpp server.

`python -m benchmarks.llama_cpp --replay` (see there): each trajectory of
`data/trajectories` is one thread of an agent with `ContextMemory(model=...)`'s
defaults for a local model (the approximate counter, calibrated from the server's
`usage.prompt_tokens`), its system prompt, its user turns as inputs and one tool per tool name
(schemas sent). Every model call goes to the server, which counts the prompt with its own
chat template and tokenizer; `Replay` then makes the reply the recorded step (its text and
tool calls) and answers each tool call with the recorded output. So the prompts have the
recorded runs' mix of text, tool calls and schemas, changing from call to call, which the
scripted `read_file` run (`Drive`) does not: SmolLM2's template bills the text and none of
the calls or schemas. A recorded step with tool calls and no text gets a line of text
(`Calling bash.`): the template joins contents as strings and fails on a missing one.

Every call is recorded (`Record`): the package's count (the report's `tokens`), the server's,
the limit, the ratio applied and the raw estimate of the prompt by part
(`ApproximateCounter.raw_parts` of what the model received), for the figures
(`distribution`) and for `benchmarks.ratio_rules`.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypedDict
from uuid import UUID

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ApproximateCounter, ContextMemory
from langgraph_ctx.prompt.report import REPORT_KEY


class Record(TypedDict):
    """One model call: the package's count and the server's, and the prompt's raw parts."""

    run: str
    call: int
    tokens: int
    reported: int
    limit: int
    ratio: float
    parts: dict[str, float]


class Parts(BaseCallbackHandler):
    """The raw estimate by part of the last prompt the model received (the call's own)."""

    def __init__(self, counter: ApproximateCounter) -> None:
        self.counter = counter
        self.last: dict[str, float] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        """Note the prompt's parts, tool schemas included."""
        tools = list((kwargs.get("invocation_params") or {}).get("tools") or [])
        self.last = {k: round(v, 3) for k, v in self.counter.raw_parts(messages[0], tools).items()}


class Replay(AgentMiddleware[Any, Any]):  # type: ignore[type-var]
    """Makes each reply the next recorded step, answers tool calls with the recorded outputs."""

    def __init__(
        self, name: str, steps: list[AIMessage], outputs: dict[str, str], parts: Parts
    ) -> None:
        super().__init__()
        self.run, self.steps, self.outputs, self.parts = name, steps, outputs, parts
        self.records: list[Record] = []

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[..., Any]) -> Any:
        """Call the model (the server counts the prompt), then reply with the recorded step."""
        response = handler(request)
        inner = response.model_response if isinstance(response, ExtendedModelResponse) else response
        reply = next(m for m in inner.result if isinstance(m, AIMessage))
        report = reply.response_metadata.get(REPORT_KEY) or {}
        if reply.usage_metadata:
            self.records.append(
                Record(
                    run=self.run,
                    call=len(self.records),
                    tokens=int(report.get("received_tokens") or report["tokens"]),
                    reported=reply.usage_metadata["input_tokens"],
                    limit=int(report["limit"]),
                    ratio=float(report.get("calibration_ratio", 1.0)),
                    parts=dict(self.parts.last),
                )
            )
        step = self.steps.pop(0) if self.steps else AIMessage("Done.")
        content = step.content or " ".join(f"Calling {c['name']}." for c in step.tool_calls)
        scripted = AIMessage(
            content=content,
            tool_calls=step.tool_calls,
            id=reply.id,
            usage_metadata=reply.usage_metadata,
            response_metadata=reply.response_metadata,
        )
        result = [scripted if m is reply else m for m in inner.result]
        out = ModelResponse(result=result, structured_response=inner.structured_response)
        if isinstance(response, ExtendedModelResponse):
            return ExtendedModelResponse(model_response=out, command=response.command)
        return out

    def wrap_tool_call(self, request: Any, handler: Callable[..., Any]) -> Any:
        """The recorded output of this call."""
        call = request.tool_call
        content = self.outputs.get(call["id"], "(no output recorded)")
        return ToolMessage(content, tool_call_id=call["id"], name=call["name"])


def _tool(name: str, args: set[str]) -> StructuredTool:
    """A tool of that name taking those string arguments (the recorded runs' schemas are not
    recorded); never run, `Replay` answers its calls."""
    schema = {
        "type": "object",
        "properties": {a: {"type": "string", "description": f"The {a}."} for a in sorted(args)},
    }
    return StructuredTool.from_function(
        func=lambda **_: "", name=name, description=f"Run {name}.", args_schema=schema
    )


def turns(messages: Sequence[BaseMessage]) -> tuple[str, list[list[BaseMessage]], list[AIMessage]]:
    """The system prompt, the inputs of each turn, and the recorded model steps in order.

    A turn's inputs are the user messages before its first step; a step without tool calls
    ends a turn (the next one starts with `Continue.` when no user message follows it).
    """
    system = "\n\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
    inputs: list[list[BaseMessage]] = [[]]
    steps: list[AIMessage] = []
    ended = False
    for m in messages:
        if isinstance(m, HumanMessage):
            if ended:
                inputs.append([])
                ended = False
            inputs[-1].append(HumanMessage(str(m.content)))
        elif isinstance(m, AIMessage):
            if ended:
                inputs.append([HumanMessage("Continue.")])
            steps.append(m)
            ended = not m.tool_calls
    return system, [i for i in inputs if i], steps


def replay_runs(
    model: Any, *, n_ctx: int, reserved: int, calls: int | None
) -> tuple[list[Record], int]:
    """Every trajectory as one thread; the calls' records, and the threads that failed.

    `model` is a `ChatOpenAI` for the server; it gets the callback that notes each prompt's
    parts."""
    from benchmarks.trajectories import load_trajectories

    trajectories = load_trajectories()
    records: list[Record] = []
    failed = 0
    counter = ContextMemory(model=model, context_window_tokens=n_ctx).manager.token_counter
    assert isinstance(counter, ApproximateCounter)
    parts = Parts(counter)
    model.callbacks = [parts]
    for name, messages in sorted(trajectories.items()):
        system, inputs, steps = turns(messages)
        steps = steps[:calls] if calls else steps
        outputs = {
            str(m.tool_call_id): str(m.content) for m in messages if isinstance(m, ToolMessage)
        }
        args: dict[str, set[str]] = {}
        for step in steps:
            for c in step.tool_calls:
                args.setdefault(c["name"], set()).update(c["args"])
        memory = ContextMemory(
            model=model, context_window_tokens=n_ctx, reserved_output_tokens=reserved
        )
        replay = Replay(name, steps, outputs, parts)
        agent = create_agent(
            model,
            [_tool(n, a) for n, a in sorted(args.items())],
            system_prompt=system or None,
            middleware=[replay, memory.middleware()],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": name}, "recursion_limit": 10_000}
        try:
            for turn in inputs:
                if not replay.steps:
                    break
                agent.invoke({"messages": turn}, config)
        except Exception as exc:  # a run the package could not fit: said, and counted
            failed += 1
            print(f"{name}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
        records.extend(replay.records)
        print(f"{name}: {len(replay.records)} calls", file=sys.stderr, flush=True)
    return records, failed


def distribution(records: Sequence[Record], *, after: int = 10) -> str:
    """The estimate's error after `after` calls of each run, and the under-counts that matter.

    Within 5%, the median and mean error, the largest under-count (the server counting more
    than the package), and the calls whose count was within the limit while the server's was
    over it (only the reserved output tokens kept those alive), over every call.
    """
    later = [r for r in records if r["call"] >= after]
    errors = [abs(r["tokens"] - r["reported"]) / r["reported"] for r in later]
    under = max(later, key=lambda r: r["reported"] - r["tokens"], default=None)
    passed = sum(r["tokens"] <= r["limit"] < r["reported"] for r in records)
    if not errors or under is None:
        return f"calls={len(records)} (none after {after})"
    within = sum(e <= 0.05 for e in errors)
    gap = under["reported"] - under["tokens"]
    return (
        f"calls={len(records)} after_{after}={len(later)} "
        f"within_5pct={within}/{len(later)} ({within / len(later):.1%}) "
        f"median_error={statistics.median(errors):.1%} mean_error={statistics.fmean(errors):.1%} "
        f"largest_under={gap} ({gap / under['reported']:.1%}: {under['tokens']} counted, "
        f"{under['reported']} by the server) over_limit_unseen={passed}"
    )
