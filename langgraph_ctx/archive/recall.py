r"""The `recall` tool: lets an agent read back output that compaction moved to the archive.

A compacted tool result keeps a reference (`lgctx:<thread>:message:<sha256>`), a length and a
preview. When the agent needs more than the preview it calls this tool with the reference (or
the message id) and, optionally, a line range or a character range. The tool reads only its
own thread's archive; errors come back as tool error text the agent can act on, never as an
exception that ends the run.

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> from langgraph.store.memory import InMemoryStore
    >>> from langgraph_ctx.archive import Archive
    >>> archive = Archive(InMemoryStore(), thread_id="t1")
    >>> ref = archive.put_message(ToolMessage("one\ntwo\nthree\n", tool_call_id="c1"))
    >>> tool = make_recall_tool(archive)
    >>> print(tool.invoke({"ref": ref, "start_line": 2, "end_line": 2}).split("\n", 1)[1])
    two
    <BLANKLINE>
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from langgraph_ctx._effects import Plan, both
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.matching import recall_text
from langgraph_ctx.checks import check_callable, check_int, check_str
from langgraph_ctx.errors import ArchiveError, ConfigError
from langgraph_ctx.messages.content import RECALLED_KEY

__all__ = [
    "RecallArgs",
    "archive_source",
    "archive_tool",
    "entry_text",
    "make_recall_tool",
    "render_recall",
]

RECALL_DESCRIPTION = (
    "Read back the full text of a tool output that was moved out of the conversation to save "
    "space. Pass the reference shown in the compacted message (it starts with `lgctx:`) or the "
    "message id. Optionally pass start_line/end_line (1-based, inclusive) or start_char/end_char "
    "(0-based, end exclusive) to read only part of it. Long outputs are cut; the reply says "
    "which range to ask for next."
)
"""The tool description the model sees. It states the range conventions the tool uses."""


class RecallArgs(BaseModel):
    """Arguments of the `recall` tool."""

    ref: str = Field(description="The `lgctx:...` reference or the message id to read back.")
    start_line: int | None = Field(default=None, description="First line to show, 1-based.")
    end_line: int | None = Field(default=None, description="Last line to show, inclusive.")
    start_char: int | None = Field(default=None, description="First character, 0-based.")
    end_char: int | None = Field(default=None, description="End character, exclusive.")


def entry_text(entry: BaseMessage | Sequence[BaseMessage] | str) -> str:
    """The text the recall tool shows for an archive entry.

    A message gives its content (text blocks joined by newlines, other blocks as JSON), a
    message list gives `get_buffer_string` of the list, text is shown as is. The rule lives
    in `matching.recall_text`, which numbers an entry's lines for search the same way.
    """
    return recall_text(entry)


def _bad_range(detail: str) -> ToolException:
    return ToolException(f"recall: {detail}")


def render_recall(
    text: str,
    *,
    ref: str,
    start_line: int | None = None,
    end_line: int | None = None,
    start_char: int | None = None,
    end_char: int | None = None,
    max_chars: int = 20_000,
    tool_name: str = "recall",
) -> str:
    """Cut the requested range out of `text` and put a header line above it.

    Lines are 1-based and inclusive; characters are 0-based with the end exclusive. The
    header gives the total length and the range shown; when the range is longer than
    `max_chars`, the text is cut and a last line says which `start_char` to ask for next.

    Raises:
        ToolException: Both a line and a character range, or a range outside the text.
    """
    lines = text.splitlines(keepends=True)
    total, n_lines = len(text), len(lines)
    if (start_line, end_line) != (None, None) and (start_char, end_char) != (None, None):
        raise _bad_range("give either start_line/end_line or start_char/end_char, not both")
    if (start_line, end_line) != (None, None):
        first = 1 if start_line is None else start_line
        last = n_lines if end_line is None else min(end_line, n_lines)
        if first < 1 or (n_lines and first > n_lines) or last < first:
            asked = f"{first}-{'end' if end_line is None else end_line}"
            detail = f"lines {asked} are outside 1-{n_lines}"
            raise _bad_range(f"{detail}; the output has {n_lines} lines")
        begin = sum(len(line) for line in lines[: first - 1])
        end = begin + sum(len(line) for line in lines[first - 1 : last])
    else:
        begin = 0 if start_char is None else start_char
        end = total if end_char is None else min(end_char, total)
        if begin < 0 or begin > total or end < begin:
            asked = f"{begin}-{'end' if end_char is None else end_char}"
            detail = f"characters {asked} are outside 0-{total}"
            raise _bad_range(f"{detail}; the output has {total} characters")
    shown_end = min(end, begin + max_chars)
    shown = text[begin:shown_end]
    first_line = text.count("\n", 0, begin) + 1
    last_line = first_line + shown.count("\n", 0, max(len(shown) - 1, 0))
    where = f"lines {first_line}-{last_line}" if shown else "nothing"
    header = (
        f"[{ref}: {total} characters, {n_lines} lines; showing characters "
        f"{begin}-{shown_end} ({where})]"
    )
    out = f"{header}\n{shown}"
    if shown_end < end:
        out += (
            f"\n[truncated at {max_chars} characters; {end - shown_end} more in the requested "
            f'range. Call {tool_name} with ref="{ref}", start_char={shown_end} to continue]'
        )
    return out


def _clean_ref(ref: str) -> str:
    # Models often wrap identifiers in quotes or backticks; the reference itself never has them.
    return ref.strip().strip("`'\"").strip()


def archive_source(
    archive: Archive | Callable[[], Archive], *, tool_name: str = "recall"
) -> Callable[[], Archive]:
    """What a tool over the archive asks at each call for the archive to read.

    A function that finds no archive for the call (`ConfigError`: called outside a run, or in
    a run whose config names no thread) makes the call a tool error saying so: the tool reads
    one conversation's archive, never a default one.

    Raises:
        ConfigError: `archive` is neither an `Archive` nor a function returning one.
    """
    if isinstance(archive, Archive):
        return lambda: archive
    what = "an Archive or a function returning one"
    check_callable("archive", archive, what=what, example="Archive(store, thread_id=...)")
    find = archive

    def current() -> Archive:
        try:
            return find()
        except ConfigError as exc:
            raise ToolException(f"{tool_name} failed: {exc}") from exc

    return current


def make_recall_tool(
    archive: Archive | Callable[[], Archive], *, name: str = "recall", max_chars: int = 20_000
) -> BaseTool:
    """Build the recall tool over one thread's archive.

    Args:
        archive: The archive of the thread the agent runs in; the tool reads nothing else.
            A callable is asked for the archive at each call (e.g. the current run's thread).
        name: The tool name the model sees.
        max_chars: Most characters returned per call; longer ranges are cut with a note.

    Returns:
        A `StructuredTool` with sync and async implementations and `handle_tool_error=True`,
        so a bad reference comes back to the model as an error message.

    Raises:
        ConfigError: `max_chars` is not a whole number >= 1, or `name` not a tool name.
    """
    check_int(
        "max_chars", max_chars, minimum=1, example=20_000, note="it caps the characters per recall"
    )
    check_str("name", name, example="recall")
    current = archive_source(archive, tool_name=name)

    def plan(ref: str, **ranges: int | None) -> Plan[tuple[str, dict[str, str]]]:
        artifact, ref = recalled_artifact(ref), _clean_ref(ref)
        try:
            entry = yield from current().plan_read(ref)
        except ArchiveError as exc:
            raise ToolException(f"{name} failed: {exc}") from exc
        text = render_recall(
            entry_text(entry), ref=ref, max_chars=max_chars, tool_name=name, **ranges
        )
        return text, artifact

    # The artifact marks the result as read back from the archive (`is_recalled`): the agent
    # asked for it whole, so it is not excerpted again as it arrives.
    return archive_tool(plan, name=name, description=RECALL_DESCRIPTION, args_schema=RecallArgs)


def archive_tool(
    plan: Callable[..., Plan[tuple[str, dict[str, str]]]],
    *,
    name: str,
    description: str,
    args_schema: type[BaseModel],
    **options: Any,
) -> BaseTool:
    """A tool over the archive, run from its plan: the answer for the model and an artifact.

    The tool has sync and async implementations (`both`) and `handle_tool_error=True`, so a
    `ToolException` (a bad reference, an archive failure) comes back to the model as an error
    message rather than ending the run.

    Args:
        plan: The tool's work as a plan, from the tool's arguments to the answer and artifact.
        name: The tool name the model sees.
        description: The tool description the model sees.
        args_schema: The tool's arguments.
        **options: Further `StructuredTool.from_function` arguments (`metadata`, ...).
    """
    run, arun = both(plan, name=name, doc=f"The {name} tool: the answer and its artifact.")
    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=description,
        args_schema=args_schema,
        handle_tool_error=True,
        response_format="content_and_artifact",
        **options,
    )


def recalled_artifact(ref: str) -> dict[str, str]:
    """The artifact of a `recall` result: the reference it read back (`is_recalled`)."""
    return {RECALLED_KEY: _clean_ref(ref)}
