"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.prompt.assembly` (the base-prompt rule, `split_base`, in
`langgraph_ctx.messages.base`); the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.messages.base import (
    is_base_system,
    is_summary_message,
    split_base,
)
from langgraph_ctx.prompt.assembly import (
    Skill,
    ToolPolicy,
    check_tool_policy,
    coerce_skills,
    filter_tools,
    merge_system,
    render_entities,
    render_memory,
    render_skills,
    tool_name,
)

__all__ = [
    "Skill",
    "ToolPolicy",
    "check_tool_policy",
    "coerce_skills",
    "filter_tools",
    "is_base_system",
    "is_summary_message",
    "merge_system",
    "render_entities",
    "render_memory",
    "render_skills",
    "split_base",
    "tool_name",
]
