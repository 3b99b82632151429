"""The background half of summaries prepared ahead: `SummaryPreparer` (see `strategies.ahead`).

It performs the `PrepareSummary` and `AwaitPrepared` effects: a preparation runs in a daemon
worker thread (sync driver) or as an asyncio task (async driver), one per thread at a time,
and its outcome is kept in memory until a build takes it.

`AheadBinding` is the preparer as one build of one thread uses it (`Resources.ahead`): the
strategies start a preparation and take its outcome through it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import AwaitPrepared, Plan, PrepareSummary, arun_plan, run_plan
from langgraph_ctx.strategies.ahead import SummarizePlan

if TYPE_CHECKING:
    from langgraph_ctx.summaries.summarizer import SummaryOutcome


@dataclass(eq=False)
class _Prep:
    digest: str
    done: threading.Event = field(default_factory=threading.Event)
    outcome: Any = None
    task: asyncio.Task[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None


class SummaryPreparer:
    """Keeps the summaries being prepared in the background, one per thread.

    Holds outcomes in memory only: a preparation lost with its process just means the span is
    summarized when the trigger is reached. Thread-safe; shared by every thread of a manager.

    Args:
        max_threads: Threads whose preparation is kept at most (the oldest are forgotten).
    """

    def __init__(self, *, max_threads: int = 1024) -> None:
        self.max_threads = max_threads
        self._preps: OrderedDict[str, _Prep] = OrderedDict()
        self._lock = threading.Lock()

    def _claim(self, effect: PrepareSummary) -> _Prep | None:
        """A new preparation for `effect`, or None when one exists or another still runs."""
        with self._lock:
            prep = self._preps.get(effect.key)
            if prep is not None and (prep.digest == effect.digest or not prep.done.is_set()):
                return None  # the same span, or the thread's other preparation still runs
            prep = _Prep(effect.digest)
            self._preps[effect.key] = prep
            self._preps.move_to_end(effect.key)
            while len(self._preps) > self.max_threads:
                self._preps.popitem(last=False)
            return prep

    def start(self, effect: PrepareSummary) -> bool:
        """Start the preparation in a daemon worker thread (sync driver)."""
        prep = self._claim(effect)
        if prep is None:
            return False

        def work() -> None:
            try:
                prep.outcome = run_plan(effect.summarize(list(effect.messages), effect.previous))
            except Exception:  # a failed preparation is a missing one: summarized at the trigger
                prep.outcome = None
            finally:
                prep.done.set()

        threading.Thread(target=work, name="langgraph_ctx-prepare", daemon=True).start()
        return True

    async def astart(self, effect: PrepareSummary) -> bool:
        """Start the preparation as an asyncio task of the running loop (async driver)."""
        prep = self._claim(effect)
        if prep is None:
            return False

        async def work() -> None:
            try:
                prep.outcome = await arun_plan(
                    effect.summarize(list(effect.messages), effect.previous)
                )
            except Exception:  # a failed preparation is a missing one
                prep.outcome = None
            finally:
                prep.done.set()

        loop = asyncio.get_running_loop()
        # An empty context: the task outlives the model call that started it, so it must not
        # report into that call's run (callbacks, stream writers) after the call ended.
        prep.loop = loop
        prep.task = contextvars.Context().run(loop.create_task, work())
        return True

    def _ready(self, effect: AwaitPrepared) -> _Prep | None:
        with self._lock:
            prep = self._preps.get(effect.key)
        return prep if prep is not None and prep.digest == effect.digest else None

    def _take(self, effect: AwaitPrepared, prep: _Prep) -> SummaryOutcome | None:
        with self._lock:
            if self._preps.get(effect.key) is prep:
                del self._preps[effect.key]
        return prep.outcome  # type: ignore[no-any-return]

    def wait(self, effect: AwaitPrepared) -> SummaryOutcome | None:
        """The prepared outcome, waiting up to `effect.timeout`; None when there is none."""
        prep = self._ready(effect)
        if prep is None:
            return None
        if not prep.done.is_set():
            loop = prep.loop
            if loop is not None and loop.is_running() and _loop_of_this_thread(loop):
                return None  # its task cannot run while this thread blocks its loop
            if not prep.done.wait(effect.timeout):
                return None
        return self._take(effect, prep)

    async def await_prepared(self, effect: AwaitPrepared) -> SummaryOutcome | None:
        """Async `wait`."""
        prep = self._ready(effect)
        if prep is None:
            return None
        if not prep.done.is_set():
            try:
                if prep.task is not None and prep.loop is asyncio.get_running_loop():
                    await asyncio.wait_for(asyncio.shield(prep.task), effect.timeout)
                else:  # started by a sync build (or another loop): wait off the loop
                    await asyncio.wait_for(asyncio.to_thread(prep.done.wait), effect.timeout)
            except asyncio.TimeoutError:
                return None
        return self._take(effect, prep) if prep.done.is_set() else None

    def pending(self, key: str) -> str | None:
        """The digest of the thread's preparation (running or ready), if any."""
        with self._lock:
            prep = self._preps.get(key)
        return prep.digest if prep is not None else None

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every preparation started in a worker thread ended (tests, shutdown)."""
        with self._lock:
            preps = list(self._preps.values())
        return all(p.done.wait(timeout) for p in preps if p.task is None)


def _loop_of_this_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


@dataclass(frozen=True, slots=True)
class AheadBinding:
    """The preparer as one build of one thread uses it (`Resources.ahead`)."""

    preparer: SummaryPreparer
    """Where preparations live."""
    key: str
    """The thread (`thread_key`)."""
    summarize: SummarizePlan
    """The summarizer's plan factory."""
    wait_seconds: float | None
    """Longest wait at the trigger for a preparation still running (`None`: until it ends)."""

    def plan_start(
        self, digest: str, messages: Sequence[BaseMessage], previous: str | None
    ) -> Plan[bool]:
        """Start preparing `messages` (idempotent); the plan returns whether it started."""
        started = yield PrepareSummary(
            self.preparer, self.key, digest, self.summarize, tuple(messages), previous
        )
        return bool(started)

    def plan_outcome(
        self, digest: str, messages: list[BaseMessage], previous: str | None, note: dict[str, Any]
    ) -> Plan[Any]:
        """The prepared outcome of `digest`, else the summarizer's (`note["ahead"]` says which)."""
        outcome = yield AwaitPrepared(self.preparer, self.key, digest, self.wait_seconds)
        if outcome is not None:
            note["ahead"] = "prepared"
            return outcome
        note["ahead"] = "not ready: summarized now"
        return (yield from self.summarize(messages, previous))
