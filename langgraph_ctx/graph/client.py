"""A thread's history served by a LangGraph server, read a page at a time through `langgraph_sdk`.

Under `langgraph dev` or a LangGraph deployment, a UI reads a thread with
`client.threads.get_state(thread_id)`: after a hint rebuild (or with `remove_summarized`)
that state holds a few messages while the archive in the server's store holds the rest.
`server_history_page(client, thread_id)` gives the UI every message, in order, as the
server-side `ContextMemory.get_full_history` would (byte-identical `encode_message` bytes); with
`limit=`/`before=` one page of it (`langgraph_ctx.archive.history.history_page`).

It reads, over HTTP, the thread state (`threads.get_state`) and the insurance dumps its ledger
names (`store.get_item` in the archive's namespace, `("langgraph_ctx", [user,] thread,
"messages")`); it writes nothing. Pass a sync client (`langgraph_sdk.get_sync_client`) to
`server_history_page` and an async one (`get_client`) to `aserver_history_page`.

Example:
    ```python
    from langgraph_sdk import get_sync_client
    from langgraph_ctx.graph.client import server_history_page

    client = get_sync_client(url="http://127.0.0.1:2024")
    for message in server_history_page(client, thread_id, limit=50):
        print(message.type, message.text)
    ```
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict

from langgraph_ctx._effects import MethodCall, Plan, both
from langgraph_ctx._ids import ArchiveRef
from langgraph_ctx.archive._backends import Namespace, from_value, newest_first
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.history import plan_history_page
from langgraph_ctx.errors import ArchiveError, ConfigError

__all__ = [
    "SdkStoreBackend",
    "aserver_history_page",
    "plan_server_history_page",
    "server_history_page",
    "state_messages",
]

_NOT_FOUND = 404


class SdkStoreBackend:
    """A read-only `ArchiveBackend` on a LangGraph server's store, through `langgraph_sdk`.

    `get` and `keys` (a `ListableBackend`, so the archive can be searched) need a sync client
    (`get_sync_client`), `aget` and `akeys` an async one (`get_client`).

    Args:
        client: A `langgraph_sdk` client of the server whose store holds the archive.
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def put(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Refused: the server's graphs write the archive, a UI only reads it."""
        raise ArchiveError(_READ_ONLY)

    async def aput(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Refused, like `put`."""
        raise ArchiveError(_READ_ONLY)

    def _plan_get(self, namespace: Namespace, key: str) -> Plan[bytes | None]:
        try:
            item = yield _SdkCalls(self.client, "SdkStoreBackend.get", "store.get_item")(
                list(namespace), key
            )
        except ConfigError:
            raise
        except Exception as exc:
            if _status(exc) == _NOT_FOUND:
                return None
            raise
        return _bytes(item, namespace, key)

    get, aget = both(
        _plan_get,
        doc="The bytes of one store item, or `None` when the server has none.",
        adoc="Async `get`, for `get_client(...)`.",
    )

    def _plan_keys(self, namespace: Namespace) -> Plan[list[str]]:
        search = _SdkCalls(self.client, "SdkStoreBackend.keys", "store.search_items")
        written: dict[str, str] = {}
        offset = 0
        while True:
            page = yield search(list(namespace), limit=_PAGE, offset=offset)
            items = _page_items(page, namespace, written)
            if items < _PAGE:
                return newest_first(written.items())
            offset += items

    keys, akeys = both(
        _plan_keys,
        doc="""The item keys of `namespace` on the server, newest `updated_at` first.

        Pages `client.store.search_items` (values come along; the server has no keys-only
        listing); items of namespaces below `namespace` are left out.
        """,
        adoc="Async `keys`, for `get_client(...)`.",
    )


_PAGE = 500
"""Items per `search_items` request (each carries its value)."""


def _page_items(page: Any, namespace: Namespace, written: dict[str, str]) -> int:
    """Record the keys of one `search_items` page in `written`; returns the page's length."""
    items = (page or {}).get("items") or []
    for item in items:
        if tuple(item.get("namespace") or ()) == namespace and isinstance(item.get("key"), str):
            written[item["key"]] = str(item.get("updated_at") or item.get("updatedAt") or "")
    return len(items)


_READ_ONLY = (
    "SdkStoreBackend is read-only: it serves UIs reading a thread's history; the graphs "
    "running on the server write the archive"
)


def _discard(pending: Any) -> None:
    """Close a coroutine that will not be awaited (no "never awaited" warning)."""
    close = getattr(pending, "close", None)
    if callable(close):
        close()


class _SdkCalls:
    """A `langgraph_sdk` client method as a `MethodCall` target, for either kind of client.

    `call` (under `run_plan`) refuses the async client's awaitable, `acall` (under
    `arun_plan`) the sync client's value, each naming the twin to use instead.
    """

    def __init__(self, client: Any, caller: str, path: str) -> None:
        self.method = client
        for part in path.split("."):
            self.method = getattr(self.method, part)
        self.caller = caller

    def __call__(self, *args: Any, **kwargs: Any) -> MethodCall:
        """The effect of calling the method with these arguments."""
        return MethodCall(self, "call", (args, kwargs))

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        result = self.method(*args, **kwargs)
        if inspect.isawaitable(result):
            _discard(result)
            msg = f"{self.caller} needs get_sync_client(...); with get_client(...) use {self._a}"
            raise ConfigError(msg)
        return result

    async def acall(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        pending = self.method(*args, **kwargs)
        if not inspect.isawaitable(pending):
            msg = f"{self._a} needs get_client(...); with get_sync_client(...) use {self.caller}"
            raise ConfigError(msg)
        return await pending

    @property
    def _a(self) -> str:
        """The async twin's name (`server_history_page` -> `aserver_history_page`)."""
        head, _, name = self.caller.rpartition(".")
        return f"{head}.a{name}" if head else f"a{name}"


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _bytes(item: Any, namespace: Namespace, key: str) -> bytes | None:
    if item is None:
        return None
    return from_value(item.get("value") or {}, "/".join((*namespace, key)))


def state_messages(values: Mapping[str, Any]) -> tuple[list[BaseMessage], dict[str, Any] | None]:
    """The live messages and the ledger of a thread state as the server sends it (JSON).

    Args:
        values: `client.threads.get_state(thread_id)["values"]`.

    Raises:
        ConfigError: `values` is not a thread state of a graph with a `messages` list.
    """
    if not isinstance(values, Mapping):
        msg = (
            f"expected the thread state's values (a dict), got {type(values).__name__}; pass "
            'client.threads.get_state(thread_id)["values"]'
        )
        raise ConfigError(msg)
    raw = values.get("messages") or []
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        msg = f"the thread state's messages should be a list, got {type(raw).__name__}"
        raise ConfigError(msg)
    messages: list[BaseMessage] = []
    for n, message in enumerate(raw):
        if isinstance(message, BaseMessage):
            messages.append(message)
        elif isinstance(message, Mapping) and isinstance(message.get("type"), str):
            # The server sends `message.model_dump()`; `message_to_dict` wraps the same dict.
            messages.extend(messages_from_dict([{"type": message["type"], "data": message}]))
        else:
            msg = f"message {n} of the thread state is not a serialized message: {message!r:.200}"
            raise ConfigError(msg)
    ledger = values.get("context_ledger")
    return messages, dict(ledger) if isinstance(ledger, Mapping) else None


def _archive(
    client: Any, thread_id: str, ledger: Mapping[str, Any] | None, user_id: str | None
) -> Archive:
    """The thread's archive on the server's store, scoped as the ledger's references say."""
    summary = (ledger or {}).get("summary") or {}
    refs = [
        *(summary.get("dump_refs") or []),
        *([summary["dump_index"]] if summary.get("dump_index") else []),
    ]
    if refs and user_id is None:
        label = ArchiveRef.parse(refs[0]).user
        if label is not None and label.startswith("~"):
            msg = (
                f"thread {thread_id!r} is archived under a user id that is not shown in its "
                "references (it is hashed); pass user_id= (the authenticated user's identity)"
            )
            raise ConfigError(msg)
        user_id = label
    return Archive(SdkStoreBackend(client), thread_id=thread_id, user_id=user_id)


def plan_server_history_page(
    client: Any,
    thread_id: str,
    *,
    limit: int | None = None,
    before: str | None = None,
    user_id: str | None = None,
) -> Plan[list[BaseMessage]]:
    """`server_history_page` as a plan: the thread state, then the dumps its ledger names."""
    values = yield _SdkCalls(client, "server_history_page", "threads.get_state")(thread_id)
    messages, ledger = state_messages(values.get("values") or {})
    archive = _archive(client, thread_id, ledger, user_id)
    return (yield from plan_history_page(messages, ledger, archive, limit=limit, before=before))


server_history_page, aserver_history_page = both(
    plan_server_history_page,
    doc="""A thread's history from a LangGraph server, whole or a page of it, for a UI.

    Whole, the same messages, in the same order and byte for byte, as
    `ContextMemory.get_full_history` in the server's process; `limit`/`before` page it like
    `archive.history.history_page`.

    Args:
        client: `langgraph_sdk.get_sync_client(url=...)` (async: `get_client(...)`).
        thread_id: The thread to show.
        limit: At most this many messages, the newest; `None` for all.
        before: A message id; the page ends just before it (to scroll up).
        user_id: The user the archive is scoped by, needed only when the references hide it
            (an authenticated identity that is not a plain `[A-Za-z0-9_-]` id).

    Raises:
        ConfigError: Bad arguments, an async client, or a state without messages.
        ArchiveError: A dump the ledger names is missing or damaged in the server's store.
    """,
    adoc="Async twin of `server_history_page`, for `langgraph_sdk.get_client(url=...)`.",
)
