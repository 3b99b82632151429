"""The data of `langgraph-ctx view`'s page, from a thread's plain data: `page_data`.

Pure: the plain data `langgraph_ctx_tools.cli.page` reads (each call's recorded report and its
prompt by part, the full history, the restored archive entries) in, the JSON the page embeds
out. Nothing is guessed here: a call's total is the report's `tokens`, its parts the counted
messages of its prompt and its tool schemas, and `outside` the rest of the recorded total.

The page must stay small for long threads, so every text is stored once (`strings`, indexed),
and every prompt part once (`items`: a message shown the same way in many calls is one
item); calls list item numbers. The format:

- `strings`: every text; other fields hold indices into it (-1: none);
- `kinds`: `[key, label]` per part kind, in stacking order;
- `items`: `[kind, tokens, message, [text, ...], ref]` (`message`: index into `messages`;
  the texts joined by newlines are the part as the prompt showed it);
- `calls`: `[tokens, limit, trigger, [tokens per kind], [item, ...], [[edit, line, [message,
  ...]], ...], ok]`;
- `messages`: the full history, `[id, type, name, text, ref]`;
- `entries`: `{ref: [string, ...] | null}`: an archive entry restored, the lines
  `langgraph-ctx restore` prints joined by newlines (null: the archive cannot read it);
- `window`: the model's window when it is known (a replayed file, `--window`), else null: a
  report records the budget (the window less the output reserved), not the window;
- `reserved`: the output reserved, `window` less the budget (the largest `limit` of the
  calls), so that the page's header states three numbers that add up; null without a window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_ctx.errors import InputError
from langgraph_ctx_tools.cli.edits import changed, describe, edit_of

__all__ = ["KINDS", "page_data"]

KINDS: tuple[tuple[str, str], ...] = (
    ("system", "system prompt"),
    ("summary", "summary"),
    ("quoted", "quoted lines"),
    ("excerpt", "excerpts"),
    ("shortened", "shortened turns"),
    ("pruned", "pruned placeholders"),
    ("message", "whole messages"),
    ("tools", "tool schemas"),
    ("outside", "memory and the rest not in the state"),
)
"""Every part of a prompt, in the order its bar stacks them. `outside`: what the recorded
total holds beyond the counted prompt and tools (the agent's own system prompt and tool
schemas when the thread's state does not hold them, retrieved memory)."""

_KIND = {key: n for n, (key, _) in enumerate(KINDS)}


class _Strings:
    """Each text once; its index everywhere else."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.texts: list[str] = []

    def __call__(self, text: str | None) -> int:
        if text is None:
            return -1
        found = self.index.get(text)
        if found is None:
            found = self.index[text] = len(self.texts)
            self.texts.append(text)
        return found


def page_data(thread: Mapping[str, Any]) -> dict[str, Any]:
    """The page's JSON from `thread_from_db` / `thread_from_file` output (see the module)."""
    strings = _Strings()
    messages = thread.get("messages") or []
    position = {m["id"]: n for n, m in enumerate(messages) if m.get("id")}
    rows = [
        [strings(m.get("id")), m["type"], strings(m.get("name") or ""), strings(m["text"]),
         strings(m.get("ref"))]
        for m in messages
    ]  # fmt: skip
    items: dict[tuple[Any, ...], int] = {}
    calls = [_call(call, strings, items, position) for call in thread.get("calls") or []]
    entries = {
        ref: None if parts is None else [strings(p) for p in parts]
        for ref, parts in (thread.get("entries") or {}).items()
    }
    window = thread.get("window")
    return {
        "title": thread.get("title", ""),
        "window": window,
        "reserved": _reserved(window, calls),
        "kinds": [list(k) for k in KINDS],
        "strings": strings.texts,
        "items": [[*key[:3], list(key[3]), key[4]] for key in items],
        "calls": calls,
        "messages": rows,
        "entries": entries,
    }


def _reserved(window: int | None, calls: Sequence[Sequence[Any]]) -> int | None:
    """The output reserved: the window less the budget every report records (`limit`).

    A budget is the window less the reserve, so a window below the largest recorded budget
    cannot be this thread's (a `--window` given too small): refused, rather than a page whose
    header states a negative reserve.
    """
    if window is None:
        return None
    budget = max((int(call[1]) for call in calls), default=0)
    if window < budget:
        msg = (
            f"the window {window:,} is less than the thread's recorded budget {budget:,} tokens "
            f"(the window less the output reserved); pass the model's window (--window "
            f"{budget} or more) or leave --window out"
        )
        raise InputError(msg)
    return int(window) - budget


def _call(
    call: Mapping[str, Any],
    strings: _Strings,
    items: dict[tuple[Any, ...], int],
    position: Mapping[str, int],
) -> list[Any]:
    report = call.get("report") or {}
    total = int(report.get("tokens") or 0)
    sums = [0] * len(KINDS)
    shown = []
    for part in call.get("parts") or []:
        kind = _KIND[part["kind"]]
        sums[kind] += int(part["tokens"])
        key = (
            kind,
            int(part["tokens"]),
            position.get(part.get("id") or "", -1),
            tuple(strings(line) for line in part.get("lines") or ()),
            strings(part.get("ref")),
        )
        shown.append(items.setdefault(key, len(items)))
    sums[_KIND["tools"]] = int(call.get("tools") or 0)
    sums[_KIND["outside"]] = max(0, total - sum(sums))
    return [
        total,
        int(report.get("limit") or 0),
        report.get("trigger"),
        sums,
        shown,
        _edits(report.get("decisions") or [], strings, position),
        bool(report.get("ok", True)),
    ]


def _edits(
    decisions: Sequence[Mapping[str, Any]], strings: _Strings, position: Mapping[str, int]
) -> list[list[Any]]:
    """The decisions that changed the prompt: their word, their line, the messages named."""
    edits = []
    for decision in decisions:
        word = edit_of(decision)
        if word is None or not changed(decision):
            continue
        named = [position[i] for i in decision.get("message_ids") or [] if i in position]
        edits.append([strings(word), strings(describe(decision)), named])
    return edits
