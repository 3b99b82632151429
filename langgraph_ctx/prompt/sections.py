"""The four sections of every summary: reading them, and writing them within a size.

A summary has `<completed>`, `<remaining>`, `<current_state>` and `<notes>`, whether a model
wrote it or `fallback_summary` built it. `parse` reads them, `fit` writes them within a number
of characters, dropping the oldest line of the largest section first (the user's requests go
last, the task and the open request never).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from langgraph_ctx.prompt.markup import SUMMARY_SECTIONS, escape_markup

_EMPTY_LINE = "- (none)"


# The line prefix of a user request the summary records as asked.
ASKED = "- User asked: "


# The line prefix of the newest user request, which may still be open.
LATEST = "- Latest user request (may still be open): "


_OMITTED_RE = re.compile(r"^- … (\d+) earlier item\(s\) omitted$")


# One section of a summary: its tag and its body.
SECTION_RE = re.compile(r"<(completed|remaining|current_state|notes)>(.*?)</\1>", re.DOTALL)


# Any opening or closing section tag.
ANY_TAG_RE = re.compile(r"</?(completed|remaining|current_state|notes)>")


_WRAPPER_RE = re.compile(r"\A<summary>(.*)</summary>\Z", re.DOTALL)


_FENCE_RE = re.compile(r"\A```[a-zA-Z]*\n(.*?)\n?```\Z", re.DOTALL)


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in `…` when cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…" if limit > 0 else ""


@dataclass(slots=True)
class Section:
    """One section of a summary: its kept lines and how many earlier ones were left out."""

    lines: deque[str] = field(default_factory=deque)
    omitted: int = 0

    def body(self) -> list[str]:
        """The lines to render: the omitted count first, a placeholder when empty."""
        head = [f"- … {self.omitted} earlier item(s) omitted"] if self.omitted else []
        lines = head + list(self.lines)
        return lines or [_EMPTY_LINE]


def _render(sections: Mapping[str, Section]) -> str:
    parts = []
    for name in SUMMARY_SECTIONS:
        body = "\n".join(sections[name].body())
        parts.append(f"<{name}>\n{body}\n</{name}>")
    return "\n".join(parts)


def fit(sections: Mapping[str, Section], max_chars: int) -> str:
    """Render within `max_chars`, dropping the oldest line of the largest section first.

    Every summary becomes text here, so every line is escaped here (`escape_markup`): a line
    from a message, a model or a previous summary can never open or close a section or a
    wrapper, whoever wrote the summary.
    """
    for section in sections.values():
        section.lines = deque(escape_markup(line) for line in section.lines)
    sizes = {n: sum(len(line) + 1 for line in sections[n].lines) for n in SUMMARY_SECTIONS}

    def rendered_length() -> int:  # len(_render(sections)) without rendering
        total = len(SUMMARY_SECTIONS) - 1
        for name in SUMMARY_SECTIONS:
            section = sections[name]
            head = len(section.body()[0]) + 1 if section.omitted or not section.lines else 0
            total += 2 * len(name) + 7 + head + sizes[name] - 1
        return total

    while rendered_length() > max_chars:
        found = _droppable(sections, sizes)
        if found is None:
            break
        name, index = found
        dropped = sections[name].lines[index]
        del sections[name].lines[index]
        sections[name].omitted += 1
        sizes[name] -= len(dropped) + 1
    excess = rendered_length() - max_chars
    left = [(n, i) for n in SUMMARY_SECTIONS for i in range(len(sections[n].lines))]
    if excess > 0 and left:  # only the task and the open request are left: cut the longer one
        name, index = max(left, key=lambda at: len(sections[at[0]].lines[at[1]]))
        line = sections[name].lines[index]
        cut = excess + 40  # room for the marker
        keep = max((len(line) - cut) // 2, 40)
        omitted = len(line) - 2 * keep
        if omitted > 0:
            marker = f" … [{omitted} characters omitted] … "
            sections[name].lines[index] = line[:keep] + marker + line[-keep:]
    text = _render(sections)  # over `max_chars` only when the bound is below the empty sections
    return text if len(text) <= max_chars else clip(text, max_chars)


def _is_request(line: str) -> bool:
    return line.startswith((ASKED, LATEST))


def _droppable(sections: Mapping[str, Section], sizes: Mapping[str, int]) -> tuple[str, int] | None:
    """The line `fit` drops next: `(section, index)`, or None when only the task is left.

    The oldest line of the largest section (notes last, ties to the earliest section), user
    requests kept while anything else can go; then the user requests, oldest first, except
    the task (the first request) and the latest open request, which are never dropped.
    """
    ordinary = {
        n: next((i for i, line in enumerate(sections[n].lines) if not _is_request(line)), None)
        for n in SUMMARY_SECTIONS
    }
    candidates = [n for n in SUMMARY_SECTIONS if n != "notes" and ordinary[n] is not None]
    candidates = candidates or [n for n in SUMMARY_SECTIONS if ordinary[n] is not None]
    if candidates:
        name = max(candidates, key=lambda n: sizes[n])
        index = ordinary[name]
        assert index is not None
        return name, index
    asked = [i for i, line in enumerate(sections["completed"].lines) if _is_request(line)]
    return ("completed", asked[1]) if len(asked) > 1 else None


def unwrap(text: str) -> str:
    """`text` without the code fences and `<summary>` tags wrapped around it."""
    text = text.strip()
    while True:
        match = _FENCE_RE.match(text) or _WRAPPER_RE.match(text)
        if match is None:
            return text
        text = match.group(1).strip()


def parse(text: str) -> dict[str, Section] | None:
    """Sections of a summary, or `None` when it has no section tag at all."""
    found: dict[str, str] = {}
    for match in SECTION_RE.finditer(text):
        # The first of each: the sections come in order, and anything repeated after them is
        # not the summary's (the input the model read had its tags escaped).
        found.setdefault(match.group(1), match.group(2))
    if not found:
        return None
    sections = {n: Section() for n in SUMMARY_SECTIONS}
    for name, body in found.items():
        for raw in body.strip("\n").splitlines():
            line = raw.rstrip()
            omitted = _OMITTED_RE.match(line)
            if omitted:
                sections[name].omitted += int(omitted.group(1))
            elif line.strip() and line != _EMPTY_LINE:
                sections[name].lines.append(line)
    return sections


def previous_sections(previous: str | None) -> dict[str, Section]:
    """The sections of the previous summary (an untagged one all under `completed`)."""
    sections = {n: Section() for n in SUMMARY_SECTIONS}
    if not previous or not previous.strip():
        return sections
    text = unwrap(previous)
    parsed = parse(text)
    if parsed is not None:
        return parsed
    sections["completed"].lines.extend(line for line in text.splitlines() if line.strip())
    return sections
