"""`Archive`: the content-addressed, thread-scoped archive of messages that leave the prompt.

Compaction externalizes large tool results here, and summarization writes its insurance dump
here before anything lossy happens. Every entry is stored under the sha256 of its canonical
bytes, so writing the same content twice is harmless and every read is verified.

`Archive` is bound to one thread (and optionally one user). Each operation is written once as a
plan (`plan_put_message`, `plan_read`, ...) that yields `BackendPut`/`BackendGet` effects and
turns a backend failure into an `ArchiveError`; the sync methods are derived from that plan by
`synchronous` (`run_plan` of it), and other plans, sync or async, compose it with `yield from`
(an async caller drives its plan with `arun_plan`).

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

import logging
import re
import sys
from collections.abc import Sequence

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore

from langgraph_ctx._effects import BackendGet, BackendKeys, Plan, synchronous
from langgraph_ctx._ids import REF_SHAPE, ArchiveRef, RefKind, is_archive_ref, sha256_hex
from langgraph_ctx._lru import LRUCache
from langgraph_ctx.archive._backends import (
    ArchiveBackend,
    Namespace,
    StoreBackend,
    cannot_list,
)
from langgraph_ctx.archive.codec import (
    SURROGATES,
    UTF8,
    decode_message,
    decode_messages,
    dumps,
    encode_message,
    encode_messages,
    loads,
)
from langgraph_ctx.archive.line_index import Entry, put_effect
from langgraph_ctx.checks import check_str
from langgraph_ctx.errors import (
    ArchiveAccessError,
    ArchiveCorruptError,
    ArchiveEntryNotFoundError,
    ArchiveError,
    ConfigError,
    shorten,
)

logger = logging.getLogger("langgraph_ctx.archive")  # the name it always had
"""Warnings for what a run survives but an operator should see."""

NAMESPACE_ROOT = "langgraph_ctx"
"""First label of every archive namespace."""

_INDEX_KIND = "index"
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_HEX = b"0123456789abcdef"

REFS_BYTES = 16 * 1024 * 1024
"""Most memory the per-process record of listed references takes (`Archive.plan_refs`: a
thread's references, about 200 bytes each), least recently listed first dropped."""


def _digests(keys: list[str]) -> list[str]:
    """The keys that are entry digests (a store's namespace may hold other keys), in order.

    Checked for the whole listing at once at C speed (a thread lists up to 50,000 keys a
    first search): every key 64 characters, and nothing left of them but hex digits once
    those are deleted; else key by key.
    """
    if set(map(len, keys)) <= {64}:
        try:
            if not "".join(keys).encode("ascii").translate(None, _HEX):
                return keys
        except UnicodeEncodeError:
            pass
    return [k for k in keys if len(k) == 64 and _DIGEST.fullmatch(k)]


def _refs_size(prefix: str, listed: tuple[list[str], list[str]]) -> int:
    keys, refs = listed  # the keys' strings are the listing's own: counted as pointers
    return sys.getsizeof(prefix) + sys.getsizeof(keys) + sum(map(sys.getsizeof, refs)) + 200


_REFS: LRUCache[str, tuple[list[str], list[str]]] = LRUCache(REFS_BYTES, size=_refs_size)
"""By reference prefix (thread, kind, user): the keys last listed and their references.
References are a function of the prefix and the keys, so the keys equal (a listing kept by
the backend: the same strings, compared by identity first) give the same references."""


def _label(identifier: str, what: str) -> str:
    """A store- and path-safe label: the id itself when safe, else `~` + its sha256.

    `~` never appears in a safe id, so a hashed label can not be forged by choosing an id.
    """
    if not isinstance(identifier, str) or not identifier:
        msg = f"{what} must be a non-empty string, got {identifier!r}"
        raise ConfigError(msg)
    if _SAFE_ID.fullmatch(identifier):
        return identifier
    return "~" + sha256_hex(identifier.encode(UTF8, SURROGATES))


# --- the archive --------------------------------------------------------------------------


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
        where: What the backend is, said by an error that found nothing in it (a reader who
            looked in the wrong place learns where it looked); default: the backend's type.
            `ContextMemory.archive_for` says which of its rules chose the backend.

    Raises:
        ConfigError: Empty ids or a backend of the wrong type.
    """

    def __init__(
        self,
        backend: ArchiveBackend | BaseStore,
        *,
        thread_id: str,
        user_id: str | None = None,
        where: str | None = None,
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
        check_str("where", where, optional=True, example="the graph's store", owner="Archive")
        self.where = where if where is not None else f"its backend ({type(backend).__name__})"
        self.thread_id = thread_id
        self.user_id = user_id
        self._thread = _label(thread_id, "thread_id")
        self._user = None if user_id is None else _label(user_id, "user_id")

    @classmethod
    def from_config(
        cls,
        backend: ArchiveBackend | BaseStore,
        config: RunnableConfig,
        *,
        where: str | None = None,
    ) -> Archive:
        """The archive of the thread a LangGraph run config names.

        Reads `configurable["thread_id"]` and the user the way `config_identity` does: the
        authenticated user when the LangGraph server provides one, else `user_id`, where an
        empty string (what `langgraph dev` writes without custom auth) means no user. `where`
        is as for `Archive`.

        Raises:
            ConfigError: The config names no thread.
        """
        thread_id, user_id = config_identity(config)
        return cls(backend, thread_id=thread_id, user_id=user_id, where=where)

    def __repr__(self) -> str:
        user = "" if self.user_id is None else f", user_id={self.user_id!r}"
        return f"Archive({type(self.backend).__name__}, thread_id={self.thread_id!r}{user})"

    def namespace(self, kind: str) -> Namespace:
        """The backend namespace of this thread's `kind` entries."""
        scope = (self._thread,) if self._user is None else (self._user, self._thread)
        return (NAMESPACE_ROOT, *scope, kind)

    def _check(self, ref: str, kind: RefKind | None = None) -> ArchiveRef:
        parsed = ArchiveRef.parse(ref)
        if (parsed.user, parsed.thread) != (self._user, self._thread):
            mine = "" if self.user_id is None else f"user {self.user_id!r}, "
            owner = f"{mine}thread {self.thread_id!r}"
            theirs = "" if parsed.user is None else f"user {parsed.user!r}, "
            belongs = f"{theirs}thread {parsed.thread!r}"
            msg = (
                f"reference {ref} belongs to another thread's archive ({belongs}); this "
                f"archive serves only {owner}. Use references from this thread's own messages"
            )
            raise ArchiveAccessError(msg)
        if kind is not None and parsed.kind != kind:
            msg = (
                f"reference {ref} points at a {parsed.kind!r} entry, not a {kind!r} entry; "
                "use read() for it"
            )
            raise ArchiveError(msg)
        return parsed

    # plans: each yields the backend calls it needs and returns the result -------------

    def _backend_error(
        self, what: str, namespace: Namespace, key: str, exc: Exception
    ) -> ArchiveError:
        """A backend failure (lost connection, full disk...) as an `ArchiveError` naming it."""
        where = "/".join((*namespace, key))
        msg = (
            f"archive backend {type(self.backend).__name__} failed to {what} {where} "
            f"(thread {self.thread_id!r}): {type(exc).__name__}: {exc}"
        )
        logger.warning(msg)
        return ArchiveError(msg)

    def _put(
        self,
        namespace: Namespace,
        key: str,
        data: bytes,
        indexed: tuple[str, RefKind, Entry] | None = None,
    ) -> Plan[None]:
        try:  # with `indexed`: the entry's lines too, in the same transaction (`put_effect`)
            yield put_effect(self.backend, namespace, key, data, indexed)
        except ArchiveError:
            raise
        except Exception as exc:
            raise self._backend_error("write", namespace, key, exc) from exc

    def _get(self, namespace: Namespace, key: str) -> Plan[bytes | None]:
        try:
            data: bytes | None = yield BackendGet(self.backend, namespace, key)
        except ArchiveError:
            raise
        except Exception as exc:
            raise self._backend_error("read", namespace, key, exc) from exc
        return data

    def _put_entry(self, kind: RefKind, data: bytes, entry: Entry) -> Plan[str]:
        digest, namespace = sha256_hex(data), self.namespace(kind)
        ref = str(ArchiveRef(thread=self._thread, kind=kind, digest=digest, user=self._user))
        yield from self._put(namespace, digest, data, (ref, kind, entry))
        return ref

    def _get_entry(self, ref: str, kind: RefKind | None = None) -> Plan[tuple[RefKind, bytes]]:
        parsed = self._check(ref, kind)
        data = yield from self._get(self.namespace(parsed.kind), parsed.digest)
        if data is None:
            msg = (
                f"no archive entry for {ref} in thread {self.thread_id!r}; looked in {self.where}. "
                "It was never written there, or that was emptied (an InMemoryStore on restart)"
            )
            raise ArchiveEntryNotFoundError(msg)
        if sha256_hex(data) != parsed.digest:
            msg = (
                f"archive entry {ref} is corrupt: its bytes hash to {sha256_hex(data)}, not to "
                "the address they are stored under"
            )
            raise ArchiveCorruptError(msg)
        return parsed.kind, data

    def _resolve(self, ref_or_message_id: str) -> Plan[str]:
        if not isinstance(ref_or_message_id, str) or not ref_or_message_id:
            msg = (
                f"expected an archive reference or a message id (a non-empty str), got "
                f"{type(ref_or_message_id).__name__} {shorten(ref_or_message_id)}; pass a "
                f"reference like {REF_SHAPE} from a placeholder or the ledger, or a message's id"
            )
            raise ArchiveEntryNotFoundError(msg)
        if is_archive_ref(ref_or_message_id):
            return ref_or_message_id
        ref = yield from self.plan_lookup(ref_or_message_id)
        if ref is None:
            msg = (
                f"{shorten(ref_or_message_id)} is neither an archive reference like {REF_SHAPE} "
                f"nor the id of a message archived in thread {self.thread_id!r}; looked in "
                f"{self.where}. Only messages archived one by one (compacted or pruned tool "
                "outputs) are found by id; a message a summary replaced is in the summary's "
                "insurance dump, which `get_full_history` (`full_history`) reads"
            )
            raise ArchiveEntryNotFoundError(msg)
        return ref

    def plan_refs(self, kind: RefKind) -> Plan[list[str]]:
        """The references of this thread's `kind` entries, newest write first (for search).

        The backend lists the keys (a SQL store keeps its last listing while the store's
        version of it holds: `sql_store`); the references made of the same keys are the
        ones made last time (`_REFS`), not made again.

        Raises:
            ArchiveError: The backend can not list (see `ListableBackend`) or failed to.
        """
        namespace = self.namespace(kind)
        if not callable(getattr(self.backend, "keys", None)):
            raise ArchiveError(cannot_list(self.backend))
        try:
            keys: list[str] = yield BackendKeys(self.backend, namespace)
        except Exception as exc:
            raise self._backend_error("list", namespace, "*", exc) from exc
        prefix = str(ArchiveRef(self._thread, kind, "0" * 64, user=self._user))[:-64]
        kept = _REFS.get(prefix)
        if kept is not None and kept[0] == keys:
            return list(kept[1])
        refs = [prefix + k for k in _digests(keys)]
        _REFS.put(prefix, (list(keys), refs))  # a copy: a backend may reuse its list
        return list(refs)

    def plan_put_message(self, message: BaseMessage, *, index: bool = True) -> Plan[str]:
        """`put_message` as a plan, to compose with `yield from`."""
        ref = yield from self._put_entry("message", encode_message(message), message)
        if index and message.id:
            yield from self.plan_index_message(message.id, ref)
        return ref

    def plan_put_messages(self, messages: Sequence[BaseMessage]) -> Plan[str]:
        """`put_messages` as a plan."""
        return (yield from self._put_entry("messages", encode_messages(messages), messages))

    def plan_put_text(self, text: str) -> Plan[str]:
        """`put_text` as a plan."""
        return (yield from self._put_entry("text", text.encode(UTF8, SURROGATES), text))

    def plan_index_message(self, message_id: str, ref: str) -> Plan[None]:
        """Record that the message with id `message_id` is archived under `ref`."""
        self._check(ref)
        entry = dumps({"message_id": message_id, "ref": ref})
        yield from self._put(self.namespace(_INDEX_KIND), _index_key(message_id), entry)

    def plan_lookup(self, message_id: str) -> Plan[str | None]:
        """`lookup` as a plan."""
        data = yield from self._get(self.namespace(_INDEX_KIND), _index_key(message_id))
        if data is None:
            return None
        entry = loads(data, f"index[{message_id!r}]")
        if not isinstance(entry, dict) or entry.get("message_id") != message_id:
            msg = f"index entry for message id {message_id!r} is corrupt: {entry!r}"
            raise ArchiveCorruptError(msg)
        return str(entry["ref"])

    def plan_restore(self, ref_or_message_id: str) -> Plan[BaseMessage]:
        """`restore` as a plan."""
        ref = yield from self._resolve(ref_or_message_id)
        _, data = yield from self._get_entry(ref, "message")
        return decode_message(data)

    def plan_read(self, ref_or_message_id: str) -> Plan[BaseMessage | list[BaseMessage] | str]:
        """`read` as a plan."""
        ref = yield from self._resolve(ref_or_message_id)
        kind, data = yield from self._get_entry(ref)
        if kind == "message":
            return decode_message(data)
        if kind == "messages":
            return decode_messages(data)
        return data.decode(UTF8, SURROGATES)

    # public API: the sync callable of each plan (async callers compose the plans) ---------

    put_message = synchronous(
        plan_put_message,
        doc="""Archive one message and return its reference.

        Args:
            message: The message to archive, exactly as it is.
            index: Also record `message.id -> reference`, so `restore(message.id)` works.

        Returns:
            The reference, `lgctx:<thread>:message:<sha256>`.
        """,
    )

    put_messages = synchronous(
        plan_put_messages,
        doc="""Archive a list of messages as one entry (the insurance dump before a summary).

        Returns:
            The reference, `lgctx:<thread>:messages:<sha256>`.
        """,
    )

    put_text = synchronous(
        plan_put_text,
        doc="Archive a piece of text and return its reference (`...:text:<sha256>`).",
    )

    lookup = synchronous(plan_lookup, doc="The reference recorded for a message id, or `None`.")

    restore = synchronous(
        plan_restore,
        doc="""The archived message, by `message` reference or by the id of an indexed message.

        Raises:
            ArchiveEntryNotFoundError: Unknown message id, or nothing stored under the ref.
            ArchiveAccessError: The reference belongs to another thread or user.
            ArchiveCorruptError: The stored bytes do not match their address.
        """,
    )

    read = synchronous(
        plan_read,
        doc="""Whatever a reference or an indexed message id points at.

        A message (from `put_message`), a message list (an insurance dump, from
        `put_messages`) or a text (from `put_text`).

        The one way to read the archive; `restore` is its typed form for single messages.

        Raises:
            ArchiveEntryNotFoundError: Unknown message id, or nothing stored under the ref.
            ArchiveAccessError: The reference belongs to another thread or user.
            ArchiveCorruptError: The stored bytes do not match their address.
        """,
    )


def config_identity(config: RunnableConfig) -> tuple[str, str | None]:
    """The `(thread_id, user_id)` a run config names; the one owner of run identity.

    The user is, in order: `configurable["langgraph_auth_user_id"]` (the LangGraph server's
    authenticated user), the `identity` of `configurable["langgraph_auth_user"]` (the user
    object the server hands the runtime as `Runtime.server_info.user`), then
    `configurable["user_id"]`. Empty values mean "not given": without custom auth the server
    writes `user_id=""`, which is no user scope. The authenticated user wins, so a caller
    can not reach another user's archive by choosing `user_id`.

    Raises:
        ConfigError: The config names no thread.
    """
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        msg = (
            "the run config has no configurable.thread_id, so there is no conversation whose "
            "archive to use (a graph without a checkpointer needs one too: the archive is never "
            'shared between invocations); invoke the graph with config={"configurable": '
            '{"thread_id": "..."}}, one id per conversation (str(uuid.uuid4()) for a one-off run)'
        )
        raise ConfigError(msg)
    auth_user = configurable.get("langgraph_auth_user")
    for candidate in (
        configurable.get("langgraph_auth_user_id"),
        getattr(auth_user, "identity", None),
        configurable.get("user_id"),
    ):
        if candidate is not None and str(candidate) != "":
            return str(thread_id), str(candidate)
    return str(thread_id), None


def _index_key(message_id: str) -> str:
    return sha256_hex(message_id.encode(UTF8, SURROGATES))
