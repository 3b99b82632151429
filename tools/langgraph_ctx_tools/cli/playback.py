"""A recorded conversation as the replay's input, and what plays it back.

The transcript, tool schemas and strategy configs a command reads (`load_transcript`,
`load_tools`, `load_strategies`), the recording cut into user turns (`split_turns`), and what
replays it through a real agent: the recorded AI turns from the package's `ScriptedChatModel`
(`replay_model`) and one real tool per recorded tool name answering each call with its
recorded output (`replay_tools`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    messages_from_dict,
)
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import create_model

from langgraph_ctx.errors import InputError, reason_of, shorten
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.tokens.exact import TiktokenCounter
from langgraph_ctx_tools.cli.inputs import read_json


def load_transcript(path: str | Path) -> list[BaseMessage]:
    """Messages from a JSON file (plain or gzip-compressed) holding `messages_to_dict` output.

    Raises:
        InputError: Missing file, not JSON, or not a list of serialized LangChain messages.
    """
    data = read_json(path, "transcript", expected=TRANSCRIPT)
    if not isinstance(data, list):
        msg = (
            f"{path} holds a JSON {type(data).__name__}, not a message list; expected the "
            "output of langchain_core.messages.messages_to_dict(messages)"
        )
        raise InputError(msg)
    try:
        return messages_from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        msg = (
            f"{path} is not a LangChain message list ({type(exc).__name__}: {reason}); expected "
            'items like {"type": "human", "data": {"content": "..."}} from messages_to_dict'
        )
        raise InputError(msg) from exc


TRANSCRIPT = "a message JSON file (the output of langchain_core.messages.messages_to_dict)"
"""What a transcript file holds, as the errors about one say."""


def load_strategies(value: str | None) -> list[Any] | None:
    """Strategy configs from JSON text or from a JSON file (None: the default strategies)."""
    if value is None:
        return None
    text = value
    if not value.lstrip().startswith(("[", "{")):
        if not Path(value).is_file():
            msg = f"--strategies {shorten(value)} is neither JSON nor an existing file"
            raise InputError(msg)
        text = json.dumps(read_json(value, "strategies"))
    from langgraph_ctx.strategies import strategies_from_config

    return strategies_from_config(text)  # ConfigError says what is wrong


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """Tool schemas (OpenAI format, or bare function schemas) from a JSON file."""
    data = read_json(path, "tools")
    items = data if isinstance(data, list) else [data]
    try:
        return [convert_to_openai_tool(item) for item in items]
    except (TypeError, ValueError, KeyError) as exc:
        msg = f"{path} does not hold tool schemas: {exc}"
        raise InputError(msg) from exc


def init_model(spec: str) -> BaseChatModel:
    """`init_chat_model("provider:model")`, with any failure turned into one clear line."""
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec)
    except Exception as exc:  # missing package, missing key, unknown provider
        msg = f"cannot use model {shorten(spec)}: {reason_of(exc)}"
        raise InputError(msg) from exc


NO_MORE_TURNS = "(the recording has no more AI turns)"
"""What the replay model answers once the recording is used up."""


def replay_model(replies: Sequence[AIMessage]) -> ScriptedChatModel:
    """The package's `ScriptedChatModel` replaying recorded AI messages in order.

    Its replies carry the exact tiktoken count of each prompt in `usage_metadata`, as a
    provider would report it, so the hint rebuild after a turn sees real prompt sizes.
    """
    return ScriptedChatModel(
        messages=iter(list(replies)),
        fallback=NO_MORE_TURNS,
        usage_counter=TiktokenCounter("gpt-4o"),
        profile=None,
    )


def end_of_script(model: ScriptedChatModel, replies: int) -> Any:
    """Middleware that ends the agent's turn once the recording has no AI turn left.

    A recording may stop after a tool result (the final submit); the agent would call the model
    once more, and that call is not part of the recording.
    """
    from langchain.agents.middleware import AgentMiddleware, hook_config

    class EndOfScript(AgentMiddleware):  # type: ignore[type-arg]
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return {"jump_to": "end"} if len(model.prompts) >= replies else None

    return EndOfScript()


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


def replay_tools(
    messages: Sequence[BaseMessage], *, calls: list[str] | None = None
) -> list[BaseTool]:
    """One tool per tool name the recording calls, answering with the recorded outputs.

    A call is answered by the recorded `ToolMessage` with its `tool_call_id` (same content,
    status and id); a call the recording never answered gets a short note.

    Args:
        messages: The recording: its AI messages' tool calls give the tools and their argument
            types, its tool messages the answers. Other messages are ignored.
        calls: When given, every call id is appended to it in the order the tools ran.
    """
    outputs = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    examples: dict[str, list[dict[str, Any]]] = {}
    for msg in messages:
        if isinstance(msg, AIMessage):
            for call in msg.tool_calls:
                examples.setdefault(call["name"], []).append(dict(call.get("args") or {}))
    return [_replay_tool(name, args, outputs, calls) for name, args in sorted(examples.items())]


def _replay_tool(
    name: str,
    examples: list[dict[str, Any]],
    outputs: Mapping[str, ToolMessage],
    calls: list[str] | None,
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
        if calls is not None:
            calls.append(tool_call_id)
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
