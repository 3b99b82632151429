"""Reading checkpoints someone else wrote: a serializer that treats them as data.

LangGraph's default `JsonPlusSerializer` revives a msgpack extension value by importing the
module and calling the function the bytes name. On checkpoints a graph wrote itself that is
how state round-trips; on a database someone handed over (a bug report, a copy of production
data fed to `langgraph-ctx frontier`) it runs whatever the file names: a blob naming `os.mkdir`
creates a directory. `LANGGRAPH_STRICT_MSGPACK=true` blocks that, but it is an environment
setting, off by default, and a blocked type comes back as its raw arguments, silently.

`StrictSerializer` reads the bytes twice. The first pass only looks: it walks every
extension value, nested ones included, without importing or calling anything, and refuses
the first type outside `ALLOWED_TYPES` (the types a LangGraph agent's state holds: LangChain
messages, LangGraph's own types, plain data; the package's ledger is plain data) with an
`UntrustedCheckpointError` naming it. Only bytes that pass are handed to the regular
serializer, restricted to its own allowlist. The legacy "json" format is checked alike (only
LangChain message constructors, never a secret), and pickle is never read.

Every command of `langgraph-ctx` that opens a checkpoint uses it, whatever the environment
says. A graph that reads its own checkpoints does not need it, but can use it::

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph_ctx.graph.serde import StrictSerializer

    saver = SqliteSaver(conn, serde=StrictSerializer())
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_ctx.errors import UntrustedCheckpointError, shorten

__all__ = ["ALLOWED_METHODS", "ALLOWED_TYPES", "StrictSerializer"]

_MESSAGE_MODULES = {
    "langchain_core.messages.base": ("BaseMessage", "BaseMessageChunk"),
    "langchain_core.messages.human": ("HumanMessage", "HumanMessageChunk"),
    "langchain_core.messages.ai": ("AIMessage", "AIMessageChunk"),
    "langchain_core.messages.system": ("SystemMessage", "SystemMessageChunk"),
    "langchain_core.messages.chat": ("ChatMessage", "ChatMessageChunk"),
    "langchain_core.messages.tool": ("ToolMessage", "ToolMessageChunk"),
    "langchain_core.messages.function": ("FunctionMessage", "FunctionMessageChunk"),
    "langchain_core.messages.modifier": ("RemoveMessage",),
}

ALLOWED_TYPES: frozenset[tuple[str, str]] = frozenset(
    {
        *((module, name) for module, names in _MESSAGE_MODULES.items() for name in names),
        ("langchain_core.documents.base", "Document"),
        # LangGraph's own values in a checkpoint: pending sends, interrupts, resumes.
        ("langgraph.types", "Send"),
        ("langgraph.types", "Interrupt"),
        ("langgraph.types", "Command"),
        ("langgraph.types", "Overwrite"),
        # Plain data msgpack has no native form for.
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("uuid", "UUID"),
        ("decimal", "Decimal"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("collections", "deque"),
        ("pathlib", "Path"),
        ("pathlib", "PosixPath"),
        ("pathlib", "WindowsPath"),
        ("pathlib._local", "Path"),
        ("pathlib._local", "PosixPath"),
        ("pathlib._local", "WindowsPath"),
        ("zoneinfo", "ZoneInfo"),
    }
)
"""The (module, name) pairs a checkpoint may construct: what a LangGraph agent's state holds."""

ALLOWED_METHODS: frozenset[tuple[str, str, str]] = frozenset(
    {("datetime", "datetime", "fromisoformat")}
)
"""The (module, name, method) calls a checkpoint may make (LangGraph writes datetimes so)."""

# Extension codes of LangGraph's msgpack format (langgraph.checkpoint.serde.jsonplus).
_CONSTRUCTORS = frozenset({0, 1, 2, 4, 5})  # single arg, args, kwargs, pydantic v1 and v2
_METHOD = 3
_NUMPY = 6
_SNAPSHOT = 7
_KNOWN = _CONSTRUCTORS | {_METHOD, _NUMPY, _SNAPSHOT}
_UNPACK = ormsgpack.OPT_NON_STR_KEYS


class StrictSerializer(JsonPlusSerializer):
    """A `JsonPlusSerializer` that reads only the types a LangGraph agent's state holds.

    Writing is unchanged. Reading refuses, before anything is imported or called, any value
    whose type is not in `ALLOWED_TYPES` (or call not in `ALLOWED_METHODS`), any legacy JSON
    constructor other than a LangChain message, any secret and any pickle.

    Raises:
        UntrustedCheckpointError: On `loads_typed`, naming the first type refused.
    """

    def __init__(self) -> None:
        try:  # langgraph-checkpoint 3.0 has no allowlist argument; the first pass guards alone
            super().__init__(allowed_msgpack_modules=None)
        except TypeError:
            super().__init__()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Check `data` without constructing anything, then read it.

        Raises:
            UntrustedCheckpointError: The bytes name a type or call outside the allowlist, or
                are pickle.
        """
        kind, payload = data
        if kind == "msgpack":
            _check_msgpack(payload)
        elif kind == "json":
            _check_json(payload)
        elif kind not in {"null", "bytes", "bytearray"}:
            msg = (
                f"a checkpoint value is stored as {shorten(kind)}, which is never read from a "
                "checkpoint we did not write (it could run code); only msgpack and JSON are read"
            )
            raise UntrustedCheckpointError(msg)
        return super().loads_typed(data)


def _refuse(what: str) -> UntrustedCheckpointError:
    msg = (
        f"the checkpoint names {what}, which is not a type a LangGraph agent's state holds; "
        "it was not imported or called. Read only checkpoints from a source you trust with "
        "LangGraph's own serializer"
    )
    return UntrustedCheckpointError(msg)


def _check_msgpack(payload: bytes) -> None:
    refused: list[str] = []

    def look(code: int, data: bytes) -> None:
        # Only looks: never imports or calls. Errors inside an ext hook reach the caller as
        # ormsgpack's generic "ext_hook failed", so the refused name is kept on the side.
        if refused:
            return None
        if code not in _KNOWN:
            refused.append(f"an unknown extension code {code}")
            return None
        inner = ormsgpack.unpackb(data, ext_hook=look, option=_UNPACK)
        if code in _CONSTRUCTORS or code == _METHOD:
            if not isinstance(inner, (list, tuple)) or len(inner) < 3:
                refused.append(f"a malformed extension value (code {code})")
                return None
            module, name = str(inner[0]), str(inner[1])
            if code == _METHOD:
                method = str(inner[3]) if len(inner) > 3 else "?"
                if (module, name, method) not in ALLOWED_METHODS:
                    refused.append(shorten(f"{module}.{name}.{method}", 120))
            elif (module, name) not in ALLOWED_TYPES:
                refused.append(shorten(f"{module}.{name}", 120))
        return None

    try:
        ormsgpack.unpackb(payload, ext_hook=look, option=_UNPACK)
    except (ValueError, TypeError) as exc:
        if not refused:
            msg = f"a checkpoint value is not valid msgpack: {shorten(str(exc))}"
            raise UntrustedCheckpointError(msg) from None
    if refused:
        raise _refuse(refused[0])


def _check_json(payload: bytes) -> None:
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        msg = f"a checkpoint value is not valid JSON: {shorten(str(exc))}"
        raise UntrustedCheckpointError(msg) from None
    for item in _dicts(value):
        if "lc" not in item:
            continue
        kind, ident = item.get("type"), item.get("id")
        if kind == "not_implemented":
            continue  # LangChain's placeholder for what it could not serialize: inert
        path = ident if isinstance(ident, list) else []
        if kind == "constructor" and len(path) >= 2:
            module, name = ".".join(map(str, path[:-1])), str(path[-1])
            if name in _json_message_names(module):
                continue
        raise _refuse(shorten(f"{kind} {'.'.join(map(str, path))}", 120))


def _json_message_names(module: str) -> tuple[str, ...]:
    # LangChain's serialized ids name the public path (langchain.schema.messages.AIMessage) or
    # the defining module (langchain_core.messages.ai.AIMessage).
    names = tuple(n for names in _MESSAGE_MODULES.values() for n in names)
    if module in {"langchain", "langchain.schema.messages", "langchain_core.messages"}:
        return names
    return _MESSAGE_MODULES.get(module, ())


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    stack = [value]
    while stack:  # iterative: a deep document must not exhaust the recursion limit here
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
