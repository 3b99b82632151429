"""Running an agent turn by turn and recording what the context pipeline did: `run_turns`.

It feeds a compiled agent one user turn at a time and records, in a `RunLog`
(`langgraph_ctx_tools.cli.runs`), each model call's `context_cost` report, the prompt the model
received (`_PromptRecorder`) and the rebuilds after a turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig

from langgraph_ctx.errors import reason_of
from langgraph_ctx.tokens.exact import TiktokenCounter, get_counter
from langgraph_ctx_tools.cli.runs import MODEL_NODE, CallStat, RunLog
from langgraph_ctx_tools.replay.measure import reusable_tokens


class _PromptRecorder(BaseCallbackHandler):
    """Records every agent model call's prompt and tool schemas (not the summarizer's)."""

    def __init__(self) -> None:
        self.prompts: list[tuple[list[BaseMessage], list[Any]]] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if any(t.startswith("langgraph_ctx") for t in tags or ()):
            return
        params = kwargs.get("invocation_params") or {}
        self.prompts.append((list(messages[0]), list(params.get("tools") or [])))


def run_turns(
    agent: Any,
    turns: Iterable[list[BaseMessage]],
    config: RunnableConfig,
    *,
    counter: TiktokenCounter | None = None,
    system_prompt: str | None = None,
    on_call: Callable[[CallStat], None] | None = None,
) -> RunLog:
    """Invoke the agent once per turn (streaming updates) and record every model call.

    A `ContextWindowExceededError` (or any error) stops the run; `RunLog.error` says why.
    """
    counter = counter or get_counter("gpt-4o")
    recorder = _PromptRecorder()
    given = config.get("callbacks")
    config = {**config, "callbacks": [*(given if isinstance(given, list) else []), recorder]}
    log = RunLog()
    history: list[str] = []  # ids in arrival order
    base = [SystemMessage(system_prompt)] if system_prompt else []
    previous: list[Any] | None = None
    for turn in turns:
        log.turns += 1
        for msg in turn:
            _arrive(log, history, msg)
        try:
            for update in agent.stream({"messages": turn}, config, stream_mode="updates"):
                for node, values in _node_writes(update):
                    arrived = list(values.get("messages") or [])
                    reports = [_report(m, values) for m in arrived] if node == MODEL_NODE else []
                    for report in filter(None, reports):
                        prompt = recorder.prompts[-1] if recorder.prompts else ([], [])
                        before = base + [log.produced[i] for i in history]
                        stat = CallStat(len(log.calls) + 1, report)
                        stat.unmanaged = counter.count(before, tools=prompt[1] or None)
                        if previous is not None:  # the one rule of the replays' measure
                            stat.cached = reusable_tokens(
                                previous[0],
                                prompt[0],
                                counter=counter,
                                previous_tools=previous[1],
                                tools=prompt[1],
                            )
                        previous = list(prompt)
                        log.calls.append(stat)
                        if on_call is not None:
                            on_call(stat)
                    for msg in arrived:
                        _arrive(log, history, msg)
                    _after_turn(log, node, values)
        except Exception as exc:  # the run stops; the table shows what happened until then
            log.error = _one_line(exc)
            break
    return log


def _report(message: BaseMessage, values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report of the model call that wrote `message` (None: not a managed AI reply).

    The message carries the brief report; the same update's ledger holds the full one
    (message ids, detail), taken when it is this call's.
    """
    if not isinstance(message, AIMessage):
        return None
    report = message.response_metadata.get("context_cost")
    if not report:
        return None
    full = (values.get("context_ledger") or {}).get("last_report")
    if full and full.get("tokens") == report.get("tokens"):
        return {**full, **{k: v for k, v in report.items() if k == "reported_tokens"}}
    return dict(report)


def _node_writes(update: Any) -> list[tuple[str, dict[str, Any]]]:
    """`(node, values)` of one "updates" stream item.

    A node that wrote several updates (a model call that also removed summarized messages
    returns the reply and a `Command`) comes as a list of them, merged here in order.
    """
    writes: list[tuple[str, dict[str, Any]]] = []
    for node, values in (update or {}).items():
        parts = values if isinstance(values, list) else [values]
        merged: dict[str, Any] = {}
        for part in parts:
            if not isinstance(part, dict):
                continue
            for key, value in part.items():
                if key == "messages":
                    merged["messages"] = [*merged.get("messages", []), *(value or [])]
                else:
                    merged[key] = value
        if merged:
            writes.append((node, merged))
    return writes


def _one_line(exc: BaseException) -> str:
    name = type(exc).__name__
    return f"{name}: {reason_of(exc)}" if str(exc).strip() else name


def _arrive(log: RunLog, history: list[str], msg: BaseMessage) -> None:
    if isinstance(msg, RemoveMessage) or msg.id is None:  # a removal is not a new message
        return
    if msg.id not in log.produced:
        history.append(msg.id)
    log.produced[msg.id] = msg


def _after_turn(log: RunLog, node: str, values: Mapping[str, Any]) -> None:
    if node == MODEL_NODE or "context_ledger" not in values:
        return
    report = (values.get("context_ledger") or {}).get("last_report") or {}
    for decision in report.get("decisions") or []:
        reason = str((decision.get("detail") or {}).get("reason") or "")
        if decision.get("kind") == "rebuild" or reason.startswith("rebuild:"):
            log.events.append(
                {
                    "after_call": len(log.calls),
                    "kind": decision["kind"],
                    "tokens": decision.get("tokens_before"),
                    "cleared": len(decision.get("message_ids") or []),
                    "detail": decision.get("detail") or {},
                }
            )
