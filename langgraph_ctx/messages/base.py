"""The base prompt at the head of a history: what is configuration and what is conversation.

The leading system and developer messages form the base system prompt; a `<summary>` message
the package wrote is adopted (`split_base`). Everything from the first other message
on is history. The build, the rebuild and the ledger's `covered_ids` all ask this one rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_ctx.messages.content import get_tag, text_of, with_id


def is_summary_message(message: BaseMessage) -> bool:
    """Whether a message is a summary langgraph_ctx wrote."""
    tag = get_tag(message)
    return tag.get("kind") == "summary" and (
        isinstance(message, SystemMessage) or tag.get("shown_as") == "user"
    )


def is_base_system(message: BaseMessage) -> bool:
    """System or developer messages that belong in the base system prompt."""
    return (
        isinstance(message, SystemMessage)
        and not is_summary_message(message)
        and not text_of(message).startswith("[tool:")
    )


def split_base(
    messages: Sequence[BaseMessage], *, user_form: bool = False
) -> tuple[list[BaseMessage], str | None, list[BaseMessage]]:
    """Split a history into its base system prompt, an adopted summary and the conversation.

    The one rule for what is configuration and what is history, used by the build and by the
    rebuild alike: the LEADING system/developer messages form the base (each with an id,
    derived when missing); a leading `<summary>` message we wrote is adopted (its text
    returned, the message itself dropped). With `user_form`, so is one shown as a user message
    after the pinned task (`summary_placement="after_task"`, a prompt fed back as history):
    only the build of that placement asks, where the adopted text is shown as user text
    again. A user message can carry the summary's tag as well as we can, so elsewhere (the
    other placements, the rebuild's hint in the system prompt) it stays a user message in the
    history and never becomes system text. Everything from the first other message on is
    history, a later system message included: the build shows it in place, and the rebuild
    archives and clears it with the rest, so it never moves into the base prompt.

    Returns:
        `(base, adopted_summary_text, history)`; the text is that of the first leading
        summary (else of the first one shown as a user message), or None.
    """
    base: list[BaseMessage] = []
    adopted: str | None = None
    i = 0
    while i < len(messages) and isinstance(messages[i], SystemMessage):
        message = messages[i]
        if is_summary_message(message):
            if adopted is None:
                text = text_of(message)
                adopted = summary_text_of(text)
        elif is_base_system(message):
            base.append(with_id(message, i))
        else:  # a `[tool:` fallback: tool output, so history
            break
        i += 1
    history = list(messages[i:])
    # With `summary_placement="after_task"` the summary we wrote follows the pinned task as a
    # user message: a prompt fed back as history brings it inside the conversation.
    shown = [m for m in history if is_summary_message(m)] if user_form else []
    if shown:
        if adopted is None:
            adopted = summary_text_of(text_of(shown[0]))
        history = [m for m in history if not is_summary_message(m)]
    return base, adopted, history


def summary_text_of(content: str) -> str:
    """The summary text of a `<summary>` message's content (without wrapper and recall note)."""
    inner = content.removeprefix("<summary>\n")
    return inner.partition("\n</summary>")[0] if "\n</summary>" in inner else inner
