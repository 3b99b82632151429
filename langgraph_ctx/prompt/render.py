"""The pieces of the prompt view: placeholders, notes, the summary message, the render cache.

The cache hands back the same object for the same rendering. The rest are pure functions of
ledger entries and messages; `Workspace` decides when each is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx._ids import TASK_DROPPED_ID, summary_id
from langgraph_ctx._lru import LRUCache, measured_deep
from langgraph_ctx.messages.content import TAG_KEY, get_tag, text_of
from langgraph_ctx.prompt.excerpt import render_excerpt
from langgraph_ctx.prompt.markup import WRAPPER_TAGS, data_block, data_label, escape_markup


class RenderCache:
    """A bounded map from a rendering's inputs to the message rendered (same key, same object).

    Rendering is deterministic, so reusing an earlier object changes no byte of a prompt; it
    lets a counter that remembers the previous prompt recognise the unchanged prefix cheaply.
    An `LRUCache` of `max_bytes`, each rendering measured with what it keeps alive (its key's
    text, the message made and, for a placeholder, the source message: `measured_deep`).

    Args:
        max_bytes: How much memory the renderings kept may take.
    """

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        """The byte budget of the renderings kept."""
        self._items: LRUCache[Any, Any] = LRUCache(max_bytes, size=measured_deep)

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        """The message rendered for `key`, made by `make()` the first time."""
        hit = self._items.get(key)
        if hit is None:
            hit = make()
            self._items.put(key, hit)
        return hit

    def placeholder(
        self,
        key: Any,
        entry: Mapping[str, Any],
        source: BaseMessage,
        make: Callable[[], BaseMessage],
    ) -> BaseMessage:
        """The placeholder of `source` for a ledger entry, reused while both are unchanged.

        A placeholder is a copy of its source message (call id, name, artifact, metadata)
        with new text, so it is reused only for an equal source: one manager serves many
        threads, and message ids (the key) collide across threads (client-supplied ids,
        copied threads, replays).
        """
        hit = self._items.get(key)
        if hit is not None and hit[0] == entry and (hit[1] is source or hit[1] == source):
            return hit[2]  # type: ignore[no-any-return]
        message = make()
        self._items.put(key, (dict(entry), source, message))
        return message


def still_describes(entry: Mapping[str, Any], message: BaseMessage) -> bool:
    """Whether a ledger entry still describes `message` (or `message` is our placeholder)."""
    tag = get_tag(message)
    if tag.get("pruned") or tag.get("compacted"):
        return True  # our own placeholder fed back as history
    text = text_of(message)
    if "chars" in entry and len(text) != entry["chars"]:
        return False
    return text.startswith(str(entry.get("preview", "")))


def tool_of(message: BaseMessage) -> str:
    """The tool a result (or a `[tool: ...]` fallback) came from."""
    name = getattr(message, "name", None)
    if name:
        return str(name)
    text = text_of(message)
    if text.startswith("[tool:"):
        return text[6 : text.find("]")].strip() if "]" in text else "tool"
    return "tool"


QUOTED_LINES = "Verbatim lines from earlier tool output"
"""What the summary's `<quoted_lines>` block holds, as its label (`data_label`) names it."""


def summary_body(text: str, quotes: Sequence[str] = ()) -> str:
    """What goes inside `<summary>`: the text, then the quoted tool-output lines, if any.

    Wrapper tags inside the text are escaped, and every tag of ours inside a quoted line
    (`escape_markup`): nothing in a summary can close its wrapper and speak as the system
    prompt, and a quoted line cannot close its own block. The quoted lines are tool output
    in a system message, so their block opens with a label saying they are verbatim tool
    output, untrusted data and not instructions (`data_block`).
    """
    body = escape_markup(text, WRAPPER_TAGS)
    if quotes:
        body += "\n" + data_block("quoted_lines", QUOTED_LINES, quotes)
    return body


def split_summary_body(body: str | None) -> tuple[str | None, list[str]]:
    """The summary text and quoted lines of a `summary_body` (a `<summary>` fed back as history).

    The inverse of `summary_body` up to escaping, which is idempotent: rendering the parts
    again gives the same bytes, so a prompt fed back as history, its summary adopted
    (`adopt_summary`), shows the same summary. A body without our labelled block is all text;
    None (no summary found) stays None.
    """
    if body is None:
        return None, []
    head = f"\n<quoted_lines>\n{data_label(QUOTED_LINES)}\n"
    end = "\n</quoted_lines>"
    at = body.rfind(head)
    if at < 0 or not body.endswith(end) or at + len(head) > len(body) - len(end):
        return body, []
    return body[:at], body[at + len(head) : -len(end)].split("\n")


def summary_message_for(
    text: str,
    covered: int,
    dump_refs: Sequence[str],
    *,
    dump_index: str | None = None,
    quotes: Sequence[str] = (),
    search: str | None = None,
    as_user: bool = False,
) -> SystemMessage | HumanMessage:
    """The `<summary>` system message, its id derived from what it says.

    The body is `summary_body` (escaped). After the wrapper, `recall_note` tells the agent how
    to read back what the summary replaced (and, with the `search` tool bound, find a line).
    `as_user`: the same text as a user message (tagged `shown_as: user`), for a summary placed
    inside the conversation, where Anthropic takes no system text (`after_task`).
    """
    text = summary_body(text, quotes)
    note = recall_note(dump_refs, dump_index, search)
    tag: dict[str, Any] = {
        "kind": "summary",
        "covered": covered,
        "dump_refs": list(dump_refs),
        "dump_index": dump_index,
    }
    content = f"<summary>\n{text}\n</summary>" + (f"\n{note}" if note else "")
    if as_user:
        tag |= {"shown_as": "user", "was": "system"}
        return HumanMessage(content=content, id=summary_id(text), additional_kwargs={TAG_KEY: tag})
    return SystemMessage(content=content, id=summary_id(text), additional_kwargs={TAG_KEY: tag})


def search_notes(search: str) -> tuple[str, str]:
    """What an excerpt's last line and the summary's note add to name the bound search tool.

    `(excerpt, summary)`: each is added just before the closing `]` of its line.
    """
    return f"; hidden lines: {search}", f"; {search} finds any line of them"


def recall_note(dump_refs: Sequence[str], dump_index: str | None, search: str | None = None) -> str:
    """One line naming the archive entries that hold what a summary replaced ("" if none).

    The newest dumps are named one by one; the dump index (older dumps) when there is one.
    Every message a summary replaced is in one of them, so the agent can read any of it back;
    with the `search` tool bound, the line ends saying it finds any line of them.
    """
    if not dump_refs and not dump_index:
        return ""
    parts = []
    if dump_refs:
        listed = ", ".join(f'{RECALL_CALL}{ref}")' for ref in dump_refs)
        parts.append(f"the summarized messages, oldest first: {listed}")
    if dump_index:
        parts.append(f'a list of older archived messages: {RECALL_CALL}{dump_index}")')
    said = search_notes(search)[1] if search else ""
    return "[archived: " + "; ".join(parts) + said + "]"


RECALL_CALL = 'recall(ref="'
"""How every placeholder tells the agent to read an archived output back."""


def references_recall(messages: Sequence[BaseMessage]) -> bool:
    """Whether a piece of ours in `messages` tells the model to call `recall`.

    Our pieces are the ones `without_recall_calls` rewrites (`_speaks_for_us`): a call that
    binds no `recall` tool gets them rewritten, after which this is False by construction.
    What a user or a tool wrote is their text, not an instruction of ours.
    """
    return any(_speaks_for_us(m) and RECALL_CALL in text_of(m) for m in messages)


def _speaks_for_us(message: BaseMessage) -> bool:
    """A placeholder, a shortened turn or a summary of ours, or the (assembled) system prompt."""
    tag = get_tag(message)
    ours = tag.get("pruned") or tag.get("compacted") or tag.get("kind") == "summary"
    return bool(ours) or isinstance(message, SystemMessage)


_RECALL_SENTENCES = (
    # How `compacted_text`, `pruned_text` and `recall_note` name recall, and what each says
    # instead when the call binds no `recall` tool (the reference stays, for the record).
    (re.compile(r'Call recall\(ref="([^"]*)"\) to read the full output\.'), r"Archived as \1."),
    (re.compile(r'call recall\(ref="([^"]*)"\) to read it back'), r"archived as \1"),
    # Any other mention, closed or cut short (a summary that copied a shortened turn's note
    # and cut it mid-reference): the reference stays, the call goes.
    (re.compile(r'recall\(ref="([^"\n]*)(?:"\))?'), r"\1"),
)


def without_recall_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` with our pieces no longer telling the model to call `recall`.

    For a call that binds no `recall` tool (a middleware dropped it, or a model that hides its
    bindings): only the package's own pieces change (`_speaks_for_us`: placeholders, shortened
    turns, the summary, the system prompt it may be merged into), never what a user or a tool
    wrote. Afterwards `references_recall` is False.
    """
    out: list[BaseMessage] = []
    for message in messages:
        text = text_of(message)
        if RECALL_CALL not in text or not _speaks_for_us(message):
            out.append(message)
            continue
        new = _unrecall(text)
        out.append(message.model_copy(update={"content": new}))
    return out


def _unrecall(text: str) -> str:
    for pattern, replacement in _RECALL_SENTENCES:
        text = pattern.sub(replacement, text)
    return text


def pruned_text(message_id: str, entry: Mapping[str, Any], original: str | None = None) -> str:
    """The placeholder of a pruned tool output (says what it was and how to get it back).

    A placeholder names the message id for `recall`, as a compacted one does: one kind of
    reference for the agent, and a short one (the archive's own reference, a sha256, costs
    about 50 tokens; `recall` resolves the id through the archive's index).
    """
    how = (
        f'call {RECALL_CALL}{message_id}") to read it back'
        if entry.get("ref")
        else "the full output is kept in the thread's state"
    )
    tool, chars = entry.get("tool", "tool"), entry.get("chars", 0)
    return f"[pruned: output of {tool} ({chars:,} chars) removed to save context; {how}]"


def compacted_text(
    message_id: str,
    entry: Mapping[str, Any],
    original: str | None = None,
    search: str | None = None,
) -> str:
    """The deterministic text a compacted tool output shows (see `pruned_text` on the ref).

    With `lines` in the entry and the `original` text at hand, the output shows those whole
    lines (`langgraph_ctx.prompt.excerpt`) under a one-line header instead of the character
    preview; its last line names the full output and, with the `search` tool bound, the tool
    that finds one of its hidden lines.
    """
    lines = entry.get("lines")
    if lines is not None and original is not None:
        total = len(original.splitlines())
        return (
            f"[compacted tool output: {entry.get('tool', 'tool')}, {entry.get('chars', 0)} chars,"
            f" {len(lines)} of {total} lines shown; input: {str(entry.get('input', ''))[:100]}]\n"
            f"{render_excerpt(original, lines)}\n"
            f'[full output: {RECALL_CALL}{message_id}")'
            + (search_notes(search)[0] if search else "")
            + "]"
        )
    return (
        "[compacted tool output]\n"
        f"tool: {entry.get('tool', 'tool')}\n"
        f"input: {entry.get('input', '')}\n"
        f"ref: {message_id}\n"
        f"length: {entry.get('chars', 0)} chars\n"
        f"preview: {entry.get('preview', '')}\n"
        f'Call {RECALL_CALL}{message_id}") to read the full output.'
    )


def shortened_turn(message: AIMessage, message_id: str, entry: Mapping[str, Any]) -> AIMessage:
    """A model turn shown shortened: the kept lines of its text, long call arguments cut.

    The tool calls keep their ids and names (their results still answer them); a string
    argument over `max_arg` characters keeps its start and says how much was cut. The last
    line tells the agent how to read the whole turn back.
    """
    text = text_of(message)
    lines = entry.get("lines")
    shown = render_excerpt(text, lines) if lines is not None else text
    limit = int(entry.get("max_arg", 0))
    calls = []
    for call in message.tool_calls:
        args = dict(call.get("args") or {})
        if limit:
            for key, value in args.items():
                if isinstance(value, str) and len(value) > limit:
                    args[key] = f"{value[:limit]}... [{len(value) - limit:,} more chars]"
        calls.append({**call, "args": args})
    note = f'[shortened; whole turn: {RECALL_CALL}{message_id}")]'
    content = f"{shown}\n{note}" if shown.strip() else note
    kwargs = dict(message.additional_kwargs)
    kwargs[TAG_KEY] = {**get_tag(message), "compacted": True}
    if message.tool_calls:  # the OpenAI-format copy would restate the long arguments
        kwargs.pop("tool_calls", None)
    return message.model_copy(
        update={"content": content, "tool_calls": calls, "additional_kwargs": kwargs}
    )


def task_dropped_message() -> HumanMessage:
    """Stands in for a task too large to keep, so the prompt still opens with a user turn."""
    return HumanMessage(
        content="[The original task message was too large to keep in the context window; "
        "continue from the conversation below.]",
        id=TASK_DROPPED_ID,
        additional_kwargs={TAG_KEY: {"kind": "task_dropped"}},
    )


def replace_text(message: BaseMessage, text: str, **tag: Any) -> BaseMessage:
    """A copy of `message` showing `text`, tagged with `tag` (a `[tool:` fallback stays one)."""
    kwargs = dict(message.additional_kwargs)
    kwargs[TAG_KEY] = {**get_tag(message), **tag}
    if isinstance(message, ToolMessage):
        return message.model_copy(update={"content": text, "additional_kwargs": kwargs})
    if text.startswith("[") and isinstance(message, SystemMessage):
        text = "[tool:" + text[1:] if not text.startswith("[tool:") else text
    return message.model_copy(update={"content": text, "additional_kwargs": kwargs})
