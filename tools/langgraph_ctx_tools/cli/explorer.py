"""The demo's offline agent brain: a scripted explorer that decides from the prompt it receives.

`ScriptedExplorer` is a chat model (it binds tools and answers with tool calls or text) that
reads only the messages it is sent, like a real model: the latest user request, the tool calls
and outputs still in view, and the running summary or compression hint. From them it picks the
next step:

* "map ..." requests: list the root, list its folders, read the largest files (first chunk);
* "find ..." requests: search for the request's key words, then search for the definitions of
  the names it saw and read around them;
* anything else: answer from what is in view.

Like a real agent's reasoning, each step that follows a tool output first restates what that
output showed (its first line and up to 12 of its lines, definitions first), then says what
it does next. A step already taken (a tool call in view, or a `Called name({...})` line of the
summary) is not taken again. An output shown as an excerpt is read for the lines it shows; one
the pipeline pruned, or a compacted folder listing, is read back with `recall` when the
explorer still needs it (once: a recalled output may be shown compacted in turn). The same
tree and requests give the same calls, the same ids and the same answers.

`OfflineChatModel` is its chat-model base: tool binding, and exact prompt tokens in
`usage_metadata` as a provider would report them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from langgraph_ctx.tokens.exact import get_counter
from langgraph_ctx_tools.replay.models import InProcessChatModel

# Word lists read better as text than as tuples of strings.
_STOP = frozenset(
    "a an and are be can code does do file files find for from how in is it look me of on or "  # noqa: SIM905
    "please show the them this to what where which who why with".split()
)
_TEXT_SUFFIXES = tuple(
    ".py .md .txt .toml .cfg .ini .json .yaml .yml .rs .rst .js .ts .go .java .c .h .cpp .rb "  # noqa: SIM905
    ".sh".split()
)
_RECALL_RE = re.compile(r'recall\(ref="([^"]+)"\)')
_CALLED_RE = re.compile(r"Called (\w+)\((\{.*?\})\) →")
_ENTRY_RE = re.compile(r"^(dir|file)\s+(\S+)(?:\s+(\d+) lines)?", re.M)
_MATCH_RE = re.compile(r"^(\S+?):(\d+): (.*)$", re.M)
_READ_RE = re.compile(r"^(\S+) \(lines \d+-\d+ of (\d+)\)", re.M)
_DEF_RE = re.compile(r"^\s*(\d+)\|\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.M)


def call_key(name: str, args: dict[str, Any]) -> str:
    """A tool call as a comparable string."""
    return f"{name}:{json.dumps(args, sort_keys=True, separators=(',', ':'))}"


@dataclass
class View:
    """What the explorer can tell from its prompt."""

    request: str = ""
    done: dict[str, None] = field(default_factory=dict)
    """Calls taken, oldest first: listed in the summary, or in view."""
    listings: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)
    """Folder -> (kind, path, lines) entries of listings still readable."""
    hidden: dict[str, str] = field(default_factory=dict)
    """Call key -> recall reference of an output shown as a placeholder."""
    recalled: set[str] = field(default_factory=set)
    """References already recalled."""
    matches: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)
    """Search pattern -> (path, line, text) matches still readable."""
    definitions: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Names defined in the file chunks still readable -> (path, line)."""
    sizes: dict[str, int] = field(default_factory=dict)
    """Path -> line count, from listings and read headers in view."""
    plans: list[str] = field(default_factory=list)
    """Texts of the AI messages in view, oldest first."""
    memory: str = ""
    """Summary and hint text."""


def read_view(messages: Sequence[BaseMessage]) -> View:
    """Parse the prompt into a `View`."""
    view = View()
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for msg in messages:
        if isinstance(msg, SystemMessage):
            text = str(msg.content)
            if "<summary>" in text or "<compression_hint>" in text:
                view.memory += text
            for name, raw in _CALLED_RE.findall(text):
                try:
                    view.done[call_key(name, json.loads(raw))] = None
                except json.JSONDecodeError:
                    continue
        elif isinstance(msg, HumanMessage):
            view.request = str(msg.content)
        elif isinstance(msg, AIMessage):
            for call in msg.tool_calls:
                args = dict(call.get("args") or {})
                calls[call.get("id") or ""] = (call["name"], args)
                view.done[call_key(call["name"], args)] = None
            if msg.content:
                view.plans.append(str(msg.content))
        elif isinstance(msg, ToolMessage) and msg.tool_call_id in calls:
            _read_output(view, *calls[msg.tool_call_id], str(msg.content))
    return view


def _read_output(view: View, name: str, args: dict[str, Any], text: str) -> None:
    key = call_key(name, args)
    if name == "recall":  # recalled once, even when its output is shown compacted in turn
        view.recalled.add(str(args.get("ref", "")))
    refs = _RECALL_RE.findall(text)
    if text.startswith(("[compacted tool output", "[pruned:")) and refs:
        view.hidden[key] = refs[0]
        if name == "list_dir" or text.startswith("[pruned:"):
            return
        # An excerpt: the lines it shows are read as they are (a listing needs them all).
    if name == "recall":
        ref = str(args.get("ref", ""))
        original = next((k for k, r in view.hidden.items() if r == ref), None)
        if original is None:
            return
        name, args = _split_key(original)
        text = text.split("\n", 1)[1] if "\n" in text else ""
    if name == "list_dir":
        folder = str(args.get("path", "."))
        entries = [(k, p.rstrip("/"), int(n or 0)) for k, p, n in _ENTRY_RE.findall(text)]
        view.listings[folder] = entries
        view.sizes.update((p, n) for k, p, n in entries if k == "file")
    elif name == "search_text":
        found = [(p, int(n), t) for p, n, t in _MATCH_RE.findall(text)]
        view.matches[str(args.get("pattern", ""))] = found
    elif name == "read_file":
        path = str(args.get("path", ""))
        view.sizes.update((p, int(n)) for p, n in _READ_RE.findall(text))
        for line, ident in _DEF_RE.findall(text):
            view.definitions.setdefault(ident, (path, int(line)))


def _split_key(key: str) -> tuple[str, dict[str, Any]]:
    name, raw = key.split(":", 1)
    return name, json.loads(raw)


def _planned(view: View) -> list[str]:
    """The files a `Still to read: ...` plan (in view or in the summary) names."""
    for text in [*reversed(view.plans), view.memory]:
        found = re.findall(r"Still to read: ([^\n]*?)\.(?:\s|$)", text)
        if found:
            return [p.strip() for p in found[-1].split(",") if p.strip()]
    return []


def _notes(messages: Sequence[BaseMessage]) -> list[str]:
    """What the newest tool output showed, restated before the next step, as agents reason.

    The first line names the output, then up to `_NOTE_LINES` of its lines (definitions
    first); the step's intent follows as the turn's last line. Empty when the prompt does not
    end with a tool output.
    """
    if not messages or not isinstance(messages[-1], ToolMessage):
        return []
    lines = [ln.strip() for ln in str(messages[-1].content).splitlines() if ln.strip()]
    if not lines:
        return []
    body = lines[1:]
    picked = [ln for ln in body if re.search(r"\b(def|class)\s+\w", ln)][:_NOTE_LINES]
    picked += [ln for ln in body if ln not in picked][: _NOTE_LINES - len(picked)]
    head = f"Notes on the last output ({lines[0][:100]}):"
    return [head, *(f"- {ln[:_NOTE_CHARS]}" for ln in sorted(picked, key=body.index))]


_NOTE_LINES = 12
"""Lines of the newest tool output a step restates."""
_NOTE_CHARS = 120
"""Characters of each restated line."""


def keywords(request: str) -> list[str]:
    """The request's content words, stemmed (`tokens are counted` -> `token`, `count`)."""
    words = re.findall(r"[a-z][a-z0-9_]+", request.lower())
    out: list[str] = []
    for word in words:
        if word in _STOP or len(word) < 4:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 4:
                word = word[: -len(suffix)]
                break
        if word not in out:
            out.append(word)
    return out[:2]


class OfflineChatModel(InProcessChatModel):
    """Base of the offline models: binds tools and reports exact prompt tokens.

    Each reply carries `usage_metadata["input_tokens"]`: the exact tiktoken count of the prompt
    it received (messages and tool schemas), as a provider would report it, so the hint
    rebuild after a turn sees real prompt sizes.
    """

    token_model: str = "gpt-4o"
    """The tokenizer used for `usage_metadata`."""
    calls: int = 0
    """How many times the model was called."""

    @property
    def _llm_type(self) -> str:
        return "langgraph-ctx-offline"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Any:
        """Bind tool schemas; they reach `respond` and the token count."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def respond(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """The next reply (subclasses decide)."""
        raise NotImplementedError

    def answer(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """`respond`'s reply, with the exact tokens of the prompt and of the reply as usage."""
        self.calls += 1
        reply = self.respond(messages, tools)
        counter = get_counter(self.token_model)
        prompt = counter.count(messages, tools=tools or None)
        output = counter.count_message(reply)
        usage = {"input_tokens": prompt, "output_tokens": output, "total_tokens": prompt + output}
        return reply.model_copy(update={"usage_metadata": usage})


class ScriptedExplorer(OfflineChatModel):
    """A deterministic explorer agent over `list_dir`, `read_file`, `search_text` and `recall`."""

    max_reads: int = 6
    """Files read per "map" request."""
    chunk_lines: int = 100
    """Lines per `read_file` call."""
    max_folders: int = 3
    """Sub-folders listed per "map" request."""

    def respond(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """The next step: one tool call, or the answer."""
        view = read_view(messages)
        names = {t.get("function", {}).get("name") for t in tools}
        lowered = view.request.lower()
        step: tuple[str, dict[str, Any], str] | None = None
        if lowered.startswith("map"):
            step = self._map_step(view)
        elif lowered.startswith("find"):
            step = self._find_step(view)
        elif lowered.startswith("read"):
            step = self._further_step(view)
        if step is not None and step[0] in names:
            name, args, intent = step
            call = {"name": name, "args": args, "id": f"call_{self.calls:04d}", "type": "tool_call"}
            text = "\n".join([*_notes(messages), intent])
            return AIMessage(text, tool_calls=[call], id=f"ai-{self.calls:04d}")
        return AIMessage(self._answer(view), id=f"ai-{self.calls:04d}")

    # --- map -----------------------------------------------------------------------------

    def _map_step(self, view: View) -> tuple[str, dict[str, Any], str] | None:
        root = {"path": "."}
        if call_key("list_dir", root) not in view.done:
            return "list_dir", root, "Listing the top folder to see the layout."
        recall = self._recall_listing(view)
        if recall is not None:
            return recall
        folders = [p for k, p, _ in view.listings.get(".", []) if k == "dir"]
        for folder in folders[: self.max_folders]:
            if call_key("list_dir", {"path": folder}) not in view.done:
                return "list_dir", {"path": folder}, f"Listing {folder} next."
        ranked = self._largest(view)[: self.max_reads] or _planned(view)
        todo = [p for p in ranked if call_key("read_file", self._first(p)) not in view.done]
        if not todo:
            return None
        rest = f" Still to read: {', '.join(todo[1:])}." if todo[1:] else ""
        return "read_file", self._first(todo[0]), f"Reading {todo[0]}.{rest}"

    def _first(self, path: str) -> dict[str, Any]:
        return {"path": path, "start_line": 1, "end_line": self.chunk_lines}

    def _largest(self, view: View) -> list[str]:
        files = [
            (lines, path)
            for entries in view.listings.values()
            for kind, path, lines in entries
            if kind == "file" and path.endswith(_TEXT_SUFFIXES)
        ]
        return [p for _, p in sorted(set(files), key=lambda f: (-f[0], f[1]))]

    def _recall_listing(self, view: View) -> tuple[str, dict[str, Any], str] | None:
        for key, ref in sorted(view.hidden.items()):
            if key.startswith("list_dir:") and ref not in view.recalled:
                folder = _split_key(key)[1].get("path", ".")
                if folder not in view.listings:
                    intent = f"The listing of {folder} was compacted; reading it back."
                    return "recall", {"ref": ref}, intent
        return None

    # --- read further --------------------------------------------------------------------

    def _further_step(self, view: View) -> tuple[str, dict[str, Any], str] | None:
        recall = self._recall_listing(view)
        if recall is not None and not view.listings:
            return recall
        reads = [_split_key(k)[1] for k in view.done if k.startswith("read_file:")]
        largest = (self._largest(view) or [str(r.get("path")) for r in reads])[:1]
        for path in largest:
            for part in range(1, 4):
                start = part * self.chunk_lines + 1
                if start > view.sizes.get(path, start):
                    break
                args = {"path": path, "start_line": start, "end_line": start + self.chunk_lines - 1}
                if call_key("read_file", args) not in view.done:
                    return "read_file", args, f"Reading {path} from line {start}."
        return None

    # --- find ----------------------------------------------------------------------------

    def _find_step(self, view: View) -> tuple[str, dict[str, Any], str] | None:
        words = keywords(view.request)
        if not words:
            return None
        pattern = "|".join(f"{a}.*{b}" for a in words for b in words if a != b) or words[0]
        first = {"pattern": pattern, "path": "."}
        if call_key("search_text", first) not in view.done:
            return "search_text", first, f"Searching for {' and '.join(words)}."
        hidden = view.hidden.get(call_key("search_text", first))
        if pattern not in view.matches and hidden and hidden not in view.recalled:
            return "recall", {"ref": hidden}, "The search results were compacted; reading back."
        for name in self._names(view, pattern, words):
            where = {"pattern": rf"^\s*(async def|def|class) {name}\b", "path": "."}
            if call_key("search_text", where) not in view.done:
                return "search_text", where, f"Looking for the definition of {name}."
            for path, line, _ in view.matches.get(where["pattern"], [])[:1]:
                start = max(1, line - 2)
                end = start + self.chunk_lines - 1
                args = {"path": path, "start_line": start, "end_line": end}
                if call_key("read_file", args) not in view.done:
                    return "read_file", args, f"Reading {name} in {path}."
        return None

    def _names(self, view: View, pattern: str, words: list[str]) -> list[str]:
        # Names defined on a matching line first (`def count_tokens`), then the most frequent.
        counts: Counter[str] = Counter()
        for _, _, text in view.matches.get(pattern, []):
            defined = re.findall(r"\b(?:def|class)\s+(\w+)", text)
            for ident in re.findall(r"[A-Za-z_][A-Za-z0-9_]{3,}", text):
                if any(w in ident.lower() for w in words):
                    counts[ident] += 100 if ident in defined else 1
        return [n for n, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:2]

    # --- answers -------------------------------------------------------------------------

    def _answer(self, view: View) -> str:
        request = view.request.strip().splitlines()[0] if view.request.strip() else "the task"
        lines = [f"Answer to: {request[:200]}"]
        listed = sorted({p for entries in view.listings.values() for _, p, _ in entries})
        if listed:
            lines.append(f"- Listed {len(listed)} entries, e.g. {', '.join(listed[:8])}.")
        reads = [_split_key(k)[1] for k in view.done if k.startswith("read_file:")]
        if reads:
            shown = [
                f"{r.get('path')}:{r.get('start_line', 1)}-{r.get('end_line', '')}" for r in reads
            ]
            lines.append(f"- Read so far ({len(shown)} chunks): {', '.join(shown)}.")
        searches = [_split_key(k)[1].get("pattern") for k in view.done if k.startswith("search_")]
        if searches:
            lines.append(f"- Searched for: {', '.join(f'/{p}/' for p in searches)}.")
        for pattern, found in sorted(view.matches.items()):
            if found:
                where = ", ".join(f"{p}:{n}" for p, n, _ in found[:5])
                lines.append(f"- /{pattern}/: {len(found)} matches in view, first at {where}.")
        defs = sorted(view.definitions.items(), key=lambda kv: kv[1])[:12]
        if defs:
            lines.append("- Definitions seen: " + ", ".join(f"{n} ({p}:{i})" for n, (p, i) in defs))
        if len(lines) == 1:
            lines.append("- Nothing relevant is in view yet.")
        return "\n".join(lines)
