"""Every id langgraph_ctx makes, and the two ways it tells messages apart.

Ids we give messages all start with `lgctx-`, so they never collide with a caller's ids and
are easy to spot in a trace:

- `lgctx-<hash>`: a message that came without an id (`derived_id`, from position and content);
- `lgctx-repair-<hash>`: the error result answering a dangling tool call (`repair_id`);
- `lgctx-call-<hash>`: a tool call shown with an id it lacked or shared in its batch (`call_id`);
- `lgctx-summary-<hash>`: the running summary's system message (`summary_id`, from its text);
- `lgctx-task-dropped`, `lgctx-conversation-start`, `lgctx-system`: the fixed stand-ins.

Every one is deterministic, so building twice from the same input gives the same prompt bytes.
Archive references (`lgctx:[<user>/]<thread>:<kind>:<sha256>`, a colon, not a dash) are
`ArchiveRef`s; the archive computes the digest and the labels, this module the format.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from langchain_core.messages import BaseMessage

from langgraph_ctx.errors import ArchiveError, shorten

_GIL_HELD_BYTES = 2_047
"""hashlib lets go of the GIL for a buffer of 2,048 bytes or more; beside a thread running
Python, getting it back takes the interpreter's switch interval (5 ms) per hash."""


def sha256_of(data: bytes) -> hashlib._Hash:
    """`hashlib.sha256(data)`, fed in pieces hashlib hashes holding the GIL (the same digest).

    A build hashes the outputs it archives and the spans it prepares: in a server beside busy
    threads, a hash that let go of the GIL would wait up to the switch interval for it (see
    `TiktokenCounter.count_text`).
    """
    hashed = hashlib.sha256()
    view = memoryview(data)
    for start in range(0, len(view), _GIL_HELD_BYTES):
        hashed.update(view[start : start + _GIL_HELD_BYTES])
    return hashed


def sha256_hex(data: bytes) -> str:
    """The hex sha256 of `data` (`sha256_of`, holding the GIL)."""
    return sha256_of(data).hexdigest()


CONVERSATION_START_ID = "lgctx-conversation-start"
"""Id of the user stand-in that opens a prompt whose conversation starts with the model."""

TASK_DROPPED_ID = "lgctx-task-dropped"
"""Id of the note that stands in for a task too large to keep in the window."""

SYSTEM_ID = "lgctx-system"
"""Id of a base system message built from fragments alone (no system message was given)."""


def derived_id(message: BaseMessage, position: int) -> str:
    """The id a message without one gets: deterministic from its position and content."""
    digest = hashlib.sha256(f"{position}:{message_fingerprint(message)}".encode()).hexdigest()
    return f"lgctx-{digest[:24]}"


def repair_id(ai: BaseMessage, call_id: str | None) -> str:
    """Id of the error result answering call `call_id` of `ai` that was never answered."""
    # Deterministic, so a repaired prompt is the same bytes on every build.
    source = ai.id or message_fingerprint(ai)
    digest = hashlib.sha256(f"{source}:{call_id}".encode()).hexdigest()
    return f"lgctx-repair-{digest[:24]}"


def call_id(ai: BaseMessage, index: int) -> str:
    """Id shown for call `index` of `ai` when it has none, or one an earlier call of it has.

    Providers pair a call and its answer by id, so an id-less or repeated id cannot be paired;
    this one is deterministic (the message and the call's place in it) and matches the id
    pattern both providers accept (`[a-zA-Z0-9_-]+`).
    """
    source = ai.id or message_fingerprint(ai)
    digest = hashlib.sha256(f"{source}#{index}".encode()).hexdigest()
    return f"lgctx-call-{digest[:24]}"


def summary_id(text: str) -> str:
    """Id of the `<summary>` system message holding `text` (a new text, a new id)."""
    return f"lgctx-summary-{sha256_hex(text.encode())[:16]}"


# --- message identity ---------------------------------------------------------------------
#
# Two keys on purpose: `message_fingerprint` is a stable hash that must give the same value in
# every process and release (derived ids persist in checkpoints), while `message_key` is a
# token-count cache key that only lives in one process and must cost well under a
# microsecond per cached message. Hashing every message of every build would undo the cache.


def message_fingerprint(message: BaseMessage) -> str:
    """A stable sha256 of what a message says (type, content, name, tool calls, call id).

    The id is left out: two messages saying the same thing have one fingerprint. Use it where
    the value is kept or compared across processes (derived ids, repair ids, the replay's
    comparison of prompts). For a per-process cache, `message_key` is much cheaper.
    """
    payload = {
        "type": message.type,
        "content": message.content,
        "name": getattr(message, "name", None),
        "tool_calls": getattr(message, "tool_calls", None) or None,
        "tool_call_id": getattr(message, "tool_call_id", None),
    }
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return sha256_hex(raw.encode())


# Key order is kept (no sort_keys): the count encodes `json.dumps(args)`, which keeps it too.
# One shared encoder: `json.dumps(..., default=...)` would build a new one per call.
_KEY_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)

# The `additional_kwargs` entries OpenAI's message conversion reads, so they change the count.
_COUNTED_KWARGS = ("name", "tool_calls", "function_call", "audio", "__openai_role__")


def _content_key(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value  # str hashes are cached by Python: O(1) after the first time
    return _KEY_ENCODER.encode(value)


def _calls_key(calls: Any) -> Any:
    # What the count reads of each call: id, name and the arguments. `repr` tells apart every
    # JSON value (1, 1.0, True, "1") and is several times cheaper than encoding them.
    if not calls:
        return None
    try:
        return tuple((c.get("id"), c.get("name"), repr(c.get("args"))) for c in calls)
    except AttributeError:  # not a list of dicts: key on all of it
        return _content_key(calls)


def message_key(message: BaseMessage) -> tuple[Any, ...]:
    """A fast, hashable in-process key of everything a token count reads of a message.

    Unlike `message_fingerprint` it includes the id and is not stable across processes (it
    holds `repr`s and Python objects); it only keys `TiktokenCounter`'s cache.
    """
    # Fields are read from the pydantic instance dict: `getattr(msg, "tool_calls", None)` on a
    # message type without that field goes through pydantic's raising `__getattr__`, which
    # made the lookup of a cached message cost more than ten microseconds.
    fields = message.__dict__
    kwargs = message.additional_kwargs
    extra = (
        tuple((k, _content_key(kwargs[k])) for k in _COUNTED_KWARGS if k in kwargs)
        if kwargs
        else ()
    )
    return (
        message.type,
        fields.get("id"),
        _content_key(fields.get("content")),
        fields.get("name"),
        fields.get("tool_call_id"),
        _calls_key(fields.get("tool_calls")),
        _calls_key(fields.get("invalid_tool_calls")),
        extra,
    )


# --- archive references -------------------------------------------------------------------

REF_PREFIX = "lgctx:"
"""How every archive reference starts (message ids we make start with `lgctx-`)."""

RefKind = Literal["message", "messages", "text"]
"""What a reference points at: one message, a list of messages (insurance dump), or text."""

REF_SHAPE = "`lgctx:<thread>:<kind>:<sha256>` (or `lgctx:<user>/<thread>:<kind>:<sha256>`)"
"""How a reference looks, for error messages."""

_REF_KINDS: tuple[str, ...] = get_args(RefKind)
_LABEL = r"(?:[A-Za-z0-9_-]{1,128}|~[0-9a-f]{64})"
_REF_RE = re.compile(
    rf"lgctx:(?:(?P<user>{_LABEL})/)?(?P<thread>{_LABEL}):(?P<kind>[a-z]+):(?P<digest>[0-9a-f]{{64}})"
)


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
                f"not an archive reference: {shorten(text)}. A reference looks like {REF_SHAPE} "
                f"with <kind> one of {', '.join(_REF_KINDS)}; copy it exactly from the "
                "compacted message"
            )
            raise ArchiveError(msg)
        kind = cast(RefKind, match["kind"])
        return cls(thread=match["thread"], kind=kind, digest=match["digest"], user=match["user"])


def is_archive_ref(text: str) -> bool:
    """Whether `text` looks like an archive reference (as opposed to a message id)."""
    return isinstance(text, str) and text.startswith(REF_PREFIX)
