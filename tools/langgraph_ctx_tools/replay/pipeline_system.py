"""Our pipeline as a replayed system: `ContextManager.build` each call, as `ContextMemory` runs it.

The ledger is carried from call to call as the graph's state would carry it; with
`remove_summarized` the messages a summary covers leave the kept history by the memory's own
rule (`langgraph_ctx.pipeline.summarized_removal`: their span dumped first); with `bind_search` the
`search_history` tool is counted in the budget once something is archived, as the middleware
binds it. After the run, `finish` says how much of what left the prompt the archive or the
history gives back byte for byte (`restorable`), the one check of it for every replay, and
how many summaries the summarizer model did not write (`summary_fallbacks`: our validation
rejected its answer, or no slot was free, and the deterministic fallback stood in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.store.memory import InMemoryStore

from langgraph_ctx._effects import run_plan
from langgraph_ctx.archive import Archive, StoreBackend, encode_message
from langgraph_ctx.archive._backends import ArchiveBackend
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.archive.entry_cache import EntryCache
from langgraph_ctx.archive.search import make_search_tool, search_archive
from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.ledger import has_archived
from langgraph_ctx.messages import text_of
from langgraph_ctx.pipeline import ContextManager
from langgraph_ctx.pipeline.result import BuildResult
from langgraph_ctx.pipeline.summarized_removal import summarized_removal
from langgraph_ctx.prompt.render import search_notes
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import default_strategies
from langgraph_ctx.summaries.summarizer import Summarizer
from langgraph_ctx.tokens.counter import count_tool_tokens
from langgraph_ctx_tools.replay.measure import same_for_provider
from langgraph_ctx_tools.replay.models import Counter, metered, summarizer_usage

__all__ = ["PipelineSystem"]


class PipelineSystem:
    """`ContextManager.build` before every model call of a replay (see the module).

    Args:
        name: The row's name.
        budget: The budget of the build.
        counter: The token counter of the build (and of the summarizer's usage).
        strategies: The strategies (default: `default_strategies(summarize=False)`).
        archive: Keep an in-process archive (or `backend`, a store of the caller's).
        model: The summarizer's chat model (None: the deterministic summary).
        remove_summarized: Remove summarized messages from the history, as `ContextMemory`
            does with a durable archive.
        bind_search: Count `search_history` in the budget once something is archived.
        backend: The archive's backend (default: a fresh `InMemoryStore`).
        thread_id: The archive's thread (its keys carry it).
        options: Further `ContextManager` options (e.g. `summary_placement`).
    """

    def __init__(
        self,
        name: str,
        *,
        budget: ContextBudget,
        counter: Counter,
        strategies: Sequence[Any] | None = None,
        archive: bool = True,
        model: Any = None,
        remove_summarized: bool = False,
        bind_search: bool = False,
        backend: ArchiveBackend | None = None,
        thread_id: str = "replay",
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.counter = counter
        self.model = metered(model, counter)
        self.bind_search = bind_search
        if archive and backend is None:
            backend = StoreBackend(InMemoryStore())
        self.archive = Archive(backend, thread_id=thread_id) if backend is not None else None
        self.manager = ContextManager(
            budget=budget,
            strategies=list(strategies)
            if strategies is not None
            else default_strategies(summarize=False),
            token_counter=counter,
            archive=self.archive,
            summarizer=Summarizer(model=model, timeout_seconds=None) if model else None,
            **(options or {}),
        )
        self.remove_summarized = remove_summarized
        self.history: list[BaseMessage] = []
        self.ledger: dict[str, Any] | None = None
        self.removed: dict[str, BaseMessage] = {}  # left the live history, by id
        self.refs: dict[str, str] = {}  # every message ever pruned or compacted -> its ref
        self.last: BuildResult | None = None
        self.fallbacks: list[str] = []  # why each summary the model did not write fell back
        self._search_cache = EntryCache()
        self._schema_tokens: int | None = None
        self._tool: Any = None

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Build the prompt and carry the ledger (the timed part)."""
        self.history.extend(new)
        try:
            # As the middleware binds it: counted in the budget, and named by the excerpts' and
            # the summary's last lines.
            tools = [self._search_tool()] if self._bound() else None
            result = self.manager.build(self.history, state=self.ledger, tools=tools)
        except ContextWindowExceededError as exc:
            self.ledger = dict(self.ledger or {}, last_report=exc.report.to_dict())
            self.last = None
            raise
        self.ledger, self.last = result.state, result
        if self.model is not None:
            self.fallbacks += [
                str(d.detail.get("error") or "the deterministic fallback stood in")
                for d in result.report.decisions
                if d.detail.get("source") == "fallback"
            ]
        return result.messages

    def observe(self) -> None:
        """Record archive refs; remove summarized messages as `ContextMemory` does."""
        if self.ledger is None or self.last is None:
            return
        for kind in ("pruned", "compacted"):
            for mid, entry in (self.ledger.get(kind) or {}).items():
                if entry.get("ref"):
                    self.refs[mid] = entry["ref"]
        if not self.remove_summarized or self.archive is None:
            return
        removal = summarized_removal(self.history, self.last.removable_ids)
        if removal is None:
            return
        ref = run_plan(self.manager.plan_dump(self.archive, removal.span))
        self.ledger = removal.ledger_after(self.ledger, ref)
        gone = set(removal.ids)
        self.removed.update((m.id or "", m) for m in self.history if m.id in gone)
        self.history = [m for m in self.history if m.id not in gone]

    def summarizer_usage(self) -> tuple[int, int, int]:
        """(calls, input tokens, output tokens) of the summarizer model so far."""
        return summarizer_usage(self.model, self.counter)

    def search_schema(self) -> int:
        """Tokens of the `search_history` schema the middleware sends with this call.

        0 unless bound (`_bound`).
        """
        if not self._bound():
            return 0
        if self._schema_tokens is None:
            self._schema_tokens = count_tool_tokens(self.counter, [self._search_tool()])
        return self._schema_tokens

    def mention_tokens(self, prompt: Sequence[BaseMessage]) -> int:
        """Tokens of what the prompt's excerpts and summary note add to name the search tool.

        Each added piece is counted alone: about what it adds.
        """
        if not self.bind_search or self.archive is None:
            return 0
        pieces = search_notes(self._search_tool().name)
        return sum(
            text_of(m).count(piece) * self.counter.count_text(piece)  # type: ignore[attr-defined]
            for m in prompt
            for piece in pieces
        )

    def _bound(self) -> bool:
        """Whether `search_history` is bound now: asked for, and something is archived."""
        return self.bind_search and self.archive is not None and has_archived(self.ledger)

    def _search_tool(self) -> Any:
        assert self.archive is not None
        if self._tool is None:
            self._tool = make_search_tool(self.archive)
        return self._tool

    def search(self, query: str) -> str:
        """What the agent's `search_history` answers for `query` (3 hits), on this archive."""
        if self.archive is None:
            return ""
        return search_archive(self.archive, query, limit=3, cache=self._search_cache)

    def _dumped(self) -> dict[str, BaseMessage]:
        out: dict[str, BaseMessage] = {}
        if self.archive is None:
            return out
        for ref in all_dump_refs(self.ledger, self.archive):  # the dump index's too
            for m in self.archive.read(ref):
                if isinstance(m, BaseMessage):
                    out.setdefault(m.id or "", m)
        return out

    def recoverable_texts(self) -> Iterable[str]:
        """Live history, insurance dumps and archived tool outputs."""
        yield from (text_of(m) for m in self.history)
        yield from (text_of(m) for m in self._dumped().values())
        if self.archive is not None:
            for ref in self.refs.values():
                yield text_of(self.archive.restore(ref))

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """What left the prompt, and how much of it comes back.

        `removed`: messages whose content left the prompt; `restorable`: of those, how many the
        archive or the history gives back byte for byte; `out_of_prompt`: how many the final
        prompt no longer holds at all; `summary_fallbacks`: summaries the summarizer model did
        not write (the deterministic fallback did), with `fallback_reason`, the first one's why.
        """
        seen = {m.id for m in self.history} | set(self.removed)
        shown = {m.id for m in final_prompt}
        by_id = {m.id: m for m in original}
        verbatim = {
            m.id for m in final_prompt if m.id in by_id and same_for_provider(m, by_id[m.id])
        }
        removed = [
            m
            for m in original
            if m.id in seen
            and not isinstance(m, SystemMessage)
            and (m.id not in verbatim or m.id in self.refs)
        ]
        dumped = self._dumped()
        live = {m.id: m for m in self.history}
        restorable = 0
        for m in removed:
            mid = m.id or ""
            got: Any
            if mid in self.refs and self.archive is not None:
                got = self.archive.restore(self.refs[mid])
            elif mid in self.removed:
                got = dumped.get(mid)
            else:
                got = live.get(mid)
            restorable += got is not None and encode_message(got) == encode_message(m)
        return {
            "removed": len(removed),
            "restorable": restorable,
            "out_of_prompt": sum(m.id not in shown for m in removed),
            "summary_fallbacks": len(self.fallbacks),
            "fallback_reason": self.fallbacks[0] if self.fallbacks else None,
        }
