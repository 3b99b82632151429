"""Entity/state extraction: a user schema kept up to date by a structured-output call.

`EntityExtractor` asks a chat model (through `with_structured_output`) for the current values
of a schema (a pydantic model or a TypedDict, e.g. `{destination, date}`) given the previous
values and the newest messages. The pipeline's `EntityExtraction` strategy calls it after each
new user input and injects the values as JSON in the system prompt. `EntityExtractor.plan` holds
the call as a `CallModel` effect on the structured-output runnable, so the pipeline composes it
with `yield from`; `extract` and `aextract` drive it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from langgraph_ctx._effects import CallModel, Plan, both
from langgraph_ctx.checks import check_list
from langgraph_ctx.errors import ConfigError, shorten
from langgraph_ctx.summaries.internal_calls import internal_call_config, internal_model
from langgraph_ctx.summaries.transcript import render_transcript

EXTRACTION_PROMPT = (
    "You keep a small record of facts about the conversation up to date. Given the current "
    "record (JSON) and the newest messages, return the complete updated record: keep values "
    "that still hold, change values the user changed, fill values the user gave, and leave "
    "unknown values empty. Never invent values."
)
"""Instruction sent with every extraction call."""


@dataclass(frozen=True, kw_only=True)
class EntityExtractor:
    """Extract entity values with a chat model's structured output.

    Example:
        >>> from typing import TypedDict
        >>> class Trip(TypedDict, total=False):
        ...     destination: str
        ...     date: str
        >>> extractor = EntityExtractor(model=my_model, schema=Trip)  # doctest: +SKIP

    Args:
        model: A chat model that supports `with_structured_output`.
        schema: A pydantic model class or a TypedDict.
    """

    model: Any
    """The chat model."""
    schema: Any
    """The pydantic model or TypedDict describing the entities."""
    tags: tuple[str, ...] = ("langgraph_ctx", "langgraph_ctx:extractor")
    """Trace tags on extraction calls."""
    _runnable: Any = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        model = self.model
        if not callable(getattr(model, "with_structured_output", None)):
            msg = (
                f"EntityExtractor(model=...): model must be a chat model with structured "
                f"output, got {type(model).__name__} {shorten(model)}; pass e.g. "
                "init_chat_model('openai:gpt-4o-mini')"
            )
            raise ConfigError(msg)
        check_list("tags", self.tags, "strings, e.g. ['my_app']", of=str, owner="EntityExtractor")
        runnable = (
            internal_model(model)
            .with_structured_output(self.schema)
            .with_config(tags=list(self.tags), run_name="langgraph_ctx_extractor")
        )
        object.__setattr__(self, "_runnable", runnable)

    def prompt(
        self, messages: Sequence[BaseMessage], previous: Mapping[str, Any] | None
    ) -> list[BaseMessage]:
        """The messages sent to the model."""
        record = json.dumps(dict(previous or {}), sort_keys=True, ensure_ascii=False)
        return [
            SystemMessage(EXTRACTION_PROMPT),
            HumanMessage(
                f"<record>\n{record}\n</record>\n<messages>\n{render_transcript(messages)}\n"
                "</messages>"
            ),
        ]

    def plan(
        self, messages: Sequence[BaseMessage], previous: Mapping[str, Any] | None
    ) -> Plan[dict[str, Any]]:
        """`extract` as a plan: one `CallModel` effect; a model failure propagates."""
        config = internal_call_config(None, "entity_extraction")
        values = yield CallModel(self._runnable, self.prompt(messages, previous), config)
        return _as_dict(values)

    extract, aextract = both(
        plan,
        name="extract",
        doc="Updated values (raises when the model fails; the strategy keeps the old ones).",
    )


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}
    msg = f"the extractor returned {type(value).__name__}, not the schema's values"
    raise TypeError(msg)
