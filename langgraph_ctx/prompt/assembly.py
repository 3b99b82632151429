"""Prompt assembly: one base system prompt, dynamic context fragments, tool filtering.

Priority, high to low: system, tool schemas, dynamic context (task, retrieved memory), summary,
recent history. Placement keeps the bytes that change least first (base prompt, skills,
injections) and the most dynamic last (retrieved memory), so provider prompt caches hit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_ctx._ids import SYSTEM_ID
from langgraph_ctx.checks import check_list, check_str
from langgraph_ctx.errors import ConfigError, shorten
from langgraph_ctx.messages.content import TAG_KEY, get_tag, text_of
from langgraph_ctx.prompt.markup import data_block

ToolPolicy = Callable[[Any], bool] | Mapping[str, Sequence[str]]
"""A predicate on tools, or `{"allow": [...]}` / `{"deny": [...]}` by tool name."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Skill:
    """A skill the agent may use, advertised in an `<available_skills>` fragment."""

    name: str
    """Skill name."""
    description: str
    """One line on when to use it."""
    location: str | None = None
    """Where its instructions live (a path or URL), if any."""

    def __post_init__(self) -> None:
        check_str("name", self.name, example="web_search", owner="Skill")
        check_str(
            "description", self.description, empty=True, example="search the web", owner="Skill"
        )
        check_str("location", self.location, optional=True, owner="Skill")


MEMORY_ITEMS = "Notes retrieved for this conversation"
"""What the `<relevant_context>` block holds, as its label (`data_label`) names it."""


ENTITY_VALUES = "Values extracted from the conversation"
"""What the `<entities>` block holds, as its label (`data_label`) names it."""


def render_memory(items: Sequence[str]) -> str:
    """Retrieved memory as a `<relevant_context>` block, labelled and escaped: it is data.

    A store's items may hold text an agent once read (a tool output, a page), so the block
    opens with a label saying its items are untrusted data, not instructions (`data_block`).
    """
    return data_block("relevant_context", MEMORY_ITEMS, [f"- {item}" for item in items])


def render_skills(skills: Sequence[Skill]) -> str:
    """Skills as an `<available_skills>` fragment (sorted by name for a stable prefix)."""
    lines = [f"<available_skills count={quoteattr(str(len(skills)))}>"]
    for skill in sorted(skills, key=lambda s: s.name):
        where = f" location={quoteattr(skill.location)}" if skill.location else ""
        lines.append(
            f"  <skill name={quoteattr(skill.name)}{where}>{escape(skill.description)}</skill>"
        )
    lines.append("</available_skills>")
    return "\n".join(lines)


def render_entities(values: Mapping[str, Any]) -> str:
    """Entity state as stable JSON (sorted keys) in an `<entities>` block, labelled and escaped.

    The values were extracted from user and tool messages, so the block opens with a label
    saying they are untrusted data, not instructions (`data_block`).
    """
    body = json.dumps(values, sort_keys=True, ensure_ascii=False)
    return data_block("entities", ENTITY_VALUES, [body])


def coerce_skills(skills: Sequence[Skill | Mapping[str, Any]] | None) -> tuple[Skill, ...]:
    """Accept `Skill` objects or dicts with name/description/location.

    Raises:
        ConfigError: Not a list, or a skill without a name and a description or with a field
            of the wrong type; the message names it as `skills[i]`.
    """
    check_list("skills", skills, "skills, e.g. [{'name': 'search', 'description': '...'}]")
    out: list[Skill] = []
    for i, item in enumerate(skills or ()):
        if isinstance(item, Skill):
            out.append(item)
        elif isinstance(item, Mapping) and "name" in item and "description" in item:
            try:
                fields = {k: item[k] for k in ("name", "description", "location") if k in item}
                out.append(Skill(**fields))
            except ConfigError as exc:
                raise ConfigError(f"skills[{i}]: {exc}") from exc
        else:
            msg = (
                f"skills[{i}] needs a name and a description, got {shorten(item)}; pass e.g. "
                "{'name': 'web_search', 'description': 'search the web'}"
            )
            raise ConfigError(msg)
    return tuple(out)


SEARCH_TOOL_MARK = "langgraph_ctx.search"
"""The metadata key of the package's search tool (`make_search_tool`), so a build knows it is
bound whatever name it was given."""


def search_tool_name(tools: Sequence[Any] | None) -> str | None:
    """The name of the package's search tool among `tools`, or None when it is not bound.

    Excerpt footers and the summary's archive note name it only then: a prompt of ours never
    names a tool the call does not bind.
    """
    for tool in tools or ():
        metadata = getattr(tool, "metadata", None)
        if isinstance(metadata, Mapping) and metadata.get(SEARCH_TOOL_MARK):
            return tool_name(tool)
    return None


def tool_name(tool: Any) -> str:
    """Name of a tool given as a BaseTool, dict schema, function or pydantic model."""
    if isinstance(tool, Mapping):
        fn = tool.get("function")
        return str(fn.get("name") if isinstance(fn, Mapping) else tool.get("name", ""))
    return str(getattr(tool, "name", None) or getattr(tool, "__name__", ""))


def check_tool_policy(policy: Any) -> None:
    """Raise `ConfigError` unless `policy` is None, a predicate or `{"allow"/"deny": [...]}`."""
    if policy is None or callable(policy):
        return
    if not isinstance(policy, Mapping):
        msg = (
            f"tool_policy must be a predicate on tools or a dict like {{'allow': [...]}} / "
            f"{{'deny': [...]}}, got {type(policy).__name__} {policy!r}"
        )
        raise ConfigError(msg)
    unknown = sorted(map(str, set(policy) - {"allow", "deny"}))
    if unknown:
        msg = f"tool_policy keys must be 'allow' and/or 'deny', got {unknown}"
        raise ConfigError(msg)
    for key, names in policy.items():
        if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)):
            msg = f"tool_policy[{key!r}] must be a list of tool names, got {names!r}"
            raise ConfigError(msg)


def filter_tools(tools: Sequence[Any] | None, policy: ToolPolicy | None) -> list[Any]:
    """Apply a tool policy; returns a new list in the original order."""
    if not tools:
        return []
    if policy is None:
        return list(tools)
    if callable(policy):
        return [t for t in tools if policy(t)]
    check_tool_policy(policy)
    allow = set(policy.get("allow", ())) if "allow" in policy else None
    deny = set(policy.get("deny", ()))
    return [
        t for t in tools if (allow is None or tool_name(t) in allow) and tool_name(t) not in deny
    ]


def merge_system(base: Sequence[BaseMessage], fragments: Sequence[str]) -> SystemMessage | None:
    """One base system message from the system/developer messages plus fragments.

    A single system message with nothing to add is returned unchanged (same id, same content
    blocks), so provider-specific content such as cache-control blocks survives. A message
    with fragments is tagged with the length of its base text, so that when a prompt we built
    is fed back as history, its fragments (memory, summary, hint...) are taken off again
    instead of being added a second time: building on our own output changes nothing.
    """
    fragments = [f for f in fragments if f]
    base = [b for b in map(_own_base, base) if b is not None]
    if len(base) == 1 and not fragments and isinstance(base[0], SystemMessage):
        return base[0]
    texts = [text_of(m) for m in base]
    if not texts and not fragments:
        return None
    base_text = "\n\n".join(texts)
    first_id = base[0].id if base else SYSTEM_ID
    if not fragments:
        return SystemMessage(content=base_text, id=first_id)
    return SystemMessage(
        content="\n\n".join([*texts, *fragments]),
        id=first_id,
        additional_kwargs={TAG_KEY: {"kind": "system", "base_chars": len(base_text)}},
    )


def _own_base(message: BaseMessage) -> BaseMessage | None:
    """The base part of a system message `merge_system` wrote (None when it had none).

    Other messages are returned unchanged.
    """
    tag = get_tag(message)
    chars = tag.get("base_chars")
    if tag.get("kind") != "system" or not isinstance(chars, int):
        return message
    text = text_of(message)
    if not 0 <= chars <= len(text):
        return message
    return SystemMessage(content=text[:chars], id=message.id) if chars else None
