"""The edits a person meets, named once: what the commands print for each report decision.

A report's decisions carry the pipeline's kinds (`compact`, `shrink`, `auto_compact`, ...),
which are API and stay. What `demo`, `replay`, `inspect` and `compact` print, and what the
README and docs say, uses one word per edit from `EDITS`:

- `excerpted` (`compact`): a tool output was archived; the prompt shows an excerpt and the
  reference that reads it back;
- `shortened` (`compact` of model turns): a model turn was archived; the prompt keeps its
  first and last lines and its calls;
- `pruned` (`prune`): an old tool output is shown as a one-line placeholder (the state keeps
  it);
- `left the window` (`shrink`): the oldest turns are no longer in the prompt (the state keeps
  them);
- `summarized` (`auto_compact`, `summarize`): turns were folded into the running summary;
- `memory dropped` (`drop_memory`): retrieved memory was left out of the prompt;
- `cleared by a rebuild` (`rebuild`): after a turn the live history was cleared and the
  next prompt is rebuilt from a hint;
- `removed` (`remove`): summarized messages left the live state (the archive holds them);
- `entities` (`extract`): the extracted entities were updated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EDITS",
    "Edit",
    "changed",
    "counted",
    "describe",
    "edit_of",
    "message_count",
    "tally",
    "what_happened",
]


@dataclass(frozen=True)
class Edit:
    """One edit as a person reads it."""

    word: str
    """The word the commands print (`excerpted`)."""
    things: str
    """What it counts, plural (`tool outputs`)."""
    meaning: str
    """One sentence: what happened to the prompt."""
    archived: str = ""
    """What the edit wrote to the archive first (`archived whole`), said only where references
    to it were found (`what_happened`); empty for an edit that archives nothing itself."""


EDITS: dict[str, Edit] = {
    edit.word: edit
    for edit in (
        Edit(
            "excerpted",
            "tool outputs",
            "the prompt shows an excerpt of each and the reference that reads it back",
            "archived",
        ),
        Edit(
            "shortened",
            "model turns",
            "the prompt keeps their first and last lines and their calls",
            "archived whole",
        ),
        Edit("pruned", "tool outputs", "shown as a one-line placeholder; the state keeps them"),
        Edit("left the window", "messages", "no longer in the prompt; the state keeps them"),
        Edit("summarized", "messages", "folded into the running summary"),
        Edit("memory dropped", "memory results", "retrieved memory left out of the prompt"),
        Edit(
            "cleared by a rebuild",
            "messages",
            "cleared from the live history after a turn; the next prompt is rebuilt from a hint",
        ),
        Edit("removed", "messages", "they left the live state", "archived"),
        Edit("entities", "updates", "the extracted entities were updated"),
    )
}
"""Every edit, in the order the pipeline takes them."""

_WORDS = {
    "prune": "pruned",
    "shrink": "left the window",
    "auto_compact": "summarized",
    "summarize": "summarized",
    "drop_memory": "memory dropped",
    "rebuild": "cleared by a rebuild",
    "remove": "removed",
    "extract": "entities",
}


def _field(decision: Any, key: str) -> Any:
    # A decision as a report's `to_dict()` holds it, or a `Decision` object.
    if isinstance(decision, Mapping):
        return decision.get(key)
    return getattr(decision, key, None)


def edit_of(decision: Any) -> str | None:
    """The word for a report decision (a `Decision`, or its dict form, brief or full).

    None for decisions that are not edits (`repair`, `error`, `skip`, ...).
    """
    kind = str(_field(decision, "kind"))
    if kind == "compact":
        return "shortened" if (_field(decision, "detail") or {}).get("model_turns") else "excerpted"
    return _WORDS.get(kind)


def what_happened(word: str, refs: int) -> str:
    """What an edit did, as `inspect` prints it beside the `refs` references it found.

    An edit that archives what it hides says so only when references were found: with none
    (the archive read is not the run's), it says that instead of claiming an archive copy.
    """
    edit = EDITS[word]
    if not edit.archived:
        return edit.meaning
    if refs:
        return f"{edit.archived}; {edit.meaning}"
    return f"{edit.meaning}; no reference found in the archive read (pass the run's --archive)"


def counted(count: int, word: str) -> str:
    """`count` of what `word` edits, as a person says it: `1 tool output excerpted`."""
    edit = EDITS.get(word)
    things = edit.things if edit else "messages"
    if count == 1:
        *head, last = things.split(" ")
        things = " ".join([*head, last.removesuffix("s")])
    return f"{count} {things} {word}"


def message_count(decision: Any) -> int:
    """How many messages a report decision named (full: `message_ids`; brief: `messages`)."""
    return len(_field(decision, "message_ids") or []) or int(_field(decision, "messages") or 0)


def changed(decision: Any) -> bool:
    """Whether a report decision changed the prompt (it names messages or moved tokens).

    Reads a `Decision`, a full decision dict (`message_ids`) and a brief one (`messages`, a
    count) alike.
    """
    moved = _field(decision, "tokens_before") != _field(decision, "tokens_after")
    return bool(message_count(decision)) or moved


def describe(decision: Any) -> str:
    """One decision as a progress line says it: `2 tool outputs excerpted, 5,586 -> 4,386 tokens`.

    A summary that makes the prompt larger says why: the window had already cut the turns it
    replaces, and the summary (with the lines of tool output it quotes) is added.
    """
    word = edit_of(decision) or str(_field(decision, "kind"))
    count = message_count(decision)
    what = counted(count, word) if count else word
    before, after = _field(decision, "tokens_before"), _field(decision, "tokens_after")
    if before is None or after is None or before == after:
        return what
    moved = f"{what}, {before:,} -> {after:,} tokens"
    if word == "summarized" and after > before:
        quoted = (_field(decision, "detail") or {}).get("quoted_lines")
        lines = f", quoting {quoted} lines of tool output" if quoted else ""
        moved += f" (the window had already cut these turns; the summary{lines} is added)"
    return moved


def tally(decisions: Iterable[Any]) -> list[tuple[str, int]]:
    """How many messages each edit touched over `decisions`, in `EDITS` order.

    A decision that names no message (a rebuild without its count) counts once.
    """
    counts: dict[str, int] = {}
    for decision in decisions:
        word = edit_of(decision)
        if word is not None:
            counts[word] = counts.get(word, 0) + max(message_count(decision), 1)
    return [(word, counts[word]) for word in EDITS if word in counts]
