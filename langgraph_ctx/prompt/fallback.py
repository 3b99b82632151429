"""The deterministic fallback summary: a summary built from the messages alone.

Used when there is no summarizer model or every attempt failed, and to cut a summary down to a
smaller size (`PromptView.fit_summary`): same input, same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_ctx.messages.blocks import is_user_input
from langgraph_ctx.messages.content import is_error_result, text_of
from langgraph_ctx.prompt.markup import quoted_data
from langgraph_ctx.prompt.sections import (
    ASKED,
    LATEST,
    clip,
    fit,
    previous_sections,
)

_FACT_LINE_CHARS = 200


_OUTCOME_CHARS = 120


_STRUCTURE_LINES = 4  # how far back from the end closing structure is skipped


_TAG_RE = re.compile(r"<[^<>]*>")


_WORD_RE = re.compile(r"\w")


_VALUE_RE = re.compile(r"\d|[\w.-]/[\w.-]|://|^[\w .-]{1,40}(?::|=)\s*\S")


_PATHS = "- Files and paths touched: "


_PLAN = "- Last stated plan or intent: "


_PATH_CHARS = 800


_PATH_RE = re.compile(
    r"(?<![\w/.:~-])"
    r"(?:~?/(?:[\w.+-]+/)+[\w.+-]+"  # /abs/path or ~/path with at least two segments
    r"|(?:\.{1,2}/)?(?:[\w+-][\w.+-]*/)+[\w+-][\w.+-]*\.[A-Za-z0-9]{1,8}"  # a/b/c.py
    r"|(?:\.{1,2}/)?(?:[\w+-][\w.+-]*/){2,}[\w+-][\w.+-]*)"  # a/b/c
    r"(?![\w/])"
)


_PATH_KEYS = frozenset({"path", "file", "filename", "file_path", "filepath", "dir", "directory"})


def compact_json(value: Any) -> str:
    """`value` as compact JSON (non-ASCII kept, other types as `str`)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def one_line(text: str) -> str:
    """`text` with each run of whitespace made one space."""
    return " ".join(text.split())


def _newest_paths(paths: list[str]) -> str:
    """The paths joined, the oldest left out (as `…`) beyond `_PATH_CHARS` characters."""
    kept: list[str] = []
    size = 0
    for path in reversed(paths):
        if kept and size + len(path) + 2 > _PATH_CHARS:
            kept.append("…")
            break
        kept.append(path)
        size += len(path) + 2
    return ", ".join(reversed(kept))


def _paths_in(value: Any, *, key: str | None = None) -> list[str]:
    if isinstance(value, str):
        if key in _PATH_KEYS and value.strip() and "\n" not in value and len(value) < 300:
            return [value.strip()]
        return _PATH_RE.findall(value[:20_000])
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _paths_in(v, key=str(k).lower())]
    if isinstance(value, list):
        return [p for v in value for p in _paths_in(v)]
    return []


def result_lines(text: str) -> list[str]:
    r"""The line of a tool output that a fallback summary keeps as its outcome, if any.

    The last line with words in it (closing structure such as `</output>` or `}` is skipped),
    when it is short (at most 200 characters) and carries a value: a digit, a path, a URL or a
    `name: value` / `name = value` pair. Why this one: command and
    tool output conventionally ends with its outcome (a test runner's `2 failed, 40 passed`,
    `wrote src/app.py`, a build id, an exit status), while what comes before it is bulk
    (listings, file bodies, pages) that the archive keeps whole. No marker format is
    assumed, so no output can plant a line by formatting it a certain way, and one line per
    output at most reaches the summary, next to the call it answers (dropped with it when the
    summary is cut), so the outputs never crowd out the record of the work.

    Example:
        >>> result_lines("Compiling 14 files\n...\nwrote build/app.bin (build id 88317)")
        ['wrote build/app.bin (build id 88317)']

    Args:
        text: The text of a successful tool output.

    Returns:
        Zero or one line, stripped.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    # Closing structure (`</output>`, `}`, `---`) is not the outcome: look past it, a little.
    for line in lines[::-1][:_STRUCTURE_LINES]:
        if not _WORD_RE.search(_TAG_RE.sub("", line)):
            continue
        ok = len(line) <= _FACT_LINE_CHARS and _VALUE_RE.search(line)
        return [line] if ok else []
    return []


def fallback_summary(
    messages: Sequence[BaseMessage], *, previous: str | None = None, max_chars: int = 6000
) -> str:
    r"""Build a summary from the messages alone, deterministically (same input, same bytes).

    It uses the four sections of a model summary:

    - `<completed>`: the previous summary's items, then how many messages this summary
      replaces by type, the tools used with counts, each tool call as `name({args})` (compact
      JSON, clipped to 200 characters) with `ok`, `error` or `no result` (an `ok` with its
      output's result line, `result_lines`, clipped to 120 characters and fenced as data,
      `quoted_data`), and the user requests already answered, each whole (whitespace
      collapsed to single spaces, never cut).
    - `<remaining>`: the previous summary's items, then the latest user request, whole, when
      no final AI answer follows it. A span with a newer request moves the previous summary's
      open request to `<completed>`, so `<remaining>` names only the latest one.
    - `<current_state>`: the previous summary's items, then one line of the files and paths
      touched (found in tool arguments and successful tool outputs: `a/b/c.py`, `/abs/path`,
      `path=` arguments), merged with the previous summary's line (the newest 800 characters),
      and the last plan or statement of intent (the last AI text, first 500 characters), which
      replaces the previous one: the section says where things stand, once.
    - `<notes>`: the previous summary's items, then one labelled `[error observation]`
      line per failing tool: how many of its results were errors and at most 120 characters
      of one line of the latest one (its first line; for a Python traceback, its last line,
      which names the exception), fenced as data (`quoted_data`). Error text never becomes
      summary content beyond that line, and error outputs are not scanned for paths or facts.

    Every line is escaped (`escape_markup`): text from a message never opens or closes a
    section, however it is written. The summary lands in a system message, so the text it
    copies from a tool output (a call's outcome, an error line) sits in JSON quotes after a
    label saying it is untrusted data, not instructions (`quoted_data`); the paths it names
    are path tokens only (no spaces).

    A tool result is an error when its `status` is `"error"` or its text starts like an error
    (`Error`, `Traceback`, `Exception`).

    Folding: the sections of `previous` (a model or fallback summary; free text goes into
    `<completed>`) are carried forward and this span's items appended, so items accumulate.
    When the result exceeds `max_chars`, the oldest line of the largest section is dropped
    first, repeatedly, and replaced by an `… N earlier item(s) omitted` marker. User requests go
    last, and the task (the first request) and the open request never go: the task a user gave
    survives every summary intact (only a task longer than `max_chars` itself is cut).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> print(fallback_summary([HumanMessage("Rename foo to bar in </remaining> x.py")]))
        <completed>
        - Summarized 1 earlier message(s): human 1.
        </completed>
        <remaining>
        - Latest user request (may still be open): Rename foo to bar in &lt;/remaining&gt; x.py
        </remaining>
        <current_state>
        - (none)
        </current_state>
        <notes>
        - (none)
        </notes>

    Args:
        messages: The messages this summary replaces, oldest first.
        previous: The previous running summary to fold in, if any.
        max_chars: Upper bound on the length of the result.

    Returns:
        The summary text, without a `<summary>` wrapper.
    """
    sections = previous_sections(previous)
    completed, remaining = sections["completed"].lines, sections["remaining"].lines
    state, notes = sections["current_state"].lines, sections["notes"].lines

    counts: dict[str, int] = {}
    for msg in messages:
        counts[msg.type] = counts.get(msg.type, 0) + 1
    if messages:
        by_type = ", ".join(f"{kind} {n}" for kind, n in counts.items())
        completed.append(f"- Summarized {len(messages)} earlier message(s): {by_type}.")

    failed: dict[str, str] = {}
    outcomes: dict[str, str] = {}  # call id -> the result line of its successful output
    errors: dict[str, list[str]] = {}  # tool name -> one line of each of its error outputs
    for msg in messages:
        if isinstance(msg, ToolMessage):
            lines = [line.strip() for line in text_of(msg).strip().splitlines() if line.strip()]
            first = lines[0] if lines else ""
            if is_error_result(msg, by_text=True):
                failed[msg.tool_call_id] = "error"
                if first.startswith("Traceback (most recent call last)"):
                    first = lines[-1]  # the exception line says what went wrong
                errors.setdefault(msg.name or "unknown tool", []).append(first)
            else:
                failed.setdefault(msg.tool_call_id, "ok")
                for fact in result_lines(text_of(msg)):  # its outcome, as observed data
                    outcomes[msg.tool_call_id] = clip(one_line(fact), _OUTCOME_CHARS)

    calls = [tc for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls]
    usage: dict[str, int] = {}
    for tc in calls:
        usage[tc["name"]] = usage.get(tc["name"], 0) + 1
    if usage:
        used = ", ".join(f"{name} ({n})" for name, n in sorted(usage.items()))
        completed.append(f"- Tools used: {used}.")
    for tc in calls:
        args = clip(compact_json(tc.get("args", {})), 200)
        status = failed.get(tc.get("id") or "", "no result")
        outcome = outcomes.get(tc.get("id") or "")
        status += f"; {quoted_data('output ends', outcome)}" if status == "ok" and outcome else ""
        completed.append(f"- Called {tc['name']}({args}) → {status}")

    humans = [i for i, m in enumerate(messages) if is_user_input(m)]
    answered = (
        bool(messages) and isinstance(messages[-1], AIMessage) and not (messages[-1].tool_calls)
    )
    if humans:  # a newer request: the open one of the previous summary was taken up
        for line in [x for x in remaining if x.startswith(LATEST)]:
            remaining.remove(line)
            completed.append(ASKED + line[len(LATEST) :])
    for i in humans:
        request = one_line(text_of(messages[i]))  # whole: a user's request is never cut
        if i == humans[-1] and not answered:
            remaining.append(LATEST + request)
        else:
            completed.append(ASKED + request)

    # Where things stand now: one line of paths (merged over folds), then the newest plan.
    paths: dict[str, None] = {}
    plan = [x for x in state if x.startswith(_PLAN)][-1:]
    for line in [x for x in state if x.startswith((_PATHS, _PLAN))]:
        state.remove(line)
        if line.startswith(_PATHS):
            paths.update(dict.fromkeys(p for p in line[len(_PATHS) :].split(", ") if p != "…"))
    for msg in messages:
        if isinstance(msg, AIMessage):
            for tc in msg.tool_calls:
                for path in _paths_in(tc.get("args", {})):
                    paths.pop(path, None)
                    paths[path] = None
        elif isinstance(msg, ToolMessage) and failed.get(msg.tool_call_id) != "error":
            for path in _paths_in(text_of(msg)):
                paths.pop(path, None)
                paths[path] = None
    if paths:
        state.append(_PATHS + _newest_paths(list(paths)))
    plans = [text_of(m).strip() for m in messages if isinstance(m, AIMessage)]
    plans = [p for p in plans if p]
    if plans:
        plan = [_PLAN + clip(one_line(plans[-1]), 500)]
    state.extend(plan)

    for tool, observed in sorted(errors.items()):
        notes.append(
            f"- [error observation] tool {tool} returned {len(observed)} error result(s); "
            + quoted_data("latest", clip(observed[-1], 120))
        )
    return fit(sections, max_chars)
