"""Entity extraction: a small schema kept up to date and injected as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from langgraph_ctx._effects import Plan
from langgraph_ctx.checks import check_int
from langgraph_ctx.ledger.edits import record_extraction
from langgraph_ctx.messages.blocks import is_user_input
from langgraph_ctx.strategies.base import check_field_types

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


@dataclass(frozen=True, kw_only=True, slots=True)
class EntityExtraction:
    """Keep a schema of entities (e.g. `{destination, date}`) up to date after each user input.

    Runs on every build, before the cutting strategies. The values are injected as JSON in a
    stable place of the system prompt. When extraction fails, the previous values stay and
    the report records the failure. Needs the manager's `extractor`.
    """

    recent_messages: int = 6
    """How many of the newest messages the extractor sees."""

    def __post_init__(self) -> None:
        check_field_types(self)
        check_int(
            "recent_messages",
            self.recent_messages,
            minimum=1,
            example=6,
            note="how many of the newest messages the extractor reads",
        )

    def apply(self, view: PromptView) -> Plan[None]:
        """Extract when a new user message arrived since the last extraction."""
        extract = view.resources.extract
        last_user = next((m for m in reversed(view.history) if is_user_input(m)), None)
        entities = dict(view.ledger.get("entities") or {})
        if extract is None or last_user is None or entities.get("last_input_id") == last_user.id:
            return
        before = view.tokens
        old_cost = view.cost(view.system_message())
        recent = view.history[-self.recent_messages :]
        try:
            values = yield from extract(list(recent), entities.get("values"))  # type: ignore[arg-type]
            recorded = record_extraction(view.ledger, last_input_id=last_user.id, values=values)
        except Exception as exc:  # keep the previous state
            error = f"{type(exc).__name__}: {exc}"
            recorded = record_extraction(view.ledger, last_input_id=last_user.id, error=error)
        view.tokens += view.cost(view.system_message()) - old_cost
        view.record(
            "extract",
            before,
            message_ids=[last_user.id or ""],
            detail={"error": recorded.get("error")},
        )
