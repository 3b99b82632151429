"""A content-addressed, thread-scoped archive for messages that leave the prompt or the state.

Compaction externalizes large tool results here, and summarization writes its insurance dump
here before anything lossy happens. Every entry is stored under the sha256 of its canonical
bytes, so writing the same content twice is harmless and every read is verified.

Layers, from the bottom:

* `ArchiveBackend`: four methods that move bytes (`put`/`get` and `aput`/`aget`).
  `StoreBackend` wraps any LangGraph `BaseStore` (InMemoryStore, PostgresStore, ...);
  `DirectoryBackend` writes owner-only files atomically under a root directory.
* Pure helpers: `encode_message`/`decode_message` and friends define the canonical bytes;
  `ArchiveRef` formats and parses references (`lgctx:<thread>:<kind>:<sha256>`).
* `Archive`: bound to one thread (and optionally one user). Each operation is written once as a
  generator that yields the backend calls it needs; `_run` and `_arun` drive that generator with
  the sync or the async backend methods (the pattern of `httpx.Auth.auth_flow`).

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> from langgraph.store.memory import InMemoryStore
    >>> archive = Archive(InMemoryStore(), thread_id="t1")
    >>> msg = ToolMessage("a long output", tool_call_id="call-1", id="m1")
    >>> ref = archive.put_message(msg)
    >>> ref.startswith("lgctx:t1:message:")
    True
    >>> archive.restore(ref) == msg == archive.restore("m1")
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore

from langgraph_ctx._backends import (
    ArchiveBackend,
    DirectoryBackend,
    Namespace,
    StoreBackend,
)
from langgraph_ctx.errors import (
    ArchiveAccessError,
    ArchiveCorruptError,
    ArchiveEntryNotFoundError,
    ArchiveError,
    ConfigError,
)

__all__ = [
    "Archive",
    "ArchiveBackend",
    "ArchiveRef",
    "DirectoryBackend",
    "RefKind",
    "StoreBackend",
    "decode_message",
    "decode_messages",
    "encode_message",
    "encode_messages",
    "is_archive_ref",
]

NAMESPACE_ROOT = "langgraph_ctx"
"""First label of every archive namespace."""

REF_PREFIX = "lgctx:"
"""Every archive reference starts with this."""

RefKind = Literal["message", "messages", "text"]
"""What a reference points at: one message, a list of messages (insurance dump), or text."""

_REF_KINDS: tuple[str, ...] = get_args(RefKind)
_INDEX_KIND = "index"
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_LABEL = r"(?:[A-Za-z0-9_-]{1,128}|~[0-9a-f]{64})"
_REF_RE = re.compile(
    rf"lgctx:(?:(?P<user>{_LABEL})/)?(?P<thread>{_LABEL}):(?P<kind>[a-z]+):(?P<digest>[0-9a-f]{{64}})"
)
_REF_SHAPE = "`lgctx:<thread>:<kind>:<sha256>` (or `lgctx:<user>/<thread>:<kind>:<sha256>`)"
_UTF8 = "utf-8"
_SURROGATES = "surrogatepass"  # lone surrogates survive the round trip instead of crashing

T = TypeVar("T")


# --- canonical bytes ----------------------------------------------------------------------


def _dumps(obj: Any) -> bytes:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode(_UTF8, _SURROGATES)


def _loads(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode(_UTF8, _SURROGATES))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        msg = f"archive entry {where} is not valid JSON ({exc}); it was damaged after writing"
        raise ArchiveCorruptError(msg) from exc


def encode_message(message: BaseMessage) -> bytes:
    """The canonical bytes of one message: sorted, compact JSON of `message_to_dict`.

    Decoding and encoding again gives the same bytes, which is what makes the archive
    content-addressed and restores byte for byte.
    """
    return _dumps(message_to_dict(message))


def decode_message(data: bytes) -> BaseMessage:
    """Rebuild a message from `encode_message` bytes.

    Raises:
        ArchiveCorruptError: The bytes are not a serialized message.
    """
    obj = _loads(data, "(message)")
    try:
        return messages_from_dict([obj])[0]
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"archive entry does not hold a serialized message: {exc}"
        raise ArchiveCorruptError(msg) from exc


def encode_messages(messages: Sequence[BaseMessage]) -> bytes:
    """The canonical bytes of a list of messages (a JSON list of `message_to_dict` dicts)."""
    return _dumps([message_to_dict(m) for m in messages])


def decode_messages(data: bytes) -> list[BaseMessage]:
    """Rebuild a message list from `encode_messages` bytes.

    Raises:
        ArchiveCorruptError: The bytes are not a serialized message list.
    """
    obj = _loads(data, "(messages)")
    if not isinstance(obj, list):
        msg = f"archive entry should hold a list of messages, found {type(obj).__name__}"
        raise ArchiveCorruptError(msg)
    try:
        return messages_from_dict(obj)
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"archive entry does not hold serialized messages: {exc}"
        raise ArchiveCorruptError(msg) from exc


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _label(identifier: str, what: str) -> str:
    """A store- and path-safe label: the id itself when safe, else `~` + its sha256.

    `~` never appears in a safe id, so a hashed label can not be forged by choosing an id.
    """
    if not isinstance(identifier, str) or not identifier:
        msg = f"{what} must be a non-empty string, got {identifier!r}"
        raise ConfigError(msg)
    if _SAFE_ID.fullmatch(identifier):
        return identifier
    return "~" + _sha256(identifier.encode(_UTF8, _SURROGATES))


# --- references ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArchiveRef:
    """A parsed archive reference, `lgctx:[<user>/]<thread>:<kind>:<sha256>`.

    Thread and user appear as labels: the id itself when it matches `[A-Za-z0-9_-]{1,128}`,
    otherwise `~` followed by the sha256 of the id.

    Example:
        >>> ref = ArchiveRef.parse("lgctx:alice/t1:text:" + "0" * 64)
        >>> (ref.user, ref.thread, ref.kind)
        ('alice', 't1', 'text')
        >>> str(ref) == "lgctx:alice/t1:text:" + "0" * 64
        True
    """

    thread: str
    """Label of the thread that owns the entry."""
    kind: RefKind
    """What the entry holds."""
    digest: str
    """sha256 hex of the entry's canonical bytes (its key in the backend)."""
    user: str | None = None
    """Label of the user that owns the entry, when the archive is user-scoped."""

    def __str__(self) -> str:
        scope = self.thread if self.user is None else f"{self.user}/{self.thread}"
        return f"{REF_PREFIX}{scope}:{self.kind}:{self.digest}"

    @classmethod
    def parse(cls, text: str) -> ArchiveRef:
        """Parse a reference string.

        Raises:
            ArchiveError: The text is not a well-formed reference.
        """
        match = _REF_RE.fullmatch(text) if isinstance(text, str) else None
        if match is None or match["kind"] not in _REF_KINDS:
            msg = (
                f"not an archive reference: {text!r}. A reference looks like {_REF_SHAPE} "
                f"with <kind> one of {', '.join(_REF_KINDS)}; copy it exactly from the "
                "compacted message"
            )
            raise ArchiveError(msg)
        kind = cast(RefKind, match["kind"])
        return cls(thread=match["thread"], kind=kind, digest=match["digest"], user=match["user"])


def is_archive_ref(text: str) -> bool:
    """Whether `text` looks like an archive reference (as opposed to a message id)."""
    return isinstance(text, str) and text.startswith(REF_PREFIX)


# The backends live in _backends.py; they are re-exported here.

# --- the archive --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Put:
    namespace: Namespace
    key: str
    data: bytes


@dataclass(frozen=True, slots=True)
class _Get:
    namespace: Namespace
    key: str


_Flow = Generator[_Put | _Get, bytes | None, T]


class Archive:
    """The archive of one thread: content-addressed entries plus a message-id index.

    Entries live in namespace `("langgraph_ctx", [user,] thread, kind)` under the sha256 of
    their canonical bytes. Reads verify that sha256, refuse references of other threads or
    users, and restore messages equal (`==`) to the originals and byte-identical when
    re-encoded. A backend that fails (a lost connection, a full disk) raises `ArchiveError`
    naming the operation, the entry and the cause (chained as `__cause__`).

    Args:
        backend: An `ArchiveBackend`, or a LangGraph `BaseStore` (wrapped in `StoreBackend`).
        thread_id: The thread whose archive this is.
        user_id: Optional user scope; references then carry `<user>/<thread>`.

    Raises:
        ConfigError: Empty ids or a backend of the wrong type.
    """

    def __init__(
        self,
        backend: ArchiveBackend | BaseStore,
        *,
        thread_id: str,
        user_id: str | None = None,
    ) -> None:
        if isinstance(backend, BaseStore):
            backend = StoreBackend(backend)
        elif not isinstance(backend, ArchiveBackend):
            msg = (
                f"backend must be an ArchiveBackend or a langgraph BaseStore, got "
                f"{type(backend).__name__}; use StoreBackend(store) or DirectoryBackend(path)"
            )
            raise ConfigError(msg)
        self.backend: ArchiveBackend = backend
        self.thread_id = thread_id
        self.user_id = user_id
        self._thread = _label(thread_id, "thread_id")
        self._user = None if user_id is None else _label(user_id, "user_id")

    @classmethod
    def from_config(cls, backend: ArchiveBackend | BaseStore, config: RunnableConfig) -> Archive:
        """The archive of the thread a LangGraph run config names.

        Reads `configurable["thread_id"]` and, when present, `configurable["user_id"]`.

        Raises:
            ConfigError: The config names no thread.
        """
        configurable = config.get("configurable") or {}
        thread_id = configurable.get("thread_id")
        if not thread_id:
            msg = (
                "the run config has no configurable.thread_id, so there is no thread archive "
                'to use; invoke the graph with config={"configurable": {"thread_id": "..."}}'
            )
            raise ConfigError(msg)
        user_id = configurable.get("user_id")
        return cls(
            backend, thread_id=str(thread_id), user_id=None if user_id is None else str(user_id)
        )

    def __repr__(self) -> str:
        user = "" if self.user_id is None else f", user_id={self.user_id!r}"
        return f"Archive({type(self.backend).__name__}, thread_id={self.thread_id!r}{user})"

    # pure pieces ---------------------------------------------------------------------

    def _namespace(self, kind: str) -> Namespace:
        scope = (self._thread,) if self._user is None else (self._user, self._thread)
        return (NAMESPACE_ROOT, *scope, kind)

    def _check(self, ref: str, kind: RefKind | None = None) -> ArchiveRef:
        parsed = ArchiveRef.parse(ref)
        if (parsed.user, parsed.thread) != (self._user, self._thread):
            owner = f"user {self.user_id!r}, thread {self.thread_id!r}"
            if self.user_id is None:
                owner = f"thread {self.thread_id!r}"
            msg = (
                f"reference {ref} belongs to another thread's archive; this archive serves "
                f"only {owner}. Use references from this thread's own messages"
            )
            raise ArchiveAccessError(msg)
        if kind is not None and parsed.kind != kind:
            msg = (
                f"reference {ref} points at a {parsed.kind!r} entry, not a {kind!r} entry; "
                f"use get_{parsed.kind}() (or read()) for it"
            )
            raise ArchiveError(msg)
        return parsed

    # flows: each yields the backend calls it needs and returns the result ---------------

    def _put_flow(self, kind: RefKind, data: bytes) -> _Flow[str]:
        digest = _sha256(data)
        yield _Put(self._namespace(kind), digest, data)
        return str(ArchiveRef(thread=self._thread, kind=kind, digest=digest, user=self._user))

    def _get_flow(self, ref: str, kind: RefKind | None = None) -> _Flow[tuple[RefKind, bytes]]:
        parsed = self._check(ref, kind)
        data = yield _Get(self._namespace(parsed.kind), parsed.digest)
        if data is None:
            msg = (
                f"no archive entry for {ref} in thread {self.thread_id!r}; it was never "
                "written to this backend, or the backend was emptied (an InMemoryStore "
                "forgets everything on restart)"
            )
            raise ArchiveEntryNotFoundError(msg)
        if _sha256(data) != parsed.digest:
            msg = (
                f"archive entry {ref} is corrupt: its bytes hash to {_sha256(data)}, not to "
                "the address they are stored under"
            )
            raise ArchiveCorruptError(msg)
        return parsed.kind, data

    def _put_message_flow(self, message: BaseMessage, index: bool) -> _Flow[str]:
        ref = yield from self._put_flow("message", encode_message(message))
        if index and message.id:
            yield from self._index_flow(message.id, ref)
        return ref

    def _index_flow(self, message_id: str, ref: str) -> _Flow[None]:
        self._check(ref)
        entry = _dumps({"message_id": message_id, "ref": ref})
        yield _Put(self._namespace(_INDEX_KIND), _index_key(message_id), entry)

    def _lookup_flow(self, message_id: str) -> _Flow[str | None]:
        data = yield _Get(self._namespace(_INDEX_KIND), _index_key(message_id))
        if data is None:
            return None
        entry = _loads(data, f"index[{message_id!r}]")
        if not isinstance(entry, dict) or entry.get("message_id") != message_id:
            msg = f"index entry for message id {message_id!r} is corrupt: {entry!r}"
            raise ArchiveCorruptError(msg)
        return str(entry["ref"])

    def _resolve_flow(self, ref_or_message_id: str) -> _Flow[str]:
        if is_archive_ref(ref_or_message_id):
            return ref_or_message_id
        ref = yield from self._lookup_flow(ref_or_message_id)
        if ref is None:
            msg = (
                f"{ref_or_message_id!r} is neither an archive reference like {_REF_SHAPE} nor the "
                f"id of a message archived in thread {self.thread_id!r}"
            )
            raise ArchiveEntryNotFoundError(msg)
        return ref

    def _read_flow(self, ref_or_message_id: str) -> _Flow[BaseMessage | list[BaseMessage] | str]:
        ref = yield from self._resolve_flow(ref_or_message_id)
        kind, data = yield from self._get_flow(ref)
        if kind == "message":
            return decode_message(data)
        if kind == "messages":
            return decode_messages(data)
        return data.decode(_UTF8, _SURROGATES)

    def _restore_flow(self, ref_or_message_id: str) -> _Flow[BaseMessage]:
        ref = yield from self._resolve_flow(ref_or_message_id)
        _, data = yield from self._get_flow(ref, "message")
        return decode_message(data)

    def _get_message_flow(self, ref: str) -> _Flow[BaseMessage]:
        _, data = yield from self._get_flow(ref, "message")
        return decode_message(data)

    def _get_messages_flow(self, ref: str) -> _Flow[list[BaseMessage]]:
        _, data = yield from self._get_flow(ref, "messages")
        return decode_messages(data)

    def _get_text_flow(self, ref: str) -> _Flow[str]:
        _, data = yield from self._get_flow(ref, "text")
        return data.decode(_UTF8, _SURROGATES)

    # drivers --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _backend_errors(self, op: _Put | _Get) -> Iterator[None]:
        """A backend failure (lost connection, full disk...) as an `ArchiveError` naming it."""
        try:
            yield
        except ArchiveError:
            raise
        except Exception as exc:
            what = "write" if isinstance(op, _Put) else "read"
            where = "/".join((*op.namespace, op.key))
            msg = (
                f"archive backend {type(self.backend).__name__} failed to {what} {where} "
                f"(thread {self.thread_id!r}): {type(exc).__name__}: {exc}"
            )
            raise ArchiveError(msg) from exc

    def _run(self, flow: _Flow[T]) -> T:
        result: bytes | None = None
        while True:
            try:
                op = flow.send(result)
            except StopIteration as stop:
                return cast(T, stop.value)
            with self._backend_errors(op):
                if isinstance(op, _Put):
                    self.backend.put(op.namespace, op.key, op.data)
                    result = None
                else:
                    result = self.backend.get(op.namespace, op.key)

    async def _arun(self, flow: _Flow[T]) -> T:
        result: bytes | None = None
        while True:
            try:
                op = flow.send(result)
            except StopIteration as stop:
                return cast(T, stop.value)
            with self._backend_errors(op):
                if isinstance(op, _Put):
                    await self.backend.aput(op.namespace, op.key, op.data)
                    result = None
                else:
                    result = await self.backend.aget(op.namespace, op.key)

    # public API -------------------------------------------------------------------------

    def put_message(self, message: BaseMessage, *, index: bool = True) -> str:
        """Archive one message and return its reference.

        Args:
            message: The message to archive, exactly as it is.
            index: Also record `message.id -> reference`, so `restore(message.id)` works.

        Returns:
            The reference, `lgctx:<thread>:message:<sha256>`.
        """
        return self._run(self._put_message_flow(message, index))

    async def aput_message(self, message: BaseMessage, *, index: bool = True) -> str:
        """Async `put_message`."""
        return await self._arun(self._put_message_flow(message, index))

    def put_messages(self, messages: Sequence[BaseMessage]) -> str:
        """Archive a list of messages as one entry (the insurance dump before a summary).

        Returns:
            The reference, `lgctx:<thread>:messages:<sha256>`.
        """
        return self._run(self._put_flow("messages", encode_messages(messages)))

    async def aput_messages(self, messages: Sequence[BaseMessage]) -> str:
        """Async `put_messages`."""
        return await self._arun(self._put_flow("messages", encode_messages(messages)))

    def put_text(self, text: str) -> str:
        """Archive a piece of text and return its reference (`...:text:<sha256>`)."""
        return self._run(self._put_flow("text", text.encode(_UTF8, _SURROGATES)))

    async def aput_text(self, text: str) -> str:
        """Async `put_text`."""
        return await self._arun(self._put_flow("text", text.encode(_UTF8, _SURROGATES)))

    def get_message(self, ref: str) -> BaseMessage:
        """The message a `message` reference points at.

        Raises:
            ArchiveError: `ref` is malformed or points at another kind of entry.
            ArchiveAccessError: `ref` belongs to another thread or user.
            ArchiveEntryNotFoundError: Nothing is stored under `ref`.
            ArchiveCorruptError: The stored bytes do not hash to `ref`'s sha256.
        """
        return self._run(self._get_message_flow(ref))

    async def aget_message(self, ref: str) -> BaseMessage:
        """Async `get_message`."""
        return await self._arun(self._get_message_flow(ref))

    def get_messages(self, ref: str) -> list[BaseMessage]:
        """The message list a `messages` reference points at (errors as `get_message`)."""
        return self._run(self._get_messages_flow(ref))

    async def aget_messages(self, ref: str) -> list[BaseMessage]:
        """Async `get_messages`."""
        return await self._arun(self._get_messages_flow(ref))

    def get_text(self, ref: str) -> str:
        """The text a `text` reference points at (errors as `get_message`)."""
        return self._run(self._get_text_flow(ref))

    async def aget_text(self, ref: str) -> str:
        """Async `get_text`."""
        return await self._arun(self._get_text_flow(ref))

    def index_message(self, message_id: str, ref: str) -> None:
        """Record that the message with id `message_id` is archived under `ref`."""
        self._run(self._index_flow(message_id, ref))

    async def aindex_message(self, message_id: str, ref: str) -> None:
        """Async `index_message`."""
        await self._arun(self._index_flow(message_id, ref))

    def lookup(self, message_id: str) -> str | None:
        """The reference recorded for a message id, or `None`."""
        return self._run(self._lookup_flow(message_id))

    async def alookup(self, message_id: str) -> str | None:
        """Async `lookup`."""
        return await self._arun(self._lookup_flow(message_id))

    def restore(self, ref_or_message_id: str) -> BaseMessage:
        """The archived message, by `message` reference or by the id of an indexed message.

        Raises:
            ArchiveEntryNotFoundError: Unknown message id, or nothing stored under the ref.
            ArchiveAccessError: The reference belongs to another thread or user.
            ArchiveCorruptError: The stored bytes do not match their address.
        """
        return self._run(self._restore_flow(ref_or_message_id))

    async def arestore(self, ref_or_message_id: str) -> BaseMessage:
        """Async `restore`."""
        return await self._arun(self._restore_flow(ref_or_message_id))

    def read(self, ref_or_message_id: str) -> BaseMessage | list[BaseMessage] | str:
        """Whatever a reference (of any kind) or an indexed message id points at."""
        return self._run(self._read_flow(ref_or_message_id))

    async def aread(self, ref_or_message_id: str) -> BaseMessage | list[BaseMessage] | str:
        """Async `read`."""
        return await self._arun(self._read_flow(ref_or_message_id))


def _index_key(message_id: str) -> str:
    return _sha256(message_id.encode(_UTF8, _SURROGATES))
