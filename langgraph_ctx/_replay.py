"""Replay machinery behind `langgraph-ctx replay` and `demo`: drive a real agent, record it.

A run is a `create_agent` agent with `ContextMemory(...).middleware()` and a SQLite
checkpointer. `run_turns` feeds it one user turn at a time and watches the graph's update
stream: each model call's `context_cost` report (on the AI message), the prompt the model
received (through a callback, so any chat model works), and the rebuilds after a turn.
`check_run` then proves nothing was lost: every archived message restores byte for byte and
the full history (archive dumps plus live state) holds every message the run produced.

A recorded conversation is replayed by `ScriptedChatModel` (the recorded AI turns, in order)
and `replay_tools` (one real tool per recorded tool name, answering each call with its
recorded output), so every call goes through the pipeline, the checkpointer and the archive.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, create_model

from langgraph_ctx._explorer import OfflineChatModel
from langgraph_ctx.archive import encode_message
from langgraph_ctx.errors import ArchiveError
from langgraph_ctx.tokens import TiktokenCounter, get_counter

MODEL_NODE = "model"
"""The model node of a `create_agent` graph."""


class InputError(ValueError):
    """A file or option the user gave cannot be used; the message says why and what to do."""


# --- inputs -------------------------------------------------------------------------------


def load_transcript(path: str | Path) -> list[BaseMessage]:
    """Messages from a JSON file holding `messages_to_dict` output.

    Raises:
        InputError: Missing file, not JSON, or not a list of serialized LangChain messages.
    """
    data = _read_json(path, "transcript")
    if not isinstance(data, list):
        msg = (
            f"{path} holds a JSON {type(data).__name__}, not a message list; expected the "
            "output of langchain_core.messages.messages_to_dict(messages)"
        )
        raise InputError(msg)
    try:
        return messages_from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        msg = (
            f"{path} is not a LangChain message list ({type(exc).__name__}: {exc}); expected "
            'items like {"type": "human", "data": {"content": "..."}} from messages_to_dict'
        )
        raise InputError(msg) from exc


def load_strategies(value: str | None) -> list[Any] | None:
    """Strategy configs from JSON text or from a JSON file (None: the default strategies)."""
    if value is None:
        return None
    text = value
    if not value.lstrip().startswith(("[", "{")):
        if not Path(value).is_file():
            msg = f"--strategies {value!r} is neither JSON nor an existing file"
            raise InputError(msg)
        text = Path(value).read_text(encoding="utf-8")
    from langgraph_ctx.strategies import strategies_from_config

    return strategies_from_config(text)  # ConfigError says what is wrong


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """Tool schemas (OpenAI format, or bare function schemas) from a JSON file."""
    data = _read_json(path, "tools")
    items = data if isinstance(data, list) else [data]
    try:
        return [convert_to_openai_tool(item) for item in items]
    except (TypeError, ValueError, KeyError) as exc:
        msg = f"{path} does not hold tool schemas: {exc}"
        raise InputError(msg) from exc


def _read_json(path: str | Path, what: str) -> Any:
    file = Path(path)
    if not file.is_file():
        msg = f"no such {what} file: {path}"
        raise InputError(msg)
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        msg = f"{path} is not a UTF-8 text file ({exc.reason})"
        raise InputError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{path} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise InputError(msg) from exc


def init_model(spec: str) -> BaseChatModel:
    """`init_chat_model("provider:model")`, with any failure turned into one clear line."""
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec)
    except Exception as exc:  # missing package, missing key, unknown provider
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"cannot use model {spec!r}: {first}"
        raise InputError(msg) from exc


# --- chat models ----------------------------------------------------------------------------


class ScriptedChatModel(OfflineChatModel):
    """Replays recorded AI messages in order, whatever it is asked."""

    replies: list[AIMessage] = Field(default_factory=list)
    """The recorded AI turns."""

    def respond(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """The next recorded AI message (a short note once the recording is used up)."""
        if self.calls <= len(self.replies):
            return self.replies[self.calls - 1]
        return AIMessage("(the recording has no more AI turns)", id=f"extra-{self.calls}")


def end_of_script(model: ScriptedChatModel) -> Any:
    """Middleware that ends the agent's turn once the recording has no AI turn left.

    A recording may stop after a tool result (the final submit); the agent would call the model
    once more, and that call is not part of the recording.
    """
    from langchain.agents.middleware import AgentMiddleware, hook_config

    class EndOfScript(AgentMiddleware):  # type: ignore[type-arg]
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return {"jump_to": "end"} if model.calls >= len(model.replies) else None

    return EndOfScript()


# --- replaying a recording --------------------------------------------------------------------


def with_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Copies with a stable id (`m00001`, ...) where a message has none, so runs repeat."""
    return [
        m if m.id else m.model_copy(update={"id": f"m{i:05d}"}) for i, m in enumerate(messages, 1)
    ]


def split_turns(messages: Sequence[BaseMessage]) -> list[tuple[list[BaseMessage], int]]:
    """The recording as graph inputs: `(input messages, AI turns the agent then takes)`.

    Inputs are the system and human messages before the agent acts; the agent produces the AI
    and tool messages. A turn ends at an AI message without tool calls (the agent stops
    there), so two such messages in a row make two turns, the second with no input. Trailing
    input with no AI reply after it is left out.
    """
    turns: list[tuple[list[BaseMessage], int]] = []
    inputs: list[BaseMessage] = []
    replies = 0
    for msg in messages:
        if isinstance(msg, ToolMessage):
            continue  # answered by the replay tools
        if not isinstance(msg, AIMessage):
            if replies:
                turns.append((inputs, replies))
                inputs, replies = [], 0
            inputs.append(msg)
            continue
        replies += 1
        if not msg.tool_calls:
            turns.append((inputs, replies))
            inputs, replies = [], 0
    if replies:
        turns.append((inputs, replies))
    return turns


def replay_tools(messages: Sequence[BaseMessage]) -> list[BaseTool]:
    """One tool per tool name the recording calls, answering with the recorded outputs.

    A call is answered by the recorded `ToolMessage` with its `tool_call_id` (same content,
    status and id); a call the recording never answered gets a short note.
    """
    outputs = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    calls: dict[str, list[dict[str, Any]]] = {}
    for msg in messages:
        if isinstance(msg, AIMessage):
            for call in msg.tool_calls:
                calls.setdefault(call["name"], []).append(dict(call.get("args") or {}))
    return [_replay_tool(name, args, outputs) for name, args in sorted(calls.items())]


def _replay_tool(
    name: str, examples: list[dict[str, Any]], outputs: Mapping[str, ToolMessage]
) -> BaseTool:
    types: dict[str, set[type]] = {}
    for args in examples:
        for key, value in args.items():
            types.setdefault(key, set()).add(type(value))
    fields: dict[str, Any] = {
        key: (_field_type(seen) | None, None)
        for key, seen in types.items()
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key)
    }
    fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], ...)
    schema = create_model(f"{_camel(name)}Args", **fields)

    def run(tool_call_id: str, **_: Any) -> ToolMessage:
        recorded = outputs.get(tool_call_id)
        if recorded is None:
            note = f"(no output was recorded for this {name} call)"
            return ToolMessage(note, tool_call_id=tool_call_id, name=name, id=f"t-{tool_call_id}")
        return recorded.model_copy(update={"name": recorded.name or name})

    return StructuredTool.from_function(
        func=run,
        name=name,
        description=f"Replays the recorded outputs of the `{name}` tool.",
        args_schema=schema,
    )


def _field_type(seen: set[type]) -> Any:
    return next(iter(seen)) if len(seen) == 1 and next(iter(seen)) in _SIMPLE else Any


_SIMPLE = (str, int, float, bool, list, dict)


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", name) if p) or "Tool"


# --- the checkpointer ---------------------------------------------------------------------------


@contextlib.contextmanager
def open_saver(db: str | Path, *, create: bool = True) -> Iterator[Any]:
    """A `SqliteSaver` on a database file (created with its folder when `create`)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(db)
    if not create and not path.is_file():
        msg = f"no checkpoint database at {db}; pass the --db file a demo or replay wrote"
        raise InputError(msg)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    # The graph runs its nodes in worker threads: the connection is shared across them.
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        try:
            saver = SqliteSaver(conn)
            saver.setup()
        except sqlite3.DatabaseError as exc:
            msg = f"{db} is not a checkpoint database: {exc}"
            raise InputError(msg) from exc
        yield saver
    finally:
        conn.close()


def thread_ids(saver: Any) -> list[str]:
    """Every thread id the checkpoint database holds."""
    rows = saver.conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
    return [str(r[0]) for r in rows]


def prepare_thread(saver: Any, thread: str, *, reset: bool) -> bool:
    """Make sure `thread` starts empty: delete it when `reset`, else refuse an existing one.

    Returns whether an earlier run was deleted.
    """
    if thread not in thread_ids(saver):
        return False
    if not reset:
        msg = (
            f"thread {thread!r} already exists in the database; pass another --thread (or "
            "remove the --db file) so this run does not mix with the old one"
        )
        raise InputError(msg)
    saver.delete_thread(thread)
    return True


def _clear_archive(archive_dir: Path, thread: str) -> None:
    # A reset thread starts with an empty archive too: its message-id index would otherwise
    # point at the earlier run's messages. DirectoryBackend keeps a thread's entries under
    # <root>/langgraph_ctx/<thread>/ (ids of this shape are used as they are).
    import shutil

    from langgraph_ctx.archive import NAMESPACE_ROOT

    if re.fullmatch(r"[A-Za-z0-9_-]{1,128}", thread):
        shutil.rmtree(archive_dir / NAMESPACE_ROOT / thread, ignore_errors=True)


class CheckpointView:
    """Just enough of a compiled graph for `ContextMemory`'s thread views, on a checkpointer.

    Lets `inspect` read a thread written by any graph shape.
    """

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def get_state(self, config: RunnableConfig) -> Any:
        """The newest checkpoint's values (`.values`)."""
        item = self.saver.get_tuple(config)
        values = dict(item.checkpoint.get("channel_values") or {}) if item else {}
        return _Values(values)

    def get_state_history(self, config: RunnableConfig) -> Iterator[Any]:
        """Every checkpoint's values, newest first."""
        for item in self.saver.list(config):
            yield _Values(dict(item.checkpoint.get("channel_values") or {}))


@dataclass
class _Values:
    values: dict[str, Any]


# --- running and recording ------------------------------------------------------------------


@dataclass
class CallStat:
    """One model call as the run saw it."""

    index: int
    """1-based call number."""
    report: dict[str, Any]
    """The call's `context_cost` report."""
    unmanaged: int = 0
    """Tokens the prompt would have had with the whole history and no management."""
    cached: int = 0
    """Tokens of the prefix this prompt shares with the previous one (cache-reusable)."""

    @property
    def tokens(self) -> int:
        """Prompt tokens the pipeline sent."""
        return int(self.report.get("tokens") or 0)

    @property
    def limit(self) -> int:
        """The budget limit."""
        return int(self.report.get("limit") or 0)

    @property
    def kinds(self) -> list[str]:
        """Kinds of the decisions that changed something, in order.

        A pruning attempt that found nothing to prune is in the report but is not counted.
        """
        return [str(d.get("kind")) for d in self.decisions]

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """The report's decisions that changed something."""
        return [
            d
            for d in self.report.get("decisions") or []
            if d.get("kind") != "prune" or d.get("message_ids")
        ]


@dataclass
class RunLog:
    """What a run did, in order."""

    calls: list[CallStat] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    """Rebuilds and skips after a turn: `{"after_call", "kind", "tokens", "cleared", ...}`."""
    produced: dict[str, BaseMessage] = field(default_factory=dict)
    """Every message that entered the thread, by id (newest version)."""
    removed: set[str] = field(default_factory=set)
    """Ids removed from live state."""
    turns: int = 0
    error: str | None = None
    """Why the run stopped early."""


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
                for node, values in (update or {}).items():
                    if not isinstance(values, dict):
                        continue
                    arrived = list(values.get("messages") or [])
                    if node == MODEL_NODE:
                        for msg in arrived:
                            if not isinstance(msg, AIMessage):
                                continue
                            report = msg.response_metadata.get("context_cost")
                            if not report:
                                continue
                            prompt = recorder.prompts[-1] if recorder.prompts else ([], [])
                            before = base + [log.produced[i] for i in history]
                            stat = CallStat(len(log.calls) + 1, dict(report))
                            stat.unmanaged = counter.count(before, tools=prompt[1] or None)
                            stat.cached = _shared_prefix(counter, previous, prompt)
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


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _arrive(log: RunLog, history: list[str], msg: BaseMessage) -> None:
    if isinstance(msg, RemoveMessage):
        log.removed.add(msg.id or "")
        return
    if msg.id is None:
        return
    if msg.id not in log.produced:
        history.append(msg.id)
    log.produced[msg.id] = msg


def _after_turn(log: RunLog, node: str, values: Mapping[str, Any]) -> None:
    if node == MODEL_NODE or "context" not in values:
        return
    report = (values.get("context") or {}).get("last_report") or {}
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


def _key(message: BaseMessage) -> str:
    # What a provider sees of a message: role, content, tool calls, tool call id, name.
    calls = [(c["name"], c.get("args"), c.get("id")) for c in getattr(message, "tool_calls", [])]
    parts = [message.type, message.content, calls, getattr(message, "tool_call_id", None)]
    return json.dumps([*parts, message.name], sort_keys=True, default=str)


def _shared_prefix(
    counter: TiktokenCounter,
    previous: list[Any] | None,
    prompt: tuple[list[BaseMessage], list[Any]],
) -> int:
    """Tokens of the longest common prefix (tools, then messages) of two prompts."""
    if previous is None:
        return 0
    old_messages, old_tools = previous
    messages, tools = prompt
    if json.dumps(old_tools, sort_keys=True) != json.dumps(tools, sort_keys=True):
        return 0
    same = 0
    for old, new in zip(old_messages, messages, strict=False):
        if _key(old) != _key(new):
            break
        same += 1
    shared = counter.count_tools(tools) if tools else 0
    return shared + sum(counter.count_message(m) for m in messages[:same])


# --- checking and summarizing ------------------------------------------------------------------


@dataclass
class RunCheck:
    """Proof that nothing was lost."""

    archived: int = 0
    """Messages found in the archive index."""
    restored: int = 0
    """Of those, restored byte for byte."""
    full_history: int = 0
    """Messages in the full history rebuilt from archive dumps plus live state."""
    produced: int = 0
    """Messages the run produced."""
    missing: list[str] = field(default_factory=list)
    """Produced ids the full history lacks."""
    in_order: bool = True
    """The full history lists the produced messages in the order they arrived."""
    live: int = 0
    """Messages in live state at the end."""
    ledger: dict[str, Any] = field(default_factory=dict)
    """The final ledger."""


def check_run(memory: Any, graph: Any, config: RunnableConfig, log: RunLog) -> RunCheck:
    """Restore every archived message of the run and rebuild the full history."""
    check = RunCheck(produced=len(log.produced))
    archive = memory.archive_for(config)
    for mid, original in log.produced.items():
        try:
            ref = archive.lookup(mid)
            if ref is None:
                continue
            check.archived += 1
            if encode_message(archive.restore(ref)) == encode_message(original):
                check.restored += 1
        except ArchiveError:
            continue
    full = memory.get_full_history(graph, config)
    ids = {m.id for m in full}
    check.full_history = len(full)
    check.missing = [i for i in log.produced if i not in ids]
    arrived = {mid: n for n, mid in enumerate(log.produced)}
    positions = [arrived[m.id] for m in full if m.id in arrived]
    check.in_order = positions == sorted(positions)
    values = graph.get_state(config).values
    check.live = len(values.get("messages") or [])
    check.ledger = dict(values.get("context") or {})
    return check


_ORDER = ("drop_memory", "prune", "compact", "shrink", "auto_compact", "summarize", "extract")


def summary_rows(log: RunLog, check: RunCheck | None = None) -> list[tuple[str, str]]:
    """The final table as (label, value) rows."""
    calls = log.calls
    rows = [("turns / model calls", f"{log.turns} / {len(calls)}")]
    if calls:
        tokens, limit = [c.tokens for c in calls], calls[-1].limit
        median, biggest = int(statistics.median(tokens)), max(c.unmanaged for c in calls)
        spread = f"min {min(tokens):,} · median {median:,} · max {max(tokens):,}"
        rows.append(("prompt tokens per call", f"{spread} (limit {limit:,})"))
        rows.append(("calls over the limit", str(sum(1 for t in tokens if t > limit))))
        ratio = f"{biggest / max(limit, 1):.1f}x the limit"
        rows.append(("unmanaged history (largest)", f"{biggest:,} tokens ({ratio})"))
    kinds = Counter(k for c in calls for k in c.kinds)
    kinds.update(e["kind"] for e in log.events if e["kind"] == "rebuild")
    taken = [f"{k} {kinds[k]}" for k in (*_ORDER, "rebuild", "skip", "error") if kinds.get(k)]
    rows.append(("decisions taken", " · ".join(taken) or "none (everything fit)"))
    decisions = [d for c in calls for d in c.decisions]
    archived = sum(len(d.get("message_ids") or []) for d in decisions if d["kind"] == "compact")
    rows.append(
        ("compactions", f"{kinds['compact']} ({_plural(archived, 'tool output')} archived)")
    )
    summary = (check.ledger.get("summary") if check else None) or {}
    about = f" (running summary: {len(summary.get('text') or ''):,} chars, {summary.get('source')})"
    count = kinds["auto_compact"] + kinds["summarize"] + kinds["rebuild"]
    rows.append(("summaries", f"{count}{about if summary.get('text') else ''}"))
    rebuilds = [e for e in log.events if e["kind"] == "rebuild"]
    if rebuilds:
        cleared = _plural(sum(e["cleared"] for e in rebuilds), "message")
        rows.append(("rebuilds from a hint", f"{len(rebuilds)} ({cleared} cleared)"))
    if total := sum(c.tokens for c in calls[1:]):
        share = sum(c.cached for c in calls[1:]) / total
        rows.append(("cache-reusable share", f"{share:.0%} of prompt tokens (calls 2..n)"))
    if check is not None:
        ok = "ok" if check.restored == check.archived else "MISMATCH"
        restored = f"{check.restored}/{_plural(check.archived, 'archived message')} byte for byte"
        restored += f" ({ok})"
        if not check.archived:
            restored = "no message was archived one by one"
        rows.append(("restorable from the archive", restored))
        lost = f"{len(check.missing)} MISSING" if check.missing else "none lost"
        order = "in order" if check.in_order else "OUT OF ORDER"
        full = f"{check.full_history}/{check.produced} messages, {lost}, {order}"
        rows.append(("full history (archive + live)", f"{full}; {check.live} live"))
    if log.error:
        rows.append(("stopped early", log.error))
    return rows


# --- reports and plot ---------------------------------------------------------------------------


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def write_reports(path: str | Path, log: RunLog, *, meta: Mapping[str, Any]) -> Path:
    """Every call's report, the rebuild events and run metadata, as JSON."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        **meta,
        "calls": [
            {
                "call": c.index,
                "tokens": c.tokens,
                "limit": c.limit,
                "unmanaged_tokens": c.unmanaged,
                "cache_reusable_tokens": c.cached,
                "report": c.report,
            }
            for c in log.calls
        ],
        "events": log.events,
        "error": log.error,
    }
    out.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str), "utf-8")
    return out


_MARKS = {
    "prune": (".", "tab:purple"),
    "compact": ("v", "tab:orange"),
    "shrink": ("|", "tab:gray"),
    "auto_compact": ("s", "tab:green"),
    "summarize": ("D", "tab:olive"),
}


def plot_run(path: str | Path, log: RunLog, *, title: str) -> Path:
    """Prompt tokens per call against the limit, with the events marked (PNG, Agg).

    The whole history (what an unmanaged agent would send) is drawn up to the top of the
    chart; each decision kind gets its own row of marks above the limit, and rebuilds are
    dashed vertical lines.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        msg = "--plot needs matplotlib: pip install 'langgraph-ctx[plot]'"
        raise InputError(msg) from exc
    calls = log.calls
    limit = max([c.limit for c in calls] + [1])
    top = limit * (1.25 + 0.08 * len(_MARKS))
    xs = [c.index for c in calls]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    ax.plot(xs, [c.unmanaged for c in calls], ":", color="tab:red", label="whole history")
    ax.plot(xs, [c.tokens for c in calls], "-", color="tab:blue", label="prompt sent")
    ax.axhline(limit, color="black", linewidth=1, label=f"limit {limit:,}")
    for row, (kind, (marker, color)) in enumerate(_MARKS.items()):
        hits = [c.index for c in calls if kind in c.kinds]
        if hits:
            y = limit * (1.1 + 0.08 * row)
            ax.scatter(hits, [y] * len(hits), marker=marker, color=color, label=kind, zorder=3)
    for i, event in enumerate(e for e in log.events if e["kind"] == "rebuild"):
        ax.axvline(event["after_call"] + 0.5, color="tab:brown", linestyle="--", linewidth=1,
                   label="rebuild" if i == 0 else None)  # fmt: skip
    biggest = max([c.unmanaged for c in calls] + [0])
    if biggest > top:
        ax.annotate(f"whole history reaches {biggest:,}", (0.99, 0.97), xycoords="axes fraction",
                    ha="right", va="top", fontsize=8, color="tab:red")  # fmt: skip
    ax.set_ylim(0, top)
    ax.set_xlabel("model call")
    ax.set_ylabel("prompt tokens")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# --- whole runs ---------------------------------------------------------------------------------


@dataclass
class RunResult:
    """A finished run: the log, the loss check, the table rows and where the files are."""

    log: RunLog
    check: RunCheck | None
    rows: list[tuple[str, str]]
    files: dict[str, str]
    notes: list[str] = field(default_factory=list)
    answer: str = ""
    """The agent's last text answer."""


def execute(
    *,
    model: Any,
    tools: Sequence[BaseTool],
    turns: Sequence[list[BaseMessage]],
    memory: Any,
    db: Path,
    archive_dir: Path,
    thread: str,
    reset: bool,
    reports: Path,
    system_prompt: str | None = None,
    middleware: Sequence[Any] = (),
    recursion_limit: int = 1_000,
    on_call: Callable[[CallStat], None] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> RunResult:
    """Run `turns` through a `create_agent` agent with `memory` on a SQLite thread, then check."""
    from langchain.agents import create_agent

    notes: list[str] = []
    with open_saver(db) as saver:
        if prepare_thread(saver, thread, reset=reset):
            notes.append(f"thread {thread!r} from an earlier run was reset")
        if reset:
            _clear_archive(archive_dir, thread)
        agent = create_agent(
            model,
            list(tools),
            system_prompt=system_prompt,
            middleware=[memory.middleware(), *middleware],
            checkpointer=saver,
        )
        config: RunnableConfig = {
            "configurable": {"thread_id": thread},
            "recursion_limit": recursion_limit,
        }
        counter = memory.manager.token_counter
        log = run_turns(
            agent,
            turns,
            config,
            counter=counter if isinstance(counter, TiktokenCounter) else None,
            system_prompt=system_prompt,
            on_call=on_call,
        )
        check = check_run(memory, agent, config, log) if log.calls else None
    files = {
        "checkpoints": f"{db} (thread {thread})",
        "archive": str(archive_dir),
        "reports": str(write_reports(reports, log, meta={**(meta or {}), "thread": thread})),
    }
    answers = [
        m.text
        for m in log.produced.values()
        if isinstance(m, AIMessage) and not m.tool_calls and m.text
    ]
    rows = summary_rows(log, check)
    return RunResult(
        log=log,
        check=check,
        rows=rows,
        files=files,
        notes=notes,
        answer=answers[-1] if answers else "",
    )


def replay(
    path: str | Path,
    *,
    window: int,
    reserved: int = 0,
    strategies: str | None = None,
    summarizer: str | None = None,
    db: Path,
    archive_dir: Path,
    thread: str | None = None,
    reports: Path | None = None,
    on_start: Callable[[int], None] | None = None,
    on_call: Callable[[CallStat], None] | None = None,
) -> RunResult:
    """Replay a recorded conversation through a real agent graph with `ContextMemory`."""
    from langgraph_ctx.archive import DirectoryBackend
    from langgraph_ctx.memory import ContextMemory
    from langgraph_ctx.summarize import Summarizer

    messages = with_ids(load_transcript(path))
    if not any(isinstance(m, AIMessage) for m in messages):
        msg = f"{path} has no AI messages: there is nothing to replay"
        raise InputError(msg)
    built = load_strategies(strategies)
    summary_model = Summarizer(model=init_model(summarizer)) if summarizer else Summarizer()
    tools = replay_tools(messages)
    memory = ContextMemory(
        context_window_tokens=window,
        reserved_output_tokens=reserved,
        strategies=built,
        archive=DirectoryBackend(archive_dir),
        summarizer=summary_model,
        expose_recall="recall" not in {t.name for t in tools},
    )
    turns = split_turns(messages)
    replies = [m for m in messages if isinstance(m, AIMessage)]
    model = ScriptedChatModel(replies=replies)
    if on_start is not None:
        on_start(len(replies))
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(path).stem)[:100] or "replay"
    thread_id = thread or f"replay-{stem}"
    result = execute(
        model=model,
        tools=tools,
        turns=[inputs for inputs, _ in turns],
        memory=memory,
        db=db,
        archive_dir=archive_dir,
        thread=thread_id,
        reset=thread is None,
        reports=reports or db.with_name(f"{thread_id}.reports.json"),
        middleware=[end_of_script(model)],
        recursion_limit=4 * len(replies) + 100,
        on_call=on_call,
        meta={"source": str(path), "window": window, "reserved": reserved},
    )
    skipped = sum(1 for m in messages if m.id not in result.log.produced)
    if skipped and not result.log.error:
        result.notes.append(f"{skipped} recorded message(s) were not replayed (no AI turn after)")
    return result


# --- stored threads, transcripts ------------------------------------------------------------


def inspect_thread(db: Path, thread: str, archive_dir: Path) -> dict[str, Any]:
    """What a stored thread holds: ledger, summary, reports, live and full history."""
    from langgraph_ctx.archive import DirectoryBackend
    from langgraph_ctx.memory import ContextMemory

    with open_saver(db, create=False) as saver:
        known = thread_ids(saver)
        if thread not in known:
            listed = ", ".join(known[:10]) or "none"
            msg = f"no thread {thread!r} in {db}; threads there: {listed}"
            raise InputError(msg)
        memory = ContextMemory(context_window_tokens=1, archive=DirectoryBackend(archive_dir))
        view = CheckpointView(saver)
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        values = view.get_state(config).values
        reports = memory.get_reports(view, config)
        try:
            full: list[BaseMessage] | None = memory.get_full_history(view, config)
            full_error = None
        except ArchiveError as exc:
            full, full_error = None, str(exc)
    return {
        "live": list(values.get("messages") or []),
        "ledger": dict(values.get("context") or {}),
        "reports": reports,
        "full": full,
        "full_error": full_error,
    }


def restore_entry(ref_or_id: str, *, thread: str, archive_dir: Path) -> bytes:
    """The archived bytes of one entry (a message, a dump or a text), verified."""
    from langgraph_ctx.archive import Archive, DirectoryBackend, encode_messages

    if not archive_dir.is_dir():
        msg = f"no archive directory at {archive_dir}; pass the --archive a run wrote"
        raise InputError(msg)
    entry = Archive(DirectoryBackend(archive_dir), thread_id=thread).read(ref_or_id)
    if isinstance(entry, BaseMessage):
        return encode_message(entry)
    if isinstance(entry, list):
        return encode_messages(entry)
    return entry.encode("utf-8", "surrogatepass")


def compact_transcript(
    path: str | Path,
    *,
    window: int,
    reserved: int = 0,
    strategies: str | None = None,
    archive_dir: Path,
    thread: str,
) -> tuple[list[BaseMessage], Any, int]:
    """A transcript built down to a budget: `(prompt, report, tokens before)`."""
    from langgraph_ctx.archive import Archive, DirectoryBackend
    from langgraph_ctx.pipeline import ContextManager
    from langgraph_ctx.strategies import Compaction, SlidingWindow

    messages = load_transcript(path)
    built = load_strategies(strategies) or [Compaction(), SlidingWindow()]
    manager = ContextManager(
        context_window_tokens=window,
        reserved_output_tokens=reserved,
        strategies=built,
        auto_compact=True,
        archive=Archive(DirectoryBackend(archive_dir), thread_id=thread),
    )
    before = manager.token_counter(messages)
    result = manager.build(messages)
    return result.messages, result.report, before
