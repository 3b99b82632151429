"""Hypothesis strategies for message histories, shared by the property tests.

- `histories()`: valid agent histories (a system prompt, user turns, AI messages making 0..3
  parallel tool calls each answered by `ToolMessage`s, some errors, some long outputs, user
  content as strings or `[{"type": "text", ...}]` blocks). Every message has a unique id.
- `broken_histories()`: the same, damaged at least once (orphan tool results, unanswered
  calls, a user message wedged into a tool batch).

Text stays within what OpenAI's tokenizer accepts as ordinary text (no surrogates, no
special-token spellings), so exact counts can be compared with
`ChatOpenAI.get_num_tokens_from_messages`.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

_TOOLS = ("read_file", "grep", "run_tests", "search_flights", "get_user_details", "bash")

# Printable text in any script, no surrogates or control characters except newline and tab.
_ALPHABET = st.characters(
    blacklist_categories=("Cs", "Cc", "Co", "Cn"),
    whitelist_characters="\n\t",
)
_FILLER = (
    "def handler(event, context):\n",
    "    return {'statusCode': 200, 'body': json.dumps(result)}\n",
    "ERROR tests/test_api.py::test_login - AssertionError: 401 != 200\n",
    "drwxr-xr-x  5 dev dev  4096 Mar  3 10:21 src\n",
    "Flight HAT123 from SFO to JFK departs 2024-05-16T08:00 (economy: 12 seats)\n",
    "Überprüfung fehlgeschlagen: Datei nicht gefunden — ファイルが見つかりません 🚫\n",
)


def _no_special_tokens(text: str) -> str:
    # tiktoken (and so ChatOpenAI) refuses text spelling a special token like `<|endoftext|>`.
    return text.replace("<|", "<")


def texts(*, min_size: int = 0, max_size: int = 80) -> st.SearchStrategy[str]:
    """Short free text in any script (never spelling a special token such as `<|endoftext|>`)."""
    return st.text(_ALPHABET, min_size=min_size, max_size=max_size).map(_no_special_tokens)


@st.composite
def long_texts(draw: st.DrawFn, *, max_size: int = 4000) -> str:
    """A tool-output-like text of up to `max_size` characters (cheap to generate)."""
    head = draw(texts(max_size=40))
    size = draw(st.integers(200, max_size))
    offset = draw(st.integers(0, len(_FILLER) - 1))
    parts, total = [head], len(head)
    for i in itertools.count():
        if total >= size:
            break
        line = f"{i:4d} {_FILLER[(offset + i) % len(_FILLER)]}"
        parts.append(line)
        total += len(line)
    return "".join(parts)[:size]


_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), texts(max_size=30))


def _args() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(
        st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
        st.one_of(_JSON_LEAF, st.lists(_JSON_LEAF, max_size=3)),
        max_size=4,
    )


def _user_content(draw: st.DrawFn) -> str | list[str | dict[str, Any]]:
    if draw(st.booleans()):
        return draw(texts(min_size=1))
    blocks = draw(st.lists(texts(min_size=1), min_size=1, max_size=3))
    return [{"type": "text", "text": b} for b in blocks]


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    min_turns: int = 1,
    max_turns: int = 5,
    max_steps: int = 3,
    max_parallel: int = 3,
    system: bool = True,
) -> list[BaseMessage]:
    """A valid agent history; see the module docstring.

    Args:
        min_turns: Fewest user turns.
        max_turns: Most user turns.
        max_steps: Most AI messages per turn.
        max_parallel: Most tool calls per AI message.
        system: Whether the history opens with a system message.
    """
    counter = itertools.count()

    def new_id(prefix: str) -> str:
        return f"{prefix}-{next(counter)}"

    messages: list[BaseMessage] = []
    if system:
        messages.append(SystemMessage(draw(texts(min_size=1, max_size=200)), id=new_id("sys")))
    for _ in range(draw(st.integers(min_turns, max_turns))):
        name = draw(st.sampled_from([None, None, "alice", "bob_2"]))
        messages.append(HumanMessage(_user_content(draw), name=name, id=new_id("human")))
        for _ in range(draw(st.integers(0, max_steps))):
            n_calls = draw(st.integers(0, max_parallel))
            calls = [
                {
                    "name": draw(st.sampled_from(_TOOLS)),
                    "args": draw(_args()),
                    "id": new_id("call"),
                    "type": "tool_call",
                }
                for _ in range(n_calls)
            ]
            content = draw(texts(max_size=120)) if calls else draw(texts(min_size=1))
            messages.append(AIMessage(content, tool_calls=calls, id=new_id("ai")))
            for call in calls:
                kind = draw(st.sampled_from(["short", "short", "long", "error"]))
                out = draw(long_texts()) if kind == "long" else draw(texts(max_size=200))
                messages.append(
                    ToolMessage(
                        out,
                        tool_call_id=call["id"],
                        name=call["name"],
                        status="error" if kind == "error" else "success",
                        id=new_id("tool"),
                    )
                )
    return messages


def expected_defects(messages: list[BaseMessage]) -> collections.Counter[tuple[str, str]]:
    """An independent oracle for the pairing rules, to check `validate_messages` against.

    Returns `("orphan_tool_result", tool message id)` and `("unanswered_tool_call", AI message
    id)` entries (an AI message counts once per unanswered call). A tool result belongs to the
    AI message right before its contiguous run of results; anything else ends that run.
    """
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    owner: AIMessage | None = None
    pending: set[str] = set()
    calls: set[str] = set()

    def close() -> None:
        nonlocal owner
        if owner is not None:
            found.update([("unanswered_tool_call", owner.id or "")] * len(pending))
        owner = None

    for msg in messages:
        if isinstance(msg, ToolMessage):
            if owner is not None and msg.tool_call_id in calls:
                pending.discard(msg.tool_call_id)
                continue
            close()
            found[("orphan_tool_result", msg.id or "")] += 1
            continue
        close()
        if isinstance(msg, AIMessage) and msg.tool_calls:
            owner = msg
            calls = {str(tc["id"]) for tc in msg.tool_calls}
            pending = set(calls)
    close()
    return found


BREAKAGES = ("drop_result", "drop_call", "stray_result", "wedge_user")
"""The damage `broken_histories` can do."""


@st.composite
def broken_histories(draw: st.DrawFn) -> list[BaseMessage]:
    """A history with at least one orphan tool result or unanswered tool call.

    Damage, one to three times: drop a tool result (its call is left unanswered), drop an AI
    message with calls (its results become orphans), insert a stray result for an unknown
    call, or wedge a user message into a tool batch (later results become orphans, earlier
    calls unanswered). If the damage happened to cancel out, a stray result is added.
    """
    messages = list(draw(histories()))
    for n in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(BREAKAGES))
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        callers = [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls]
        if kind == "drop_result" and results:
            del messages[draw(st.sampled_from(results))]
        elif kind == "drop_call" and callers:
            del messages[draw(st.sampled_from(callers))]
        elif kind == "wedge_user" and results:
            at = draw(st.sampled_from(results))
            messages.insert(at, HumanMessage("wait, stop", id=f"wedge-{n}"))
        else:  # stray_result, or the chosen damage had nothing to act on
            _insert_stray(draw, messages, f"{n}")
    if not expected_defects(messages):
        _insert_stray(draw, messages, "last")
    return messages


def _insert_stray(draw: st.DrawFn, messages: list[BaseMessage], tag: str) -> None:
    at = draw(st.integers(1 if messages else 0, len(messages)))
    stray = ToolMessage("stray output", tool_call_id=f"ghost-{tag}", name="bash", id=f"stray-{tag}")
    messages.insert(at, stray)
