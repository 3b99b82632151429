"""What a summarizer's answer must be: the four sections, not an error, not a copy.

`validate` normalizes a model's output into the four sections or says why it is rejected:
empty, enormous, error-like, malformed, parroting the instructions or copied from its input.
"""

from __future__ import annotations

import re

from langgraph_ctx.prompt.markup import SUMMARY_SECTIONS
from langgraph_ctx.prompt.sections import (
    ANY_TAG_RE,
    SECTION_RE,
    Section,
    clip,
    fit,
    parse,
    unwrap,
)
from langgraph_ctx.summaries.transcript import SUMMARY_PROMPT

# Error-like model output. A summary is rejected when its text (free text) or the text before
# its first section (structured output), or all of a very short structured output, matches.
_ERROR_START_RE = re.compile(
    r"^\s*(?:error\b|exception\b|traceback \(most recent call last\)|i'?m sorry|i am sorry|"
    r"sorry,|i can(?:no|')t\b|i cannot\b|i am unable|i'm unable|unable to\b|as an ai\b)",
    re.IGNORECASE,
)


_ERROR_PHRASES = (
    "too long to summarize",
    "cannot summarize",
    "can't summarize",
    "could not summarize",
    "unable to summarize",
    "context_length_exceeded",
    "maximum context length",
    "context length exceeded",
    "rate limit",
    "internal server error",
)


_ENORMOUS_FACTOR = 3  # outputs over 3x the bound ignored the instructions: reject, do not trim


def _looks_like_error(text: str) -> bool:
    lowered = text.lower()
    return bool(_ERROR_START_RE.match(text)) or any(p in lowered for p in _ERROR_PHRASES)


_WORDS_RE = re.compile(r"\w+")


_PARROT_N, _PARROT_SHARE, _PARROT_MIN = 4, 0.5, 6
"""A summary whose 4-word runs are at least half the instructions' (and not the input's)
parrots the prompt; fewer than 6 runs is too short to judge."""


_COPY_N, _COPY_SHARE, _COPY_MIN = 8, 0.8, 30
"""A summary whose new 8-word runs are at least 80% the input's is a near-copy, not a summary;
fewer than 30 runs (about 37 words) is too short to judge (facts are meant to be copied)."""


def _shingles(text: str, n: int) -> set[tuple[str, ...]]:
    words = _WORDS_RE.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _borrowed_share(
    content: str, source: set[tuple[str, ...]], exclude: set[tuple[str, ...]], n: int, least: int
) -> float:
    """Share of `content`'s n-word runs (less `exclude`) found in `source`; 0 when too short."""
    mine = _shingles(content, n) - exclude
    if len(mine) < least:
        return 0.0
    return len(mine & source) / len(mine)


def _borrowing_problem(content: str, source: str, previous: str | None) -> str | None:
    """Why `content` is not a summary of `source`: it repeats the instructions or copies input.

    Runs of words the previous summary holds are left out of both checks: folding keeps its
    items verbatim on purpose.
    """
    if not source:
        return None
    kept = _shingles(previous or "", _PARROT_N)
    instructions = _shingles(SUMMARY_PROMPT, _PARROT_N) - _shingles(source, _PARROT_N)
    share = _borrowed_share(content, instructions, kept, _PARROT_N, _PARROT_MIN)
    if share >= _PARROT_SHARE:
        return (
            f"parroted the instructions ({share:.0%} of its phrases are the summarizer prompt's "
            "section descriptions, not the transcript's content)"
        )
    kept = _shingles(previous or "", _COPY_N)
    share = _borrowed_share(content, _shingles(source, _COPY_N), kept, _COPY_N, _COPY_MIN)
    if share >= _COPY_SHARE:
        return f"copied from its input ({share:.0%} of its phrases are verbatim input runs)"
    return None


def validate(
    raw: str, *, max_chars: int, source: str = "", previous: str | None = None
) -> tuple[str | None, str | None]:
    """Normalize a model's output into the four sections: `(text, None)` or `(None, why)`.

    With `source` (the request the model read), output that repeats the instructions or is
    mostly copied from `source` is rejected too (see `_borrowing_problem`).
    """
    text = unwrap(raw)
    if not text:
        return None, "empty output"
    if len(text) > _ENORMOUS_FACTOR * max_chars:
        return None, f"enormous output ({len(text)} characters, bound {max_chars})"
    first_tag = ANY_TAG_RE.search(text)
    if first_tag is None:
        if _looks_like_error(text):
            return None, f"error-like output: {clip(text.splitlines()[0], 120)!r}"
        problem = _borrowing_problem(text, source, previous)
        if problem is not None:
            return None, problem
        sections = {n: Section() for n in SUMMARY_SECTIONS}
        sections["current_state"].lines.extend(line.rstrip() for line in text.splitlines())
        return fit(sections, max_chars), None
    preamble = text[: first_tag.start()].strip()
    if preamble and _looks_like_error(preamble):
        return None, f"error-like output: {clip(preamble.splitlines()[0], 120)!r}"
    parsed = parse(text) or {}
    closed = {m.group(1) for m in SECTION_RE.finditer(text)}
    missing = [n for n in ("completed", "remaining") if n not in closed]
    if missing:
        return None, f"malformed output: no closed <{'>, <'.join(missing)}> section"
    content = " ".join(" ".join(s.lines) for s in parsed.values()).strip()
    if not content:
        return None, "empty sections"
    if len(content) < 200 and _looks_like_error(content):
        return None, f"error-like output: {clip(content, 120)!r}"
    problem = _borrowing_problem(content, source, previous)
    if problem is not None:
        return None, problem
    return fit(parsed, max_chars), None
