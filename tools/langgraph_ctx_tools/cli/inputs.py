"""Files the commands read, read within bounds: a file is data someone handed over.

`read_json` is the one reader of the JSON files the commands take (transcripts, tool
schemas, strategy configs, settings). Whatever a file holds, it costs a bounded amount of
memory and time, or it is refused with one line and exit 2 before anything is written:

- a size cap on the bytes read, after decompression (`DEFAULT_MAX_INPUT_MB`, raised with
  `--max-input-mb`): a 1.4 MB `.json.gz` that expands to 1.5 GB is refused after reading
  the cap, not after filling the memory;
- a file whose reading would not fit the free memory is refused before it is parsed
  (`MEMORY_FACTORS`, measured per reader: a transcript's messages, counted, take up to 47
  times its bytes; `check_loaded_size` is the same bound for a checkpoint database's values);
- nesting deeper than `MAX_DEPTH` is refused (no transcript, schema or config nests deeper,
  and deeper nesting only serves to exhaust the interpreter's recursion limit later).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import zlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from langgraph_ctx.errors import InputError
from langgraph_ctx_tools.replay.settings import Setting, setting_from_data

__all__ = [
    "DEFAULT_MAX_INPUT_MB",
    "MAX_DEPTH",
    "MEMORY_FACTORS",
    "MESSAGES_MEMORY_FACTOR",
    "check_loaded_size",
    "input_limit",
    "load_setting",
    "read_json",
    "read_text",
]

DEFAULT_MAX_INPUT_MB = 512
"""Most megabytes (MiB) of one input file the commands read, after decompression."""
MAX_DEPTH = 64
"""Deepest nesting of lists and objects a JSON input may have."""
MESSAGES_MEMORY_FACTOR = 56
"""Peak memory of a command over the bytes of the messages it reads, measured with 8 MB of
one tool output (`tests/reliability/test_handed_databases.py` holds each reader under a
memory limit): one long word took 46 to 47 times its bytes for `count`, `view`, `compact` and
`frontier` (a transcript file, or a checkpoint for `frontier --db`: the token counter's work
on one long word), 8 MB of short lines 11 to 15 times, and `inspect` 13 times; 56 leaves a
fifth for what a run varies."""
MEMORY_FACTORS = {"transcript": MESSAGES_MEMORY_FACTOR, "system prompt": MESSAGES_MEMORY_FACTOR}
"""The factor per kind of file (`what`) that holds messages or text the commands count; a
file needing more than the free memory is refused before it is parsed."""
DEFAULT_MEMORY_FACTOR = 16
"""The factor of the other files (tools, strategies, settings: JSON parsed, not counted;
parsed JSON of short lines took 11 times its bytes)."""

_MB = 1 << 20
_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_limit_mb: ContextVar[int] = ContextVar("langgraph_ctx_max_input_mb", default=DEFAULT_MAX_INPUT_MB)


@contextlib.contextmanager
def input_limit(max_mb: int | None) -> Iterator[None]:
    """Read inputs of up to `max_mb` MiB inside the block (None: the default cap)."""
    token = _limit_mb.set(DEFAULT_MAX_INPUT_MB if max_mb is None else max_mb)
    try:
        yield
    finally:
        _limit_mb.reset(token)


def read_text(path: str | Path, what: str) -> str:
    """The text of a file (plain or gzip-compressed), within the size and memory bounds.

    Raises:
        InputError: No such file, over the cap, more than the free memory, not UTF-8.
    """
    file = Path(path)
    if not file.is_file():
        msg = f"no such {what} file: {path}"
        raise InputError(msg)
    limit = _limit_mb.get() * _MB
    with file.open("rb") as fh:
        packed = fh.read(2) == _GZIP_MAGIC
    try:
        with gzip.open(file, "rb") if packed else file.open("rb") as fh:
            raw = _bounded(fh, limit, file, " decompressed" if packed else "")
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        msg = f"{path} is not a readable gzip file ({exc})"
        raise InputError(msg) from exc
    check_loaded_size(str(file), len(raw), MEMORY_FACTORS.get(what, DEFAULT_MEMORY_FACTOR))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{path} is not a UTF-8 text file ({exc.reason})"
        raise InputError(msg) from exc


def read_json(path: str | Path, what: str, *, expected: str = "") -> Any:
    """The JSON of a file (plain or gzip-compressed), within bounds (see the module).

    Raises:
        InputError: As `read_text`, or not JSON, or nested deeper than `MAX_DEPTH`. `expected`
            (what the file should hold) ends the not-JSON message.
    """
    text = read_text(path, what)
    deep = f"{path} nests lists or objects deeper than {MAX_DEPTH} levels; no {what} file does"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{path} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise InputError(f"{msg}; expected {expected}" if expected else msg) from exc
    except RecursionError:  # deeper than the parser can go: deeper than MAX_DEPTH too
        raise InputError(deep) from None
    if _too_deep(data):
        raise InputError(deep)
    return data


def _bounded(fh: Any, limit: int, file: Path, how: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := fh.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            msg = (
                f"{file} is over {limit // _MB:,} MB{how}, the cap on one input; pass "
                "--max-input-mb with a larger number if you mean it"
            )
            raise InputError(msg)
        chunks.append(chunk)
    return b"".join(chunks)


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None  # unknown: only the cap bounds the read


def check_loaded_size(name: str, size: int, factor: float) -> None:
    """Refuse `size` bytes of input before they are loaded: over the cap, or too large.

    Too large: `factor` times `size` is more memory than is free.

    Raises:
        InputError: Over the cap (`--max-input-mb`), or more than the free memory.
    """
    limit = _limit_mb.get() * _MB
    if size > limit:
        msg = (
            f"{name} holds a value of {size / _MB:,.0f} MB, over {limit // _MB:,} MB, the cap on "
            "one input; pass --max-input-mb with a larger number if you mean it"
        )
        raise InputError(msg)
    free = _available_bytes()
    need = size * factor
    if free is not None and need > free:
        msg = (
            f"{name} holds {size / _MB:,.0f} MB, which takes about {need / _MB:,.0f} MB "
            f"once read, and only {free / _MB:,.0f} MB of memory are free; split it or run on "
            "a larger machine"
        )
        raise InputError(msg)


def _too_deep(data: Any) -> bool:
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:  # iterative, so a deep document cannot exhaust the recursion limit here
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                return True
            values = item.values() if isinstance(item, dict) else item
            stack.extend((v, depth + 1) for v in values if isinstance(v, dict | list))
    return False


def load_setting(path: str | Path) -> Setting:
    """A setting of the user's own from a JSON file (`--setting`), within bounds.

    Raises:
        InputError: The file is missing, too large, not JSON or not a setting.
    """
    return setting_from_data(read_json(path, "setting"), path)
