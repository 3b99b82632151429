"""Hypothesis strategies for message histories, shared by the property tests.

- `histories()`: valid agent histories (a system prompt, user turns, AI messages making 0..3
  parallel tool calls each answered by `ToolMessage`s, some errors, some long outputs, user
  content as strings or `[{"type": "text", ...}]` blocks). Every message has a unique id.
- `histories(multimodal=True)` / `rich_histories()`: user and tool content may also be lists
  of text blocks, `image_url` blocks (URLs and base64 data URLs) and base64 `image` blocks.
- `broken_histories()`: the same, damaged at least once (orphan tool results, unanswered
  calls, a user message wedged into a tool batch).
- `prior_builds()`: a history that already went through a previous build (`Prior`): with an
  existing `<summary>` system message (with or without the ledger in state), with compacted
  tool results recorded in the ledger and archive, or with the previous prompt itself (its
  placeholders) fed back as history; the archive that build wrote comes with it.
- `cases()` / `rich_cases()`: a history (plain, or a `prior_builds()` one) with a drawn
  pipeline configuration (`Setup`: counter, window, strategies, tools, memory).
- `runs()`: a whole agent run (`Run`: user turns, parallel tool calls, big and error results,
  the graph kind, the driver and the memory's options) for the graph property test.

Text stays within what OpenAI's tokenizer accepts as ordinary text (no surrogates, no
special-token spellings), so exact counts can be compared with
`ChatOpenAI.get_num_tokens_from_messages`.
"""

from __future__ import annotations

import base64
import collections
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx.tokens import TiktokenCounter

TIKTOKEN = TiktokenCounter("gpt-4o")
"""The shared (cached) exact counter of the drawn builds."""

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


def _not_blank(text: str) -> str:
    # Providers refuse whitespace-only text blocks; `messy_histories` draws those on purpose.
    return text if not text or text.strip() else text + "."


def texts(*, min_size: int = 0, max_size: int = 80) -> st.SearchStrategy[str]:
    """Short free text in any script: empty or with a non-space character (never spelling a
    special token such as `<|endoftext|>`)."""
    text = st.text(_ALPHABET, min_size=min_size, max_size=max_size)
    return text.map(_no_special_tokens).map(_not_blank)


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


def _user_content(draw: st.DrawFn, multimodal: bool = False) -> str | list[str | dict[str, Any]]:
    if multimodal and draw(st.integers(0, 2)) == 0:
        return draw(multimodal_content())
    if draw(st.booleans()):
        return draw(texts(min_size=1))
    blocks = draw(st.lists(texts(min_size=1), min_size=1, max_size=3))
    return [{"type": "text", "text": b} for b in blocks]


_BASE64 = st.binary(min_size=1, max_size=48).map(lambda b: base64.b64encode(b).decode())
_MIME = st.sampled_from(["image/png", "image/jpeg", "image/webp"])


@st.composite
def image_blocks(draw: st.DrawFn) -> dict[str, Any]:
    """One image content block, in one of the shapes LangChain accepts."""
    kind = draw(st.sampled_from(["url", "data_url", "base64", "source_type"]))
    if kind == "url":
        name = draw(st.text("abcdefghij0123456789", min_size=1, max_size=10))
        return {"type": "image_url", "image_url": {"url": f"https://example.com/{name}.png"}}
    data, mime = draw(_BASE64), draw(_MIME)
    if kind == "data_url":
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    if kind == "base64":
        return {"type": "image", "base64": data, "mime_type": mime}
    return {"type": "image", "source_type": "base64", "data": data, "mime_type": mime}


@st.composite
def multimodal_content(draw: st.DrawFn, *, long: bool = False) -> list[str | dict[str, Any]]:
    """A content list: text blocks and image blocks in any order (sometimes images only)."""
    blocks: list[str | dict[str, Any]] = draw(st.lists(image_blocks(), min_size=1, max_size=2))
    if long or draw(st.integers(0, 4)):
        text = draw(long_texts()) if long else draw(texts(min_size=1, max_size=120))
        blocks.insert(0, {"type": "text", "text": text})
    if draw(st.booleans()):
        blocks.append({"type": "text", "text": draw(texts(min_size=1, max_size=40))})
    return draw(st.permutations(blocks))


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    min_turns: int = 1,
    max_turns: int = 5,
    max_steps: int = 3,
    max_parallel: int = 3,
    system: bool = True,
    multimodal: bool = False,
) -> list[BaseMessage]:
    """A valid agent history; see the module docstring.

    Args:
        min_turns: Fewest user turns.
        max_turns: Most user turns.
        max_steps: Most AI messages per turn.
        max_parallel: Most tool calls per AI message.
        system: Whether the history opens with a system message.
        multimodal: User and tool content may also be lists of text and image blocks.
    """
    counter = itertools.count()

    def new_id(prefix: str) -> str:
        return f"{prefix}-{next(counter)}"

    messages: list[BaseMessage] = []
    if system:
        messages.append(SystemMessage(draw(texts(min_size=1, max_size=200)), id=new_id("sys")))
    for _ in range(draw(st.integers(min_turns, max_turns))):
        name = draw(st.sampled_from([None, None, "alice", "bob_2"]))
        content = _user_content(draw, multimodal)
        messages.append(HumanMessage(content, name=name, id=new_id("human")))
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
                out: str | list[str | dict[str, Any]]
                if multimodal and kind != "error" and draw(st.integers(0, 3)) == 0:
                    out = draw(multimodal_content(long=kind == "long"))
                elif kind == "long":
                    out = draw(long_texts())
                else:
                    out = draw(texts(max_size=200))
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


def rich_histories(**options: Any) -> st.SearchStrategy[list[BaseMessage]]:
    """`histories` with multimodal content, several user turns and parallel tool calls."""
    defaults: dict[str, Any] = {"min_turns": 2, "max_turns": 5, "multimodal": True}
    return histories(**{**defaults, **options})


MESSES = (
    "system_inside",
    "empty_user",
    "greeting_first",
    "broken_pairing",
    "invalid_call",
    "idless_call",
    "blank_user",
    "repeated_call_id",
    "tool_use_block",
)
"""What `messy_histories` can do to a history, besides breaking the tool-call pairing."""

BLANK_CONTENTS: tuple[Any, ...] = (
    [{"type": "text", "text": ""}],
    "  \n\t",
    [{"type": "text", "text": " "}, "\n"],
)
"""User content a provider refuses: empty text blocks, whitespace only."""


def _call_exchange(draw: st.DrawFn, mess: str, n: int) -> list[BaseMessage]:
    """An AI message whose calls the providers cannot pair as they stand, and maybe answers.

    `invalid_call`: arguments that were not valid JSON (`invalid_tool_calls`, never answered
    by `ToolNode`); `idless_call`: a call with `id=None`, its answer naming `""`;
    `repeated_call_id`: two calls with one id in the batch; `tool_use_block`: a `tool_use`
    content block with no tool call.
    """
    tag = f"{mess}-{n}"
    answers = draw(st.integers(0, 2))
    if mess == "invalid_call":
        bad = {"type": "invalid_tool_call", "id": f"badcall-{n}", "name": "bash"}
        bad |= {"args": '{"cmd": "ls', "error": "arguments are not valid JSON"}
        return [AIMessage("", invalid_tool_calls=[bad], id=tag)]
    if mess == "tool_use_block":
        use = {"type": "tool_use", "id": f"toolu_{n}", "name": "bash", "input": {"cmd": "ls"}}
        ai = AIMessage([{"type": "text", "text": "Let me look."}, use], id=tag)
        call_id = f"toolu_{n}"
        answers = min(answers, 1)
    else:
        call_id = "" if mess == "idless_call" else f"dupcall-{n}"
        call = {"name": "read_file", "args": {"path": "a.py"}, "id": call_id or None}
        ai = AIMessage("", tool_calls=[{**call, "type": "tool_call"}] * 2, id=tag)
    results = [
        ToolMessage(f"out {k}", tool_call_id=call_id, name="read_file", id=f"{tag}-r{k}")
        for k in range(answers)
    ]
    return [ai, *results]


@st.composite
def messy_histories(draw: st.DrawFn) -> tuple[list[BaseMessage], list[str]]:
    """A rich history with what providers refuse where it stands, and what was done to it.

    One to three of: a system message inside the conversation (a `[tool: ...]` fallback or a
    note, anywhere, even inside a tool batch), an empty user message, a blank one (empty text
    blocks, whitespace), a greeting from the model before any user message, the damage of
    `broken_histories` (orphan results, unanswered calls), and the call shapes of
    `_call_exchange` (invalid calls, id-less calls, repeated call ids, `tool_use` blocks).
    """
    messages = list(draw(rich_histories(max_turns=4)))
    done = draw(st.lists(st.sampled_from(MESSES), min_size=1, max_size=3))
    for n, mess in enumerate(done):
        lead = sum(1 for _ in itertools.takewhile(lambda m: isinstance(m, SystemMessage), messages))
        at = draw(st.integers(lead, len(messages)))
        if mess == "system_inside":
            text = draw(st.sampled_from([f"[tool: bash] exit {n}", "Note: be brief.", ""]))
            messages.insert(max(at, lead + 1), SystemMessage(text, id=f"inside-{n}"))
        elif mess == "empty_user":
            messages.insert(at, HumanMessage(draw(st.sampled_from(["", []])), id=f"empty-{n}"))
        elif mess == "greeting_first":
            messages.insert(lead, AIMessage("Hello! How can I help?", id=f"greeting-{n}"))
        elif mess == "blank_user":
            messages.insert(
                at, HumanMessage(draw(st.sampled_from(BLANK_CONTENTS)), id=f"blank-{n}")
            )
        elif mess != "broken_pairing":
            messages[at:at] = _call_exchange(draw, mess, n)
        else:
            _insert_stray(draw, messages, f"mess-{n}")
            results = [
                i
                for i, m in enumerate(messages)
                if isinstance(m, ToolMessage) and not str(m.id).startswith("stray-")
            ]
            if results and draw(st.booleans()):
                del messages[draw(st.sampled_from(results))]  # its call goes unanswered
    return messages, done


# --- histories that went through a previous build ------------------------------------------

PRIOR_KINDS = ("summary_in_state", "compacted", "own_output", "summary_without_ledger", "fresh")
# (Hypothesis favours the first choices: the kinds that need a previous build come first.)
"""What `prior_builds` can hand over:

- `summary_in_state`: the previous build's `<summary>` system message leads the history and its
  ledger is in state; sometimes the summarized messages were also removed from the state
  (`remove_summarized`, after their insurance dumps);
- `summary_without_ledger`: the same summary message, but no ledger (a state written by hand or
  by another version): it is adopted as the running summary;
- `compacted`: the original history with the previous build's ledger (compacted and pruned tool
  results, the window, maybe a summary) and its archive;
- `own_output`: the previous prompt itself (system prompt, summary, placeholders) followed by
  the messages that came after it, with its ledger;
- `fresh`: no previous build (the history alone, no ledger).
"""

THREAD = "t"
"""The thread every `Prior` archive belongs to."""


@dataclass
class Prior:
    """A history as the graph would hold it after an earlier build, and that build's archive."""

    kind: str
    """One of `PRIOR_KINDS` (what actually happened: a summary kind without a summary to show
    becomes `compacted`, and a previous build that overflowed becomes `fresh`)."""
    messages: list[BaseMessage]
    """The history to build on now."""
    state: dict[str, Any] | None
    """The ledger in state (None: none)."""
    store: Any
    """The `InMemoryStore` holding the previous build's archive (thread `THREAD`)."""
    originals: list[BaseMessage]
    """Every message the thread ever held, in order (no summary message, no placeholder)."""
    removed: list[str] = field(default_factory=list)
    """Ids of summarized messages removed from the state (they live in the archive)."""
    window: int = 0
    """The previous build's window (0: no previous build)."""

    def archive(self) -> Any:
        """The thread's archive over `store`."""
        from langgraph_ctx.archive import Archive

        return Archive(self.store, thread_id=THREAD)


@st.composite
def prior_builds(draw: st.DrawFn, *, max_turns: int = 4) -> Prior:
    """A rich history that already went through a previous build; see `PRIOR_KINDS`."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_ctx.archive import Archive
    from langgraph_ctx.errors import ContextWindowExceededError
    from langgraph_ctx.graph.memory import ContextMemory
    from langgraph_ctx.messages.base import is_summary_message
    from langgraph_ctx.pipeline import ContextManager
    from langgraph_ctx.prompt.report import ContextBudget
    from langgraph_ctx.strategies import Compaction
    from tests.conftest import make_strategies

    history = draw(rich_histories(max_turns=max_turns))
    kind = draw(st.sampled_from(PRIOR_KINDS))
    store = InMemoryStore()
    if kind == "fresh":
        return Prior("fresh", list(history), None, store, list(history))
    # The previous call saw the history up to a user message (or all of it).
    users = [i + 1 for i, m in enumerate(history) if isinstance(m, HumanMessage)]
    cut = draw(st.sampled_from([*users[1:], len(history)]))
    seen = history[:cut]
    counter = TIKTOKEN
    summarizing = kind.startswith("summary") or draw(st.booleans())
    # A summary needs the window to shrink: summary kinds get the smaller windows.
    share = draw(st.floats(0.2, 0.6) if summarizing else st.floats(0.25, 0.9))
    window = max(300, int(counter(seen) * share))
    keep_last, protect_turns = draw(st.integers(0, 2)), draw(st.integers(0, 3))
    # The summary message is taken from a separate placement; an output fed back may carry it
    # inside the system prompt, with retrieved memory merged there too.
    merged = kind == "own_output" and draw(st.booleans())
    apart = (
        "separate" if kind == "own_output" else draw(st.sampled_from(["after_task", "separate"]))
    )
    memory = (
        ["The user prefers tabs over spaces."]
        if kind == "own_output" and draw(st.booleans())
        else []
    )
    for _ in range(4):  # a window too small for the newest block: try a larger one
        manager = ContextManager(
            budget=ContextBudget(context_window_tokens=window),
            token_counter=counter,
            strategies=make_strategies(
                summarize=summarizing,
                protect_turns=protect_turns,
                compaction=Compaction(min_chars=300, keep_last=keep_last),
            ),
            archive=Archive(store, thread_id=THREAD),
            summary_placement="merged" if merged else apart,
        )
        try:
            result = manager.build(seen, memory=memory)
            break
        except ContextWindowExceededError:
            window = window * 3 // 2
    else:
        return Prior("fresh", list(history), None, store, list(history))
    later = list(history[cut:])
    summary = next((m for m in result.messages if is_summary_message(m)), None)
    if kind.startswith("summary") and summary is None:
        kind = "compacted"
    if kind == "own_output":
        return Prior(
            kind, [*result.messages, *later], result.state, store, list(history), [], window
        )
    if kind == "compacted":
        return Prior(kind, list(history), result.state, store, list(history), [], window)
    assert summary is not None
    state: dict[str, Any] | None = result.state
    live = list(history)
    removed: list[str] = []
    if kind == "summary_in_state" and draw(st.booleans()):
        # remove_summarized: the library's own removal step (a span dump, then removal by id).
        from langgraph_ctx._effects import run_plan

        memory = ContextMemory(context_window_tokens=window, archive=store, remove_summarized=True)
        removals, state = run_plan(
            memory.plan_removals(seen, result, {"configurable": {"thread_id": THREAD}})
        )
        removed = [r.id or "" for r in removals]
        live = [m for m in live if m.id not in set(removed)]
    if kind == "summary_without_ledger":
        state = None
    at = next((i for i, m in enumerate(live) if not isinstance(m, SystemMessage)), len(live))
    live.insert(at, summary)
    return Prior(kind, live, state, store, list(history), removed, window)


# --- drawn pipeline setups ----------------------------------------------------------------------


def _chars_counter(messages: Sequence[BaseMessage]) -> int:
    """A crude additive counter: 4 per message, a token per 4 characters, 8 per tool call."""
    from langgraph_ctx.messages import text_of

    total = 3
    for m in messages:
        total += 4 + len(text_of(m)) // 4 + 8 * len(getattr(m, "tool_calls", None) or ())
    return total


def _len_counter(messages: Sequence[BaseMessage]) -> int:
    return len(messages)


COUNTERS: dict[str, Callable[[Sequence[BaseMessage]], int]] = {
    "tiktoken": TIKTOKEN,
    "chars": _chars_counter,
    "len": _len_counter,
}
"""The token counters a `Setup` can draw, by name."""
WINDOWS = {"tiktoken": (300, 5000), "chars": (40, 1500), "len": (2, 40)}
"""The absolute windows drawn for each counter (lowest, highest)."""

MEMORY = ("The user prefers tabs over spaces.", "Deploys go through staging first.", "on call")
"""Retrieved-memory items a `Setup` can pass to its builds."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File path"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"],
            },
        },
    },
]
"""Tool schemas (OpenAI format) a `Setup` can offer its builds."""


@dataclass(frozen=True)
class Setup:
    """One drawn pipeline configuration: `manager()` makes it, `build()` runs a history."""

    counter: str
    """A key of `COUNTERS`."""
    window: int
    reserved: int
    auto_compact: bool
    compaction: bool
    placement: str
    tools: bool
    memory: tuple[str, ...]
    protect_turns: int
    prune_errors: bool
    dynamic: bool = False
    """Also `DynamicSummarization` (summarize the oldest turns past two turns)."""
    injections: tuple[str, ...] = ()
    """Fixed system-prompt fragments (merged into the system prompt like memory)."""
    n_tools: int = len(TOOLS)
    """How many of `TOOLS` a build offers (when `tools`)."""

    @property
    def limit(self) -> int:
        return self.window - self.reserved

    def manager(self, store: Any = None) -> Any:
        """A `ContextManager` with this configuration.

        `store`: every build archives into it (thread `THREAD`); None: a fresh in-memory
        archive, and only when compaction or auto-compaction needs one.
        """
        from langgraph.store.memory import InMemoryStore

        from langgraph_ctx.archive import Archive, StoreBackend
        from langgraph_ctx.pipeline import ContextManager
        from langgraph_ctx.prompt.report import ContextBudget
        from langgraph_ctx.strategies import Compaction, DynamicSummarization
        from tests.conftest import make_strategies

        strategies = make_strategies(
            summarize=self.auto_compact,
            protect_turns=self.protect_turns,
            prune_errors=self.prune_errors,
            compaction=Compaction(min_chars=300, keep_last=1) if self.compaction else None,
            first=[DynamicSummarization(threshold_turns=2, turns=1)] if self.dynamic else [],
        )
        archive = None
        if store is not None:
            archive = Archive(store, thread_id=THREAD)
        elif self.compaction or self.auto_compact:
            archive = Archive(StoreBackend(InMemoryStore()), thread_id=THREAD)
        return ContextManager(
            injections=list(self.injections),
            budget=ContextBudget(
                context_window_tokens=self.window, reserved_output_tokens=self.reserved
            ),
            token_counter=COUNTERS[self.counter],
            strategies=strategies,
            archive=archive,
            summary_placement=self.placement,
        )

    def build(self, cm: Any, messages: Sequence[BaseMessage], state: Any = None) -> Any:
        """`cm.build` with this configuration's tools and memory."""
        return cm.build(
            messages,
            tools=TOOLS[: self.n_tools] if self.tools else None,
            memory=list(self.memory),
            state=state,
        )


def _draw_setup(
    draw: st.DrawFn, counter: str, size: Callable[[], int], *, rich: bool = False
) -> Setup:
    """A `Setup` whose window is absolute or relative to the history's `size()`; `rich` also
    draws dynamic summarization and injections, and offers one tool."""
    low, high = WINDOWS[counter]
    if draw(st.booleans()):
        window = draw(st.integers(low, high))
    else:  # around the history's own size, so most builds have to edit something
        window = max(low, int(size() * draw(st.floats(0.2, 1.1))))
    setup = Setup(
        counter=counter,
        window=window,
        reserved=draw(st.sampled_from([0, 0, window // 10])),
        auto_compact=draw(st.booleans()),
        compaction=draw(st.booleans()),
        placement=draw(st.sampled_from(["after_task", "separate", "merged"])),
        tools=draw(st.booleans()),
        memory=tuple(draw(st.lists(st.sampled_from(MEMORY), max_size=2))),
        protect_turns=draw(st.integers(0, 3)),
        prune_errors=draw(st.booleans()),
    )
    if not rich:
        return setup
    return replace(
        setup,
        dynamic=draw(st.integers(0, 3)) == 0,
        injections=tuple(draw(st.lists(texts(min_size=1, max_size=60), max_size=1))),
        n_tools=1,
    )


@st.composite
def cases(
    draw: st.DrawFn, /, counter: str | None = None, **history_options: Any
) -> tuple[list[BaseMessage], Setup]:
    """A history (`histories(**history_options)`) and a `Setup` for it, with any counter."""
    history = draw(histories(**history_options))
    name = counter or draw(st.sampled_from(sorted(COUNTERS)))
    return history, _draw_setup(draw, name, lambda: COUNTERS[name](history))


@st.composite
def rich_cases(draw: st.DrawFn, *, fresh: bool = False) -> tuple[Prior, Setup]:
    """A `prior_builds()` history (or, `fresh`, a rich one with no previous build) and a
    tiktoken `Setup` for it that also may summarize dynamically and inject fragments."""
    if fresh:
        from langgraph.store.memory import InMemoryStore

        history = draw(rich_histories(max_turns=5))
        prior = Prior("fresh", history, None, InMemoryStore(), list(history))
    else:
        prior = draw(prior_builds())
    return prior, _draw_setup(draw, "tiktoken", lambda: TIKTOKEN(prior.messages), rich=True)


# --- drawn agent runs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool call of a drawn run and the result it gets."""

    kind: str  # "short", "big" or "error"
    content: str | list[Any]


@dataclass(frozen=True)
class Turn:
    """One user turn of a drawn run."""

    user: str | list[Any]
    steps: tuple[tuple[Call, ...], ...]
    """Each step is one AI message making these calls in parallel."""
    answer: str
    recall: bool = False
    """Before answering, the model calls `recall` with the first reference in its prompt."""


@dataclass(frozen=True)
class Run:
    """A drawn agent run: the graph, the driver, the memory's options and the turns."""

    graph: str  # "state_graph" or "create_agent"
    mode: str  # "sync" or "async"
    placement: str
    window: int
    auto_compact: bool
    remove_summarized: bool
    usage: bool
    """The model reports its prompt tokens, so the after-turn hint rebuild can fire."""
    hint_threshold: float
    keep_last: int
    turns: tuple[Turn, ...]


_BIG = st.integers(1_000, 3_000).map(
    lambda n: "".join(
        f"{i:5d} | total={i * 7} status=ok path=src/app/m{i % 9}.py ✓\n" for i in range(n // 50)
    )
)


@st.composite
def calls(draw: st.DrawFn) -> Call:
    """A tool call: a short, big, multimodal or error result."""
    kind = draw(st.sampled_from(["short", "short", "big", "error"]))
    content: str | list[Any]
    if kind == "error":
        content = "Error: " + draw(texts(min_size=1, max_size=80))
    elif kind == "big":
        content = draw(_BIG)
    elif draw(st.integers(0, 3)) == 0:
        content = draw(multimodal_content())
    else:
        content = draw(texts(min_size=1, max_size=150))
    return Call(kind, content)


@st.composite
def runs(draw: st.DrawFn) -> Run:
    """An agent run of 1-4 turns, each with up to 3 steps of up to 3 parallel calls."""
    turns = []
    for _ in range(draw(st.integers(1, 4))):
        user = draw(multimodal_content()) if draw(st.booleans()) else draw(texts(min_size=1))
        steps = draw(
            st.lists(st.lists(calls(), min_size=1, max_size=3).map(tuple), max_size=3).map(tuple)
        )
        answer = draw(texts(min_size=1, max_size=60))
        turns.append(Turn(user, steps, answer, recall=draw(st.integers(0, 3)) == 0))
    return Run(
        graph=draw(st.sampled_from(["state_graph", "create_agent"])),
        mode=draw(st.sampled_from(["sync", "async"])),
        placement=draw(st.sampled_from(["after_task", "separate", "merged"])),
        window=draw(st.integers(1_200, 6_000)),
        auto_compact=draw(st.booleans()),
        remove_summarized=draw(st.booleans()),
        usage=draw(st.booleans()),
        hint_threshold=draw(st.sampled_from([0.3, 0.5, 0.8])),
        keep_last=draw(st.integers(0, 1)),
        turns=tuple(turns),
    )


# --- in-place edits ------------------------------------------------------------------------

EDIT_KINDS = ("grow_text", "append_block", "edit_args")
"""How an agent edits a message it already holds: content reassigned to a longer text, a
block appended to a content list, a tool call's arguments changed, all on the same object."""


def in_place_edits() -> st.SearchStrategy[list[tuple[int, str, int]]]:
    """Edits to apply with `apply_in_place_edits`: (message index mod the history length,
    kind, words added)."""
    return st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(EDIT_KINDS), st.integers(1, 1_500)),
        min_size=1,
        max_size=4,
    )


def apply_in_place_edits(messages: Sequence[BaseMessage], edits: list[tuple[int, str, int]]) -> int:
    """Edit `messages` in place (the same objects, as an agent's own code would); returns how
    many edits applied (an edit that does not fit its message is left out)."""
    applied = 0
    for index, kind, words in edits:
        message = messages[index % len(messages)]
        more = " ".join(["more"] * words)
        if kind == "grow_text" and isinstance(message.content, str):
            message.content = f"{message.content} {more}"
        elif kind == "append_block" and isinstance(message.content, list):
            message.content.append({"type": "text", "text": more})
        elif kind == "edit_args" and isinstance(message, AIMessage) and message.tool_calls:
            message.tool_calls[0]["args"]["note"] = more
        else:
            continue
        applied += 1
    return applied
