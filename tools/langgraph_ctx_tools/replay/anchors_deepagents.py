"""deepagents' context stack as replayed anchors, driven through its real code path.

* `DeepagentsSummarizationAnchor`: deepagents' `create_summarization_middleware(...)` and its
  `wrap_model_call`; the `_summarization_event` (and any message replacements) it returns in
  its `Command` are applied to the kept state. History offloads go to a `FilesystemBackend`.
* `DeepagentsEvictionAnchor`: deepagents' `FilesystemMiddleware`: every tool result passes
  its `wrap_tool_call` (large tool result eviction to the backend) when it is produced, and
  every model call its `wrap_model_call`.
* `DeepagentsAgentAnchor`: both, composed as `create_deep_agent` composes them.

deepagents is optional: importing an anchor's class needs no deepagents; building one does.

The summarization middleware names its history file after a session id it draws from
`uuid4` unless the state holds one; each anchor's state holds one drawn from a fixed seed (as
random-looking, so it costs the prompt as many tokens as a drawn one), so a replay prints the
same figures every time.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_ctx_tools.replay.anchors import AnchorBase, merged, stand_in
from langgraph_ctx_tools.replay.models import Counter

__all__ = ["DeepagentsAgentAnchor", "DeepagentsEvictionAnchor", "DeepagentsSummarizationAnchor"]


class _DeepagentsAnchor(AnchorBase):
    """An anchor whose deepagents middleware write to a temporary `FilesystemBackend`.

    What they write there (offloaded history, evicted tool results) is recoverable; the folder
    is removed when the replay finishes.
    """

    def __init__(self, *, limit: int, counter: Counter | None, prefix: str) -> None:
        super().__init__(limit=limit, counter=counter)
        from deepagents.backends import FilesystemBackend

        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.backend = FilesystemBackend(root_dir=self.root, virtual_mode=True)
        self.state: dict[str, Any] = {"messages": self.messages}
        try:
            from deepagents.middleware.summarization import SUMMARIZATION_SESSION_ID_KEY
        except ImportError:  # a deepagents release that names no session in the state
            return
        session = f"session_{random.Random(0).getrandbits(128):032x}"  # the form uuid4 gives
        self.state[SUMMARIZATION_SESSION_ID_KEY] = session

    def _model_call(
        self, wrap: Callable[..., object], handler: Any
    ) -> tuple[list[BaseMessage], object]:
        """The kept state through `wrap` (a `wrap_model_call`): the prompt sent, the response."""
        self.state["messages"] = self.messages
        response = wrap(self._request(self.state), handler)
        return self._sent(), response

    def _apply(self, response: object) -> set[str]:
        """Apply a deepagents middleware's `Command` update to the kept state; the keys it set."""
        if not isinstance(response, ExtendedModelResponse) or response.command is None:
            return set()
        update = response.command.update or {}
        for key, value in update.items():  # type: ignore[union-attr]
            if key == "messages":
                self.messages = merged(self.messages, value)
                self.state["messages"] = self.messages
            else:
                self.state[key] = value
        return set(update)  # type: ignore[arg-type]

    def _summarization(self) -> Any:
        """The summarization middleware of deepagents over this anchor's model, backend, counter."""
        from deepagents.middleware.summarization import create_summarization_middleware

        return create_summarization_middleware(
            self.model,  # type: ignore[arg-type]
            self.backend,
            token_counter=self.count,
        )

    def _written_then_removed(self) -> int:
        """Bytes deepagents wrote to the backend, whose folder is then removed."""
        written = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        shutil.rmtree(self.root, ignore_errors=True)
        return written

    def recoverable_texts(self) -> Iterable[str]:
        """State messages (never removed) and the files deepagents wrote (offloads, evictions)."""
        yield from super().recoverable_texts()
        for path in self.root.rglob("*"):
            if path.is_file():
                yield path.read_text(encoding="utf-8", errors="replace")


class DeepagentsSummarizationAnchor(_DeepagentsAnchor):
    """deepagents `create_summarization_middleware(model, backend)` via `wrap_model_call`."""

    name = "deepagents summarization"

    def __init__(
        self, *, limit: int, model: BaseChatModel | None = None, counter: Counter | None = None
    ) -> None:
        super().__init__(limit=limit, counter=counter, prefix="bench-deepagents-")
        self.model = model or stand_in(limit)
        self.mw = self._summarization()
        self.events = 0

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Call `wrap_model_call`; apply the returned `Command` update to the kept state."""
        self.messages.extend(self._absorb(new))
        prompt, response = self._model_call(self.mw.wrap_model_call, self._handler)
        self.events += "_summarization_event" in self._apply(response)
        return prompt

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """Bytes offloaded; the temporary backend is removed."""
        return {"archive_bytes": self._written_then_removed(), "summary_events": self.events}


class DeepagentsEvictionAnchor(_DeepagentsAnchor):
    """deepagents `FilesystemMiddleware(tool_token_limit_before_evict=...)`.

    Tool results pass `wrap_tool_call` as they are produced (eviction rewrites what enters
    state); model calls pass `wrap_model_call` (oversized human messages are evicted there).
    """

    name = "deepagents FilesystemMiddleware eviction"

    def __init__(self, *, limit: int, evict_tokens: int, counter: Counter | None = None) -> None:
        super().__init__(limit=limit, counter=counter, prefix="bench-deepagents-fs-")
        from deepagents.middleware.filesystem import FilesystemMiddleware

        self.mw = FilesystemMiddleware(
            backend=self.backend, tool_token_limit_before_evict=evict_tokens
        )
        self.evicted: dict[str, ToolMessage] = {}  # id -> the original result

    def _produce(self, message: BaseMessage) -> BaseMessage:
        from langgraph.prebuilt.tool_node import ToolCallRequest

        if not isinstance(message, ToolMessage):
            return message
        ai = next((m for m in reversed(self.messages) if isinstance(m, AIMessage)), None)
        call = next(
            (tc for tc in (ai.tool_calls if ai else []) if tc.get("id") == message.tool_call_id),
            {"name": message.name or "tool", "args": {}, "id": message.tool_call_id},
        )
        request = ToolCallRequest(tool_call=call, tool=None, state=self.state, runtime=None)  # type: ignore[arg-type]
        out = self.mw.wrap_tool_call(request, lambda _req: message)
        if not isinstance(out, ToolMessage):  # a Command: not produced by these tool results
            return message
        if out is not message and out.content != message.content:
            self.evicted[message.id or ""] = message
        return out

    def _produce_all(self, new: list[BaseMessage]) -> None:
        """Append `new` to the kept state, each tool result as `wrap_tool_call` produced it."""
        for message in self._absorb(new):
            self.messages.append(self._produce(message))

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Produce the new tool results through `wrap_tool_call`, then `wrap_model_call`."""
        self._produce_all(new)
        prompt, response = self._model_call(self.mw.wrap_model_call, self._handler)
        self._apply(response)
        return prompt

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """Restorability of evicted results (file content equal to the original content)."""
        from deepagents.backends.utils import sanitize_tool_call_id

        restored = 0
        for message in self.evicted.values():
            path = self.root / "large_tool_results" / sanitize_tool_call_id(message.tool_call_id)
            try:
                with path.open(encoding="utf-8", newline="") as fh:
                    restored += fh.read() == message.content
            except OSError:
                pass
        return {
            "removed": len(self.evicted),
            "restorable": restored,
            "archive_bytes": self._written_then_removed(),
            "restorable_note": "evicted content equals the file (message fields kept in state)",
        }


class DeepagentsAgentAnchor(DeepagentsEvictionAnchor):
    """The context stack of `create_deep_agent`: eviction, then summarization.

    `FilesystemMiddleware` (large tool result eviction, `tool_token_limit_before_evict`) then
    `create_summarization_middleware`.

    Tool results pass the filesystem middleware's `wrap_tool_call` as they are produced; each
    model call passes its `wrap_model_call`, whose handler is the summarization middleware's
    `wrap_model_call` (the order `create_deep_agent` composes them in). Both write to one
    `FilesystemBackend`; every `Command` update either returns is applied to the kept state.
    """

    def __init__(
        self,
        *,
        limit: int,
        evict_tokens: int,
        model: BaseChatModel | None = None,
        scaled: bool = False,
        counter: Counter | None = None,
    ) -> None:
        super().__init__(limit=limit, evict_tokens=evict_tokens, counter=counter)
        self.name = f"deepagents (evict at {evict_tokens:,}{', scaled' if scaled else ''})"
        self.model = model or stand_in(limit)
        self.summarization = self._summarization()

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Produce new tool results through eviction, then call both model wrappers."""
        self._produce_all(new)
        inner: list[object] = []

        def handler(request: ModelRequest) -> Any:
            response = self.summarization.wrap_model_call(request, self._handler)
            inner.append(response)
            return response

        prompt, outer = self._model_call(self.mw.wrap_model_call, handler)
        for response in {id(r): r for r in [*inner, outer]}.values():
            self._apply(response)
        return prompt
