"""How a `PromptView` renders the prompt: `ViewRendering`.

The base system message with every fragment in its stable position, the running summary, each
history message as the prompt shows it (`shown`: a placeholder when pruned or compacted, the
conversation form of a misplaced message), the user stand-in that may open the conversation,
and the prompt (`render`) with its exact count (`count_full`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langgraph_ctx.ledger.summary import listed_dump_refs
from langgraph_ctx.messages.content import get_tag, text_of
from langgraph_ctx.messages.repair import (
    conversation_start_message,
    in_conversation_form,
    needs_conversation_form,
)
from langgraph_ctx.prompt.assembly import merge_system, render_entities, render_memory
from langgraph_ctx.prompt.render import (
    compacted_text,
    pruned_text,
    recall_note,
    replace_text,
    shortened_turn,
    summary_body,
    summary_message_for,
    task_dropped_message,
)
from langgraph_ctx.prompt.view_data import ViewData
from langgraph_ctx.tokens.counter import checked_count


class ViewRendering(ViewData):
    """The rendering of a `PromptView` (see `PromptView`)."""

    def count_full(self) -> int:
        """Exact count of the rendered prompt, tool schemas included."""
        return checked_count(self.counter, self.render()) + self.tool_tokens

    def system_message(self) -> SystemMessage | None:
        """The one base system message, with every fragment in its stable position."""
        fragments = list(self.static_fragments)
        entities = (self.ledger.get("entities") or {}).get("values")
        if entities:
            fragments.append(render_entities(entities))
        hint = self.ledger.get("hint")
        if hint and hint.get("text"):
            fragments.append(hint["text"])
        summary = self.ledger.get("summary")
        if summary and summary.get("text") and self.summary_placement == "merged" and not hint:
            text = summary_body(summary["text"], summary.get("quotes") or ())
            refs = listed_dump_refs(summary)
            note = recall_note(refs, summary.get("dump_index"), self.search_tool)
            fragments.append(f"<summary>\n{text}\n</summary>" + (f"\n{note}" if note else ""))
        if self.memory_items and not self.memory_dropped:
            fragments.append(render_memory(self.memory_items))
        key = ("system", tuple((m.id, text_of(m)) for m in self.base), tuple(fragments))
        system: SystemMessage | None = self.render_cache.get(
            key, lambda: merge_system(self.base, fragments)
        )
        return system

    def summary_message(self) -> SystemMessage | None:
        """The running summary as its own system message (separate placement)."""
        summary = self.ledger.get("summary")
        if not summary or not summary.get("text") or self.summary_placement != "separate":
            return None
        if (self.ledger.get("hint") or {}).get("text"):
            return None  # the compression hint carries the summary
        text = summary["text"]
        covered = int(summary.get("covered", 0))
        refs = tuple(listed_dump_refs(summary))
        index = summary.get("dump_index")
        quotes = tuple(summary.get("quotes") or ())
        search = self.search_tool
        message: SystemMessage = self.render_cache.get(
            ("summary", text, covered, refs, index, quotes, search),
            lambda: summary_message_for(
                text, covered, refs, dump_index=index, quotes=quotes, search=search
            ),
        )
        return message

    def shown(self, message: BaseMessage) -> BaseMessage:
        """How a history message appears in the prompt.

        With the tool-call ids the repair gave it (`reshown`); a placeholder when pruned or
        compacted; a system or blank user message inside the conversation in the form every
        provider accepts (`in_conversation_form`).
        """
        mid = message.id or ""
        message = self.reshown.get(mid, message)
        shown = message
        # A compacted entry wins over a pruned one (compaction replaces an earlier pruning).
        excerpt = partial(compacted_text, search=self.search_tool)
        for kind, text_for in (("compacted", excerpt), ("pruned", pruned_text)):
            entry = self.ledger[kind].get(mid)  # type: ignore[literal-required]
            if entry is not None:
                # The text is made only when the cache has no placeholder for this entry.
                make: Callable[[], BaseMessage] = partial(
                    _placeholder, message, text_for, mid, entry, kind
                )
                if isinstance(message, AIMessage):  # a model turn is shortened, not replaced
                    make = partial(shortened_turn, message, mid, entry)
                key = (kind, mid, self.search_tool)
                shown = self.render_cache.placeholder(key, entry, message, make)
                break
        if not needs_conversation_form(shown):
            return shown
        converted: BaseMessage = self.render_cache.get(
            # Everything the converted copy takes from `shown` is in the key (ids collide
            # across the threads one manager serves).
            ("conversation_form", mid, shown.type, text_of(shown), _tag_key(shown)),
            lambda: in_conversation_form(shown),
        )
        return converted

    def opens_with_stand_in(self) -> bool:
        """Whether the prompt needs a user stand-in: its conversation opens with no user message."""
        if self.pin is not None or (self.ledger.get("window") or {}).get("task_dropped"):
            return False
        first = self.history[self.start] if self.start < len(self.history) else None
        return first is not None and not isinstance(self.shown(first), HumanMessage)

    def opener(self) -> HumanMessage | None:
        """The user stand-in that opens the shown conversation, when it needs one.

        The note for a task too large to keep, or the stand-in before a conversation that
        starts with the model. Window moves account for it appearing and going.
        """
        if self.pin is None and (self.ledger.get("window") or {}).get("task_dropped"):
            return task_dropped_message()
        return conversation_start_message() if self.opens_with_stand_in() else None

    def render(self) -> list[BaseMessage]:
        """The prompt as it stands."""
        out: list[BaseMessage] = []
        system = self.system_message()
        if system is not None:
            out.append(system)
        summary = self.summary_message()
        if summary is not None:
            out.append(summary)
        opener = self.opener()
        if opener is not None:
            out.append(opener)
        out.extend(self.shown(self.history[i]) for i in self.window_indices())
        return out


def _tag_key(message: BaseMessage) -> str:
    return json.dumps(get_tag(message), sort_keys=True, default=str)


def _placeholder(
    message: BaseMessage,
    text_for: Callable[[str, Mapping[str, Any], str | None], str],
    mid: str,
    entry: Mapping[str, Any],
    kind: str,
) -> BaseMessage:
    tag = get_tag(message)
    # Our own stand-in fed back as history has no original lines to excerpt.
    original = None if tag.get("pruned") or tag.get("compacted") else text_of(message)
    return replace_text(message, text_for(mid, entry, original), **{kind: True})
