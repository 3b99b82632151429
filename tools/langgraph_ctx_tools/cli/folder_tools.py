"""Read-only tools over one folder: `list_dir`, `read_file` and `search_text`.

The demo agent explores a real tree with them (`langgraph-ctx demo`, the notebooks). The folder
is untrusted: a link loop, a FIFO or a device, a file the process may not read, a huge file or
a name with a newline in it each come back as an error result or an escaped name the model can
act on, never as an exception out of the tool, a hang, or a forged line; every call is bounded
in files, bytes, lines and time (a search that runs out of time answers partially and says so).

The three tools and the guarded reads they share are one concept: each guard is written once
for all three.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, Field

from langgraph_ctx._patterns import BoundedPattern, PatternTimeoutError, compile_pattern

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist"})
MAX_LINES = 100
"""Most lines one `read_file` call returns."""
MAX_LINE_CHARS = 2_000
"""Longest line `read_file` shows (a minified file is one line of megabytes)."""
MAX_ENTRIES = 500
"""Most entries one `list_dir` call shows."""
MAX_SCANNED_ENTRIES = 20_000
"""Most entries one `list_dir` call reads from a folder (a folder of millions would fill memory)."""
LIST_COUNT_BYTES = 16_000_000
"""Most bytes one `list_dir` call reads to count lines; past them a file shows its size alone."""
MAX_MATCHES = 40
"""Most matches one `search_text` call returns."""
MAX_FILE_BYTES = 2_000_000
"""Largest file a tool reads."""
BINARY_PROBE_BYTES = 4_096
"""A file with a NUL byte in its first this many bytes is binary: not read further."""
MAX_WALK_FILES = 5_000
"""Most files one `search_text` call looks at."""
SEARCH_SECONDS = 2.0
"""Time budget of one `search_text` call, walk and reads included; past it the answer is partial."""
SLOW_LINE_SHARE = 0.25
"""Share of `SEARCH_SECONDS` one line may take: a pattern slower than that on a line is blamed
(an error result), while a search that runs out of time over many lines answers partially."""


class ListDirArgs(BaseModel):
    """Arguments of `list_dir`."""

    path: str = Field(default=".", description="Folder to list, relative to the root.")
    tool_call_id: Annotated[str, InjectedToolCallId]


class ReadFileArgs(BaseModel):
    """Arguments of `read_file`."""

    path: str = Field(description="File to read, relative to the root.")
    start_line: int = Field(default=1, description="First line, 1-based.")
    end_line: int | None = Field(default=None, description="Last line, inclusive.")
    tool_call_id: Annotated[str, InjectedToolCallId]


class SearchTextArgs(BaseModel):
    """Arguments of `search_text`."""

    pattern: str = Field(description="Case-insensitive regular expression (Python syntax).")
    path: str = Field(default=".", description="Folder or file to search, relative to the root.")
    tool_call_id: Annotated[str, InjectedToolCallId]


def make_tools(root: str | Path) -> list[BaseTool]:
    """`list_dir`, `read_file` and `search_text`, confined to `root` and read-only.

    Each returns a `ToolMessage` with id `t-<tool_call_id>` (so runs repeat byte for byte). A
    bad path or pattern and every problem of the folder (a link loop, a file the process may not
    read, a FIFO or a device, a file too large) come back as an error result the agent can act
    on, never as an exception; no call blocks on a file or reads past its bounds.
    """
    base = Path(root).resolve()

    def wrap(fn: Callable[..., str], name: str) -> Callable[..., ToolMessage]:
        def run(tool_call_id: str, **kwargs: Any) -> ToolMessage:
            try:
                text, status = fn(**kwargs), "success"
            except ValueError as exc:  # a bad path or pattern, a file the tool does not read
                text, status = f"Error: {exc}", "error"
            except OSError as exc:  # the folder changed under the call
                text, status = f"Error: {_problem(_quoted(kwargs.get('path', '.')), exc)}", "error"
            return ToolMessage(
                text, tool_call_id=tool_call_id, name=name, status=status, id=f"t-{tool_call_id}"
            )

        return run

    def list_dir(path: str = ".") -> str:
        folder = _inside(base, path)
        if not folder.is_dir():
            msg = f"{_quoted(path)} is not a folder"
            raise ValueError(msg)
        try:
            scan = _scan(base, folder)
        except OSError as exc:
            raise _problem(_quoted(path), exc) from None
        entries = sorted(scan.entries, key=lambda e: (e.kind == "file", e.path.name))
        lines = [f"{_rel(base, folder)}/"]
        spent = uncounted = 0
        for entry in entries[:MAX_ENTRIES]:
            name = _rel(base, entry.path)
            if entry.kind == "dir":
                lines.append(f"dir  {name}/")
            elif entry.kind == "other":
                lines.append(f"other {name}")
            else:
                line, cost = _file_entry(entry.real, name, LIST_COUNT_BYTES - spent)
                lines.append(line)
                if cost is None:
                    uncounted += 1
                else:
                    spent += cost
        if len(entries) > MAX_ENTRIES:
            lines.append(
                f"({len(entries) - MAX_ENTRIES} more entries not shown; list a sub-folder)"
            )
        left_out = scan.left_out
        if left_out["crowded"]:
            lines.append(f"(only the first {MAX_SCANNED_ENTRIES:,} entries of the folder read)")
        if left_out["outside"]:
            lines.append(f"({left_out['outside']} link(s) leading out of the folder not shown)")
        if left_out["broken"]:
            lines.append(f"({left_out['broken']} link(s) that cannot be followed not shown)")
        if uncounted:
            lines.append(
                f"(line counts of {uncounted} file(s) not taken, past {LIST_COUNT_BYTES:,} bytes "
                "read; read_file them or list a sub-folder)"
            )
        return "\n".join(lines)

    def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> str:
        file = _inside(base, path)
        text = _text(file, _quoted(path))
        lines = text.splitlines()
        first = max(1, start_line)
        last = min(len(lines), end_line or len(lines), first + MAX_LINES - 1)
        if lines and first > len(lines):
            msg = f"{_quoted(path)} has {len(lines)} lines; start_line {start_line} is past the end"
            raise ValueError(msg)
        body = "\n".join(
            f"{i:5}| {_cut(lines[i - 1], MAX_LINE_CHARS)}" for i in range(first, last + 1)
        )
        out = f"{_rel(base, file)} (lines {first}-{last} of {len(lines)})\n{body}"
        if last < len(lines):
            out += f"\n[more: call read_file with start_line={last + 1}]"
        return out

    def search_text(pattern: str, path: str = ".") -> str:
        compiled = compile_pattern(pattern)
        target = _inside(base, path)
        deadline = time.monotonic() + SEARCH_SECONDS
        named_file = not target.is_dir()
        walk = Walk([target]) if named_file else _walk(base, target, deadline)
        found: list[str] = []
        total = searched = 0
        try:
            for file in sorted(walk.files):
                if time.monotonic() >= deadline:
                    raise _OutOfTime
                try:
                    text = _text(file, _quoted(path) if named_file else _rel(base, file))
                except _FileProblem as problem:
                    if named_file:  # the file asked for: its problem is the answer
                        raise
                    walk.skipped(problem)
                    continue
                for number, line in enumerate(text.splitlines(), 1):
                    if _matches(compiled, line, deadline):
                        total += 1
                        if len(found) < MAX_MATCHES:
                            found.append(f"{_rel(base, file)}:{number}: {line.strip()[:160]}")
                searched += 1
        except _OutOfTime:
            walk.timed_out = True
        marks = [f"first {len(found)} shown"] if total > len(found) else []
        if walk.timed_out:
            marks.append("partial: out of time")
        head = f"{total} matches for /{_quoted(pattern)}/ under {_quoted(path)}"
        if marks:
            head += f" ({'; '.join(marks)})"
        return "\n".join([head, *found, *walk.notes(searched)])

    specs: list[tuple[Callable[..., str], type[BaseModel], str]] = [
        (list_dir, ListDirArgs, "List a folder: sub-folders and files with line counts."),
        (read_file, ReadFileArgs, f"Read up to {MAX_LINES} numbered lines of a text file."),
        (search_text, SearchTextArgs, "Search text files for a regular expression."),
    ]
    return [
        StructuredTool.from_function(
            func=wrap(fn, fn.__name__), name=fn.__name__, description=desc, args_schema=schema
        )
        for fn, schema, desc in specs
    ]


class _FileProblem(ValueError):
    """Why a tool does not read a path: `kind` for the notes, the message for the agent."""

    def __init__(self, shown: str, reason: str, kind: str) -> None:
        super().__init__(f"{shown} {reason}")
        self.reason = reason
        self.kind = kind


class _OutOfTime(Exception):
    """A search spent `SEARCH_SECONDS`: its answer is partial."""


def _problem(shown: str, exc: OSError) -> _FileProblem:
    """The one wording of an operating-system error on the path the agent knows as `shown`.

    The error's own text is not used: it names the host's absolute path.
    """
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return _FileProblem(shown, "does not exist", "missing")
    if exc.errno == errno.ELOOP:
        return _FileProblem(shown, "is a link loop (its links lead round in a circle)", "broken")
    return _FileProblem(shown, f"cannot be read: {exc.strerror or 'error'}", "unreadable")


def _inside(base: Path, path: str) -> Path:
    """`path` (from the model) resolved, when it names something inside `base`."""
    shown = _quoted(path)
    try:
        # Not `Path.resolve`: it raises `RuntimeError` on a link loop before Python 3.13.
        target = Path(os.path.realpath(base / path))
    except ValueError:  # a NUL byte
        msg = f"{shown} is not a valid path"
        raise ValueError(msg) from None
    if target != base and not target.is_relative_to(base):
        msg = f"{shown} is outside the folder being explored"
        raise ValueError(msg)
    try:
        os.stat(target)
    except OSError as exc:
        raise _problem(shown, exc) from None
    return target


def _rel(base: Path, path: Path) -> str:
    """The name the tools show for `path`: relative to `base`, one printable line."""
    return "." if path == base else _printable(path.relative_to(base).as_posix())


def _printable(text: str) -> str:
    """`text` with every character that is not printable escaped as Python writes it.

    A file name may hold a newline (which would forge a line of a listing), a terminal escape,
    a bidirectional override or, when it is not UTF-8, a surrogate no checkpoint can encode.
    """
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
        for c in text
    )


def _quoted(text: object, limit: int = 80) -> str:
    """A path or pattern the agent gave, quoted in an answer: printable and bounded."""
    return _cut(_printable(str(text)), limit)


def _cut(text: str, limit: int = 80) -> str:
    """`text`, cut to `limit` characters: a tool's answer quotes its input bounded."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class _Entry:
    """A folder entry: its path as listed, its real path, and what it is behind its links."""

    path: Path
    real: Path
    kind: str
    """`dir`, `file`, `other` (a FIFO, socket or device), `outside` or `broken` (a link loop,
    a link to nothing)."""


def _entry(base: Path, path: Path, item: os.DirEntry[str]) -> _Entry:
    """What `item` is; only a link costs system calls beyond the folder's scan."""
    try:
        if not item.is_symlink():
            if item.is_dir(follow_symlinks=False):
                return _Entry(path, path, "dir")
            return _Entry(path, path, "file" if item.is_file(follow_symlinks=False) else "other")
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(base):
            return _Entry(path, real, "outside")
        mode = os.stat(real).st_mode
    except OSError:
        return _Entry(path, path, "broken")
    kind = "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"
    return _Entry(path, real, kind)


@dataclass
class _Scan:
    """A folder's entries a tool may show (no hidden ones), and the links it may not follow."""

    entries: list[_Entry] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)
    """Links not followed, by their kind (`outside`, `broken`); `crowded` is 1 when the folder
    has more than `MAX_SCANNED_ENTRIES` entries (the rest were not read)."""


def _scan(base: Path, folder: Path) -> _Scan:
    """The entries of `folder` (a real path inside `base`), at most `MAX_SCANNED_ENTRIES` read.

    Raises:
        OSError: The folder cannot be read.
    """
    scan = _Scan()
    with os.scandir(folder) as items:
        for number, item in enumerate(items):
            if number == MAX_SCANNED_ENTRIES:
                scan.left_out["crowded"] = 1
                break
            if item.name.startswith(".") or item.name in SKIP_DIRS:
                continue
            entry = _entry(base, folder / item.name, item)
            if entry.kind in ("outside", "broken"):
                scan.left_out[entry.kind] += 1
            else:
                scan.entries.append(entry)
    return scan


def _file_entry(file: Path, name: str, budget: int) -> tuple[str, int | None]:
    """A file's `list_dir` line, and the bytes read to count its lines (None: not counted).

    Its size comes from `stat`; its lines are counted only while `budget` bytes remain, so a
    folder of many large files costs one `stat` each past the budget.
    """
    try:
        size = os.stat(file).st_size
    except OSError as exc:
        return f"file {name}  ({_problem(name, exc).reason})", 0
    if size > MAX_FILE_BYTES:
        return f"file {name}  {size:,} bytes (too large to read)", 0
    if size > budget:
        return f"file {name}  {size:,} bytes", None
    try:
        count = _count_lines(_text(file, name))
    except _FileProblem as problem:
        if problem.kind != "binary":
            return f"file {name}  {size:,} bytes ({problem.reason})", 0
        count = 0
    return f"file {name}  {count} lines  {size:,} bytes", size


_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""What `str.splitlines` splits at (`\\r\\n` being one break)."""


def _count_lines(text: str) -> int:
    """`len(text.splitlines())`, without making the lines (a file of short lines is millions)."""
    breaks = sum(text.count(c) for c in _LINE_BREAKS) - text.count("\r\n")
    return breaks + (1 if text and text[-1] not in _LINE_BREAKS else 0)


def _matches(pattern: BoundedPattern, line: str, deadline: float) -> bool:
    """Whether `line` matches, within the search's `deadline`.

    A line that alone takes more than its share of the budget blames the pattern (its
    `PatternTimeoutError`, an error result); a search that runs out over many lines raises
    `_OutOfTime` and answers with what it found.
    """
    now = time.monotonic()
    if now >= deadline:
        raise _OutOfTime
    line_deadline = min(deadline, now + SLOW_LINE_SHARE * SEARCH_SECONDS)
    try:
        return pattern.search(line, line_deadline)
    except PatternTimeoutError:
        if line_deadline == deadline:
            raise _OutOfTime from None
        raise


_WALK_NOTES = (
    ("outside", "({n} link(s) leading out of the folder skipped)"),
    ("repeated", "({n} folder(s) reached again through a link walked once)"),
    ("capped", "(stopped after {files:,} files; search a sub-folder)"),
    ("broken", "({n} link(s) that cannot be followed skipped)"),
    ("unreadable", "({n} file(s) or folder(s) that cannot be read skipped)"),
    ("unsearched", "({n} file(s) over {bytes:,} bytes not searched)"),
    ("special", "({n} FIFO(s), socket(s) or device(s) skipped)"),
    ("crowded", "({n} folder(s) searched in part: only their first {entries:,} entries read)"),
)
"""`Walk.notes`' line for each count of `Walk.left_out` that is set, in this order (`capped` is 1
when the walk stopped at `MAX_WALK_FILES`); the bounds are filled in when the notes are written."""

_SKIPPED_AS = {
    "missing": "broken",
    "broken": "broken",
    "special": "special",
    "too_large": "unsearched",
}
"""The count of `Walk.left_out` a file the search did not read adds to, by its problem's kind
(any other kind but `binary`: `unreadable`)."""


@dataclass
class Walk:
    """The files a walk found, and what it left out."""

    files: list[Path] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)
    """What the walk and the search skipped or read in part, by the kinds `_WALK_NOTES` names."""
    timed_out: bool = False
    """The search spent `SEARCH_SECONDS` before it was done."""
    walked: bool = True
    """The walk reached every folder (the deadline did not stop it)."""

    def skipped(self, problem: _FileProblem) -> None:
        """Count a file the search did not read, by why."""
        if problem.kind != "binary":  # skipped silently, as grep does: no text to find in it
            self.left_out[_SKIPPED_AS.get(problem.kind, "unreadable")] += 1

    def notes(self, searched: int | None = None) -> list[str]:
        """One line per thing left out; `searched` files, when the search ran out of time."""
        bounds = {"files": MAX_WALK_FILES, "bytes": MAX_FILE_BYTES, "entries": MAX_SCANNED_ENTRIES}
        counts = ((self.left_out[name], text) for name, text in _WALK_NOTES)
        notes = [text.format(n=n, **bounds) for n, text in counts if n]
        if self.timed_out:
            of = f"{len(self.files):,}" + ("" if self.walked else "+")
            notes.append(
                f"(partial: stopped after {SEARCH_SECONDS:g} s with {searched or 0:,} of {of} "
                "files searched; search a sub-folder or a narrower path)"
            )
        return notes


def _walk(base: Path, folder: Path, deadline: float) -> Walk:
    """The files under `folder` whose real paths are inside `base`, each folder walked once.

    Iterative and bounded: links cannot make it recurse or loop, and it stops at
    `MAX_WALK_FILES` files or at `deadline` (a `time.monotonic()` value).
    """
    walk = Walk()
    seen: set[Path] = set()
    pending = [folder]  # real paths
    while pending:
        if time.monotonic() >= deadline:
            walk.timed_out, walk.walked = True, False
            return walk
        current = pending.pop()
        if current in seen:
            walk.left_out["repeated"] += 1
            continue
        seen.add(current)
        try:
            scan = _scan(base, current)
        except OSError:
            walk.left_out["unreadable"] += 1
            continue
        walk.left_out.update(scan.left_out)  # the folder's links not followed, `crowded` if it was
        for entry in sorted(scan.entries, key=lambda e: e.path.name):
            if entry.kind == "dir":
                pending.append(entry.real)
            elif entry.kind == "other":
                walk.left_out["special"] += 1
            elif len(walk.files) >= MAX_WALK_FILES:
                walk.left_out["capped"] = 1
                return walk
            else:
                walk.files.append(entry.real)
    return walk


def _read(file: Path, shown: str) -> bytes:
    """The bytes of `file`, a regular file of at most `MAX_FILE_BYTES` that is not binary.

    A FIFO or a device is never opened (reading one blocks or never ends); the file is opened
    without blocking and checked again once open, as it may have been swapped since.

    Raises:
        _FileProblem: Not a regular file, too large, binary, or not readable.
    """
    try:
        mode = os.stat(file).st_mode
        if stat.S_ISDIR(mode):
            raise _FileProblem(shown, "is a folder, not a file; call list_dir on it", "folder")
        if not stat.S_ISREG(mode):
            raise _FileProblem(shown, _SPECIAL, "special")
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _problem(shown, exc) from None
    with os.fdopen(fd, "rb") as stream:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _FileProblem(shown, _SPECIAL, "special")
            if info.st_size > MAX_FILE_BYTES:
                raise _too_large(shown)
            head = stream.read(BINARY_PROBE_BYTES)
            if b"\0" in head:
                raise _FileProblem(shown, "is a binary file", "binary")
            data = head + stream.read(MAX_FILE_BYTES + 1 - len(head))
        except OSError as exc:
            raise _problem(shown, exc) from None
    if len(data) > MAX_FILE_BYTES:  # it grew since `fstat`
        raise _too_large(shown)
    return data


_SPECIAL = "is not a regular file (a FIFO, a socket or a device); it is not read"


def _too_large(shown: str) -> _FileProblem:
    return _FileProblem(shown, f"is larger than {MAX_FILE_BYTES:,} bytes", "too_large")


def _text(file: Path, shown: str) -> str:
    """The text of `file` (see `_read`), bytes that are not UTF-8 replaced."""
    return _read(file, shown).decode("utf-8", "replace")
