"""What `langgraph-ctx view` reads: each model call's prompt by part, the edits, the originals.

A stored thread (`thread_from_db`) is read from its checkpoints: every checkpoint where an AI
message carrying a `context_cost` report first appears is one model call. Its report is the
one the pipeline recorded (the ledger's `last_report`, else the message's brief one). The
prompt is not stored as such, so it is rendered again from what was recorded: the history
of the checkpoint before the call and the ledger the call's build wrote, built with no
strategy (`ContextManager(strategies=[])`: the ledger alone says what was pruned, excerpted,
shortened, summarized, where the window starts), which gives the recorded prompt back, since
a build on its own output changes nothing. Each rendered message is then one part, of the
kind the renderer tagged it with (the summary, an excerpt, a shortened turn, a pruned
placeholder: `prompt_parts`), counted with the project's counter; what the recorded total
holds beyond them (the agent's own system prompt and tool schemas, retrieved memory: what the
thread's state does not hold) is its own part, `outside`, unless they are passed in (`demo`
passes its own).

A message file (`thread_from_file`) is replayed through the pipeline under the default
strategies (`ContextManager.build` before each AI message, as `frontier` does), with an
archive in memory: its bars are the builds of that replay, their parts read from the
prompts those builds returned.

Everything comes out as plain data for `langgraph_ctx_tools.cli.page_data.page_data`.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from langgraph_ctx.errors import InputError
from langgraph_ctx.prompt.report import check_report
from langgraph_ctx_tools.cli.threads import entry_parts, opened_thread

__all__ = ["page_policy", "prompt_parts", "thread_from_db", "thread_from_file", "write_page"]

Counter = Callable[[Sequence[BaseMessage]], int]


def prompt_parts(
    prompt: Sequence[BaseMessage], ledger: Mapping[str, Any], counter: Counter
) -> list[dict[str, Any]]:
    """Each message of a rendered prompt as `{kind, id, tokens, lines, ref}`, in prompt order.

    `lines` are the message as shown, as `entry_parts` splits it (joined by newlines it reads
    as `langgraph-ctx restore` prints a message).

    The kind is the one the renderer tagged the message with (`get_tag`): `system` (the base
    system prompt, with the priming every prompt pays), `summary` (the `<summary>` message, or
    the compression hint that carries it), `quoted` (the `<quoted_lines>` block the renderer
    wrote inside the summary), `excerpt` / `shortened` (a message tagged `compacted`: a tool
    output or a model turn), `pruned` (tagged `pruned`) and `message` (a message shown whole).
    `ref` is the archive reference the ledger recorded for the message (or the summary's newest
    dump). Tokens are the project's counter's, message by message (`counter([m]) -
    counter([])`); a block inside a message (the quoted lines, the hint) costs what the message
    costs beyond itself without that block, so the parts add up to the prompt's count.
    """
    from langgraph_ctx.messages.base import is_summary_message
    from langgraph_ctx.messages.content import get_tag

    empty = counter([])
    compacted, pruned = ledger.get("compacted") or {}, ledger.get("pruned") or {}
    hint = ledger.get("hint") or {}

    def tokens(message: BaseMessage) -> int:
        return counter([message]) - empty

    def item(kind: str, message: BaseMessage, count: int, ref: Any = None) -> dict[str, Any]:
        lines = entry_parts(message)
        return {"kind": kind, "id": message.id, "tokens": count, "lines": lines, "ref": ref}

    parts = []
    for n, message in enumerate(prompt):
        mid = message.id or ""
        tag = get_tag(message)
        count = tokens(message)
        if is_summary_message(message):
            refs = tag.get("dump_refs") or []
            newest = refs[-1] if refs else None
            bare, quotes = _without_quoted(message)
            quoted = count - tokens(bare) if quotes else 0
            parts.append(item("summary", message, count - quoted, newest))
            if quotes:
                lines = ["\n".join(quotes)]
                parts.append({**item("quoted", message, quoted, newest), "lines": lines})
        elif n == 0 and isinstance(message, SystemMessage):
            text = str(hint.get("text") or "")
            bare = _without_fragment(message, text) if text else message
            carried = count - tokens(bare)
            parts.append(item("system", message, count - carried + empty))
            if bare is not message:
                hinted = {"kind": "summary", "id": mid, "tokens": carried, "lines": [text]}
                parts.append({**hinted, "ref": hint.get("dump_ref")})
        elif tag.get("compacted"):
            kind = "shortened" if isinstance(message, AIMessage) else "excerpt"
            parts.append(item(kind, message, count, (compacted.get(mid) or {}).get("ref")))
        elif tag.get("pruned"):
            parts.append(item("pruned", message, count, (pruned.get(mid) or {}).get("ref")))
        else:
            parts.append(item("message", message, count))
    if prompt and not any(p["kind"] == "system" for p in parts):  # the priming, on its own
        parts.insert(0, {"kind": "system", "id": None, "tokens": empty, "lines": [], "ref": None})
    return parts


def _without_quoted(message: BaseMessage) -> tuple[BaseMessage, list[str]]:
    """The summary message without its `<quoted_lines>` block, and the block's lines.

    The block is the one the renderer writes at the end of the `<summary>` body
    (`split_summary_body` reads it back); a summary without one is returned as it is.
    """
    from langgraph_ctx.messages.content import text_of
    from langgraph_ctx.prompt.render import split_summary_body

    text, head, close = text_of(message), "<summary>\n", "\n</summary>"
    end = text.rfind(close)
    if not text.startswith(head) or end < len(head):
        return message, []
    said, quotes = split_summary_body(text[len(head) : end])
    if not quotes or said is None:
        return message, []
    return message.model_copy(update={"content": head + said + text[end:]}), quotes


def _without_fragment(message: BaseMessage, fragment: str) -> BaseMessage:
    """The base system message without `fragment`, one of the fragments after its base text.

    `merge_system` joins the base text and the fragments with blank lines and tags the message
    with the base text's length (`base_chars`); the fragment is looked for after it. A
    message that does not hold it is returned as it is.
    """
    from langgraph_ctx.messages.content import get_tag, text_of

    text = text_of(message)
    base = get_tag(message).get("base_chars")
    at = text.find(fragment, base if isinstance(base, int) else 0)
    if at < 0:
        return message
    stop = at + len(fragment)
    if text[at - 2 : at] == "\n\n":  # the blank line before it goes with it
        at -= 2
    elif text[stop : stop + 2] == "\n\n":
        stop += 2
    return message.model_copy(update={"content": text[:at] + text[stop:]})


def _calibrated(parts: list[dict[str, Any]], report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Parts counted by an approximate counter, scaled as the report's total was.

    The report's `tokens` is the raw estimate times its learned `calibration_ratio`; the parts
    are scaled by the same ratio (1.0 for an exact counter: unchanged).
    """
    ratio = float(report.get("calibration_ratio") or 1.0)
    if ratio == 1.0:
        return parts
    return [{**p, "tokens": round(p["tokens"] * ratio)} for p in parts]


def _counter(model: str | None) -> Counter:
    from langgraph_ctx_tools.cli.sources import model_terms

    return model_terms(model, 1)[1]  # the window is the report's; only the counter is wanted


def thread_from_db(
    db: str,
    thread: str,
    archive_dir: Path,
    *,
    model: str | None = None,
    system_prompt: str | None = None,
    tools: Sequence[Any] = (),
) -> dict[str, Any]:
    """A stored thread's model calls, full history and archive entries, as plain data.

    Args:
        db: A SQLite checkpoint file or a `postgresql://` URI (read only).
        thread: The thread id.
        archive_dir: The archive folder (entries not there: the database's own store).
        model: The model whose counter counts the parts (default: gpt-4o's, exact).
        system_prompt: The agent's system prompt, when the state does not hold it.
        tools: The agent's own tools (their schemas are counted as a part).
    """
    from langgraph_ctx.archive.archive import Archive
    from langgraph_ctx_tools.cli.checkpoints import CheckpointView, checkpoint_values
    from langgraph_ctx_tools.cli.output import masked

    counter = _counter(model)
    calls: list[dict[str, Any]] = []
    with opened_thread(db, thread, archive_dir) as (saver, backend, memory, config):
        items = list(saver.list(config))
        by_id = {item.config["configurable"]["checkpoint_id"]: item for item in items}
        base: list[BaseMessage] = [SystemMessage(system_prompt)] if system_prompt else []
        own = [memory.recall_tool(), memory.search_tool()]
        seen: set[str] = set()
        for item in reversed(items):  # oldest first
            values = checkpoint_values(item)
            parent = by_id.get(
                ((item.parent_config or {}).get("configurable") or {}).get("checkpoint_id", "")
            )
            for message in values.get("messages") or []:
                report = message.response_metadata.get("context_cost")
                if not isinstance(message, AIMessage) or not report or message.id in seen:
                    continue
                seen.add(message.id or "")
                before = checkpoint_values(parent)
                calls.append(_db_call(before, values, report, counter, base, [*tools, *own]))
            if calls:  # a step after the call (a rebuild, a removal) adds to its report
                _extend(calls[-1], (values.get("context_ledger") or {}).get("last_report"))
        full = memory.get_full_history(CheckpointView(saver), config)
        archive = Archive(backend, thread_id=thread)
        # The page names the database, never its password.
        return _thread(f"thread {thread} of {masked(db)}", calls, list(full), archive)


def _extend(call: dict[str, Any], newer: Mapping[str, Any] | None) -> None:
    """Take `newer` as the call's report when it is the same report with decisions added."""
    report = call["report"]
    if newer:
        check_report(newer, where="the ledger's last_report")
    if not newer or report.get("brief") or newer.get("tokens") != report.get("tokens"):
        return
    decisions = list(newer.get("decisions") or [])
    known = list(report.get("decisions") or [])
    if len(decisions) > len(known) and decisions[: len(known)] == known:
        call["report"] = dict(newer)


def _db_call(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    brief: Mapping[str, Any],
    counter: Counter,
    base: list[BaseMessage],
    tools: list[Any],
) -> dict[str, Any]:
    from langgraph_ctx.ledger.schema import has_archived
    from langgraph_ctx.pipeline.manager import ContextManager
    from langgraph_ctx.prompt.report import ContextBudget
    from langgraph_ctx.tokens.counter import count_tool_tokens

    ledger = dict(after.get("context_ledger") or {})
    full = ledger.get("last_report") or {}
    check_report(brief, where="the report on an AI message")
    if full:
        check_report(full, where="the ledger's last_report")
    report = dict(full) if full.get("tokens") == brief.get("tokens") else dict(brief)
    # The search tool is bound once something has left the prompt (as `ContextMiddleware`
    # binds it); excerpts and the summary then name it.
    bound = tools if has_archived(before.get("context_ledger")) else tools[:-1]
    history = [*base, *(before.get("messages") or [])]
    manager = ContextManager(
        budget=ContextBudget(context_window_tokens=max(1, int(report.get("limit") or 1))),
        strategies=[],
        token_counter=counter,
    )
    try:
        built = manager.build(history, state=ledger, tools=bound)
    except Exception:  # a prompt the ledger no longer describes: the total stays, unsplit
        return {"report": report, "parts": [], "tools": 0}
    return {
        "report": report,
        "parts": _calibrated(prompt_parts(built.messages, ledger, counter), report),
        "tools": round(
            count_tool_tokens(counter, built.tools) * float(report.get("calibration_ratio") or 1)
        ),
    }


def thread_from_file(
    path: Path, *, window: int, reserved: int = 0, model: str | None = None
) -> dict[str, Any]:
    """A message file replayed through the default pipeline, as plain data (see the module)."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_ctx.archive import Archive, StoreBackend
    from langgraph_ctx.pipeline.manager import ContextManager
    from langgraph_ctx.prompt.report import ContextBudget
    from langgraph_ctx.strategies import default_strategies
    from langgraph_ctx_tools.cli.playback import load_transcript, with_ids

    messages = with_ids(load_transcript(path))
    if not any(isinstance(m, AIMessage) for m in messages[1:]):
        msg = f"{path} has no AI message after the first message: there is no model call to show"
        raise InputError(msg)
    counter = _counter(model)
    archive = Archive(StoreBackend(InMemoryStore()), thread_id="view")
    manager = ContextManager(
        budget=ContextBudget(context_window_tokens=window, reserved_output_tokens=reserved),
        strategies=default_strategies(),
        token_counter=counter,
        archive=archive,
    )
    calls = []
    ledger: dict[str, Any] | None = None
    for i, message in enumerate(messages):
        if i == 0 or not isinstance(message, AIMessage):
            continue
        built = manager.build(messages[:i], state=ledger)
        ledger = built.state
        report = built.report.to_dict()
        parts = _calibrated(prompt_parts(built.messages, ledger, counter), report)
        calls.append({"report": report, "parts": parts, "tools": 0})
    data = _thread(f"{path} replayed in a {window:,}-token window", calls, messages, archive)
    return {**data, "window": window}


def _thread(
    title: str, calls: list[dict[str, Any]], history: list[BaseMessage], archive: Any
) -> dict[str, Any]:
    """The plain data `page_data` takes: calls, the full history, the restored entries."""
    from langgraph_ctx.archive.recall import entry_text
    from langgraph_ctx.errors import ArchiveError

    messages = []
    for message in history:
        try:
            ref = archive.lookup(message.id or "")
        except ArchiveError:
            ref = None
        kind = message.type
        name = getattr(message, "name", None) or ""
        messages.append({"id": message.id, "type": kind, "name": name, "ref": ref})
        messages[-1]["text"] = entry_text(message)
    refs = {m["ref"] for m in messages if m["ref"]}
    refs |= {p["ref"] for call in calls for p in call["parts"] if p.get("ref")}
    entries: dict[str, list[str] | None] = {}
    for ref in sorted(refs):
        try:
            entries[ref] = entry_parts(archive.read(ref))
        except ArchiveError:
            entries[ref] = None  # named as unreadable on the page
    return {"title": title, "calls": calls, "messages": messages, "entries": entries}


def write_page(data: Mapping[str, Any], out: Path) -> Path:
    """Write the page: the template of `page.html` with `data` inside it.

    The JSON goes in gzip-compressed and base64-encoded (the page inflates it with the
    browser's own `DecompressionStream`): a thread's text is most of the page, and text
    compresses several times over. Base64 cannot close the element it sits in, and the page's
    policy lets only its own script and style run (`page_policy`).
    """
    import gzip
    import json
    from importlib.resources import files

    template = files("langgraph_ctx_tools.cli").joinpath("page.html").read_text("utf-8")
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # an inf or NaN from a handed report: JSON has no such number
        text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"))
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    page = page_policy(template).replace("/*DATA*/", packed.decode("ascii"), 1)
    out.write_text(page, encoding="utf-8")
    return out


def _finite(value: Any) -> Any:
    """`value` with each inf or NaN float as its name (`"inf"`, `"nan"`), so that it stays JSON.

    The browser's `JSON.parse` refuses Python's `NaN` and `Infinity`, which left the page
    blank; as a string the page names the value in its call's heading and draws nothing with it.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


_INLINE = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL) for tag in ("script", "style")}


def page_policy(template: str) -> str:
    """The page's template with its Content-Security-Policy completed: hashes, no 'unsafe-inline'.

    The policy lets the page run its one inline script and apply its one inline style sheet,
    named by their sha256 (computed here from the template, so an edit of either cannot be
    left out of date), and nothing else: no other script or style, no request, no inline event
    handler, and no HTML parsed from a string (Trusted Types required, none allowed). The
    embedded data is a `type="application/octet-stream"` element, which never runs.
    """
    import hashlib

    for tag, element in _INLINE.items():
        bodies = element.findall(template)
        if len(bodies) != 1:  # the package's own template: a broken build, not a user's input
            msg = f"page.html must hold one plain <{tag}> element, found {len(bodies)}"
            raise RuntimeError(msg)
        digest = base64.b64encode(hashlib.sha256(bodies[0].encode("utf-8")).digest())
        template = template.replace(f"/*{tag.upper()}-HASH*/", f"'sha256-{digest.decode()}'", 1)
    return template
