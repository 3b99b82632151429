"""The canonical bytes of what the archive holds: messages, message lists and index entries.

Every entry is stored under the sha256 of these bytes, so they must not change: sorted, compact
JSON of `message_to_dict`, and lone surrogates kept (`surrogatepass`) instead of crashing.
Decoding and encoding again gives the same bytes, which is what makes the archive
content-addressed and restores byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from langgraph_ctx.errors import ArchiveCorruptError

UTF8 = "utf-8"  # the encoding of every archive entry


SURROGATES = "surrogatepass"  # lone surrogates survive the round trip instead of crashing


def dumps(obj: Any) -> bytes:
    """`obj` as canonical JSON bytes: sorted keys, UTF-8, lone surrogates kept."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode(UTF8, SURROGATES)


def loads(data: bytes, where: str) -> Any:
    """The JSON value of archive bytes; `ArchiveCorruptError` naming `where` if not JSON."""
    try:
        return json.loads(data.decode(UTF8, SURROGATES))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        # RecursionError: nested deeper than the parser goes, which no entry we write is.
        msg = f"archive entry {where} is not valid JSON ({exc}); it was damaged after writing"
        raise ArchiveCorruptError(msg) from exc


def encode_message(message: BaseMessage) -> bytes:
    """The canonical bytes of one message: sorted, compact JSON of `message_to_dict`.

    Decoding and encoding again gives the same bytes, which is what makes the archive
    content-addressed and restores byte for byte.
    """
    return dumps(message_to_dict(message))


def decode_message(data: bytes) -> BaseMessage:
    """Rebuild a message from `encode_message` bytes.

    Raises:
        ArchiveCorruptError: The bytes are not a serialized message.
    """
    obj = loads(data, "(message)")
    try:
        return messages_from_dict([obj])[0]
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"archive entry does not hold a serialized message: {exc}"
        raise ArchiveCorruptError(msg) from exc


def encode_messages(messages: Sequence[BaseMessage]) -> bytes:
    """The canonical bytes of a list of messages (a JSON list of `message_to_dict` dicts)."""
    return dumps([message_to_dict(m) for m in messages])


def decode_messages(data: bytes) -> list[BaseMessage]:
    """Rebuild a message list from `encode_messages` bytes.

    Raises:
        ArchiveCorruptError: The bytes are not a serialized message list.
    """
    obj = loads(data, "(messages)")
    if not isinstance(obj, list):
        msg = f"archive entry should hold a list of messages, found {type(obj).__name__}"
        raise ArchiveCorruptError(msg)
    try:
        return messages_from_dict(obj)
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"archive entry does not hold serialized messages: {exc}"
        raise ArchiveCorruptError(msg) from exc
