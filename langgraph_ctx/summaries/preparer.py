"""The background half of summaries prepared ahead: `SummaryPreparer` (see `strategies.ahead`).

Plans reach it through `MethodCall` effects (`start`/`astart` a `SpanToPrepare`,
`wait_prepared`/`await_prepared` a `SpanWanted`): a preparation runs in a daemon worker thread
(sync driver) or as an asyncio task (async driver), one per thread at a time, and its outcome
is kept in memory until a build takes it.

Preparations call the summarizer within the manager's cap on summarizer calls in flight
(`SummarySlots`, `max_summaries_in_flight`, shared with the summaries builds make themselves):
one waits for a slot, oldest first, in its worker thread or task, so the build that started it
never waits. A build at the trigger whose preparation still waits for a slot withdraws it and
summarizes in its own call, as when a preparation is not ready (`AheadBinding.plan_outcome`),
through the same slots: with none free, the deterministic summary stands in.

`AheadBinding` is the preparer as one build of one thread uses it (`Resources.ahead`): the
strategies start a preparation and take its outcome through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import MethodCall, Plan, arun_plan, run_plan
from langgraph_ctx._lru import LRUCache
from langgraph_ctx.summaries.slots import DEFAULT_MAX_IN_FLIGHT, SummarySlots

if TYPE_CHECKING:
    from langgraph_ctx.summaries.summarizer import SummaryOutcome


SummarizePlan = Callable[[list[BaseMessage], "str | None"], Plan[Any]]
"""A summarizer's plan factory: `(messages, previous) -> Plan[SummaryOutcome]`."""

POLL_SECONDS = 1.0
"""A preparation waiting for a slot looks again this often, even when nobody wakes it."""


@dataclass(frozen=True, slots=True)
class SpanToPrepare:
    """A span to summarize in the background (`SummaryPreparer.start` or `astart`)."""

    key: str
    """The thread the span belongs to."""
    digest: str
    """Names the span and the summary it folds into (`strategies.ahead_span.span_digest`)."""
    summarize: SummarizePlan
    """The summarizer's plan factory, run in the background."""
    messages: tuple[BaseMessage, ...]
    """The span to summarize."""
    previous: str | None
    """The running summary to fold into."""


@dataclass(frozen=True, slots=True)
class SpanWanted:
    """The prepared outcome a build asks for (`SummaryPreparer.wait_prepared`)."""

    key: str
    """The thread the span belongs to."""
    digest: str
    """The span wanted (see `SpanToPrepare.digest`)."""
    timeout: float | None
    """Longest wait for a preparation still running; `None` waits until it ends."""


@dataclass(eq=False)
class _Prep:
    digest: str
    done: threading.Event = field(default_factory=threading.Event)
    outcome: Any = None
    task: asyncio.Task[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    running: bool = False
    """It holds a slot: the summarizer is being called (or was)."""
    withdrawn: bool = False
    """Given up before it got a slot: it never calls the summarizer."""
    wake: Callable[[], None] | None = None
    """Wakes it while it waits for a slot (set by its worker thread or task)."""

    def gone(self) -> bool:
        """It will not take a slot any more: withdrawn, or its event loop is closed."""
        return self.withdrawn or (self.loop is not None and self.loop.is_closed())


class SummaryPreparer:
    """Keeps the summaries being prepared in the background, one per thread.

    Holds outcomes in memory only: a preparation lost with its process just means the span is
    summarized when the trigger is reached. Thread-safe; shared by every thread of a manager.

    Args:
        max_threads: Threads whose preparation is kept at most (the oldest are forgotten).
        slots: The manager's cap on summarizer calls in flight, shared with its builds' own
            summaries; None: slots of this preparer's own (`max_in_flight`).
        max_in_flight: With no `slots`: summarizer calls at once, at most (None: no cap).
    """

    def __init__(
        self,
        *,
        max_threads: int = 1024,
        slots: SummarySlots | None = None,
        max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        self.max_threads = max_threads
        self.slots = slots if slots is not None else SummarySlots(max_in_flight)
        self._lock = self.slots.lock  # one lock: a withdrawal and a grant never race
        # By thread, the least recently started forgotten first; `put` and the withdrawal of
        # what it drops run under `_lock` (taken before the cache's own, never after).
        self._preps: LRUCache[str, _Prep] = LRUCache(
            max_items=max_threads, on_drop=lambda _key, prep: self._withdraw(prep)
        )

    @property
    def max_in_flight(self) -> int | None:
        """The cap on summarizer calls in flight (the slots'; None: no cap)."""
        return self.slots.max_in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most summarizer calls held at once: preparations and builds' own summaries."""
        return self.slots.peak_in_flight

    @property
    def peak_background(self) -> int:
        """The most background preparations calling the summarizer at once."""
        return self.slots.peak_background

    def _claim(self, span: SpanToPrepare) -> _Prep | None:
        """A new preparation for `span`, or None when one exists or another still runs.

        The thread's preparation of another span that is still waiting for a slot is
        withdrawn and replaced (it has cost nothing yet); one that runs is let finish.
        """
        with self._lock:
            prep = self._preps.peek(span.key)
            if prep is not None and prep.digest != span.digest:
                self._withdraw(prep)
            if prep is not None and (prep.digest == span.digest or not prep.done.is_set()):
                return None  # the same span, or the thread's other preparation still runs
            prep = _Prep(span.digest)
            self._preps.put(span.key, prep)
            return prep

    # --- waiting for a slot (`SummarySlots`) -----------------------------------------

    def _withdraw(self, prep: _Prep) -> bool:
        """Under the lock: give up `prep` if it still waits for a slot; whether it did."""
        if prep.running or prep.done.is_set():
            return False
        prep.withdrawn = True
        prep.done.set()
        self.slots.wake_head()  # it may have been the head
        return True

    def _enqueue(self, prep: _Prep, wake: Callable[[], None]) -> bool:
        """Take a slot for `prep` now, or queue it (woken by `wake`); whether it got one."""
        with self._lock:
            prep.wake = wake
            return self.slots.enqueue(prep)

    def _granted(self, prep: _Prep) -> bool | None:
        """After a wake-up: False when `prep` was withdrawn, True when it got a slot, else None.

        The one decision of both waits (`_acquire` in a thread, `_aacquire` in a task); only
        how they sleep differs.
        """
        with self._lock:
            if prep.gone():
                return False
            return True if self.slots.grant(prep) else None

    def _acquire(self, prep: _Prep) -> bool:
        """Wait in this worker thread for a slot; False when `prep` was withdrawn meanwhile."""
        event = threading.Event()
        if self._enqueue(prep, event.set):
            return True
        while True:
            event.wait(POLL_SECONDS)
            event.clear()
            if (granted := self._granted(prep)) is not None:
                return granted

    async def _aacquire(self, prep: _Prep) -> bool:
        """Wait in this asyncio task for a slot; False when `prep` was withdrawn meanwhile."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()

        def wake() -> None:  # called from any thread, under the preparer's lock
            with contextlib.suppress(RuntimeError):  # a closed loop: `gone()` drops it
                loop.call_soon_threadsafe(event.set)

        try:
            if self._enqueue(prep, wake):
                return True
            while True:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), POLL_SECONDS)
                event.clear()
                if (granted := self._granted(prep)) is not None:
                    return granted
        except BaseException:  # cancelled while waiting: never calls the summarizer
            with self._lock:
                if not prep.running:
                    prep.withdrawn = True
                    self.slots.wake_head()
            raise

    # --- preparations ------------------------------------------------------------------

    def start(self, span: SpanToPrepare) -> bool:
        """Start the preparation in a daemon worker thread (sync driver)."""
        prep = self._claim(span)
        if prep is None:
            return False

        def work() -> None:
            try:
                if not self._acquire(prep):
                    return
                try:
                    prep.outcome = run_plan(span.summarize(list(span.messages), span.previous))
                finally:
                    self.slots.release(background=True)
            except Exception:  # a failed preparation is a missing one: summarized at the trigger
                prep.outcome = None
            finally:
                prep.done.set()

        threading.Thread(target=work, name="langgraph_ctx-prepare", daemon=True).start()
        return True

    async def astart(self, span: SpanToPrepare) -> bool:
        """Start the preparation as an asyncio task of the running loop (async driver)."""
        prep = self._claim(span)
        if prep is None:
            return False

        async def work() -> None:
            try:
                if not await self._aacquire(prep):
                    return
                try:
                    prep.outcome = await arun_plan(
                        span.summarize(list(span.messages), span.previous)
                    )
                finally:
                    self.slots.release(background=True)
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

    def _ready(self, wanted: SpanWanted) -> _Prep | None:
        with self._lock:
            prep = self._preps.peek(wanted.key)
        return prep if prep is not None and prep.digest == wanted.digest else None

    def _take(self, wanted: SpanWanted, prep: _Prep) -> SummaryOutcome | None:
        with self._lock:
            if self._preps.peek(wanted.key) is prep:
                self._preps.pop(wanted.key)
        return prep.outcome  # type: ignore[no-any-return]

    def _still_queued(self, wanted: SpanWanted, prep: _Prep) -> bool:
        """Withdraw `prep` if it still waits for a slot; whether it did.

        The build then summarizes in its own call, as when nothing was prepared, rather than
        wait for a slot and then for the summarizer.
        """
        with self._lock:
            withdrawn = self._withdraw(prep)
            if withdrawn and self._preps.peek(wanted.key) is prep:
                self._preps.pop(wanted.key)
        return withdrawn

    def wait_prepared(self, wanted: SpanWanted) -> SummaryOutcome | None:
        """The prepared outcome, waiting up to `wanted.timeout`; None when there is none.

        A preparation still waiting for a slot is withdrawn, not waited for: None at once.
        """
        prep = self._ready(wanted)
        if prep is None or self._still_queued(wanted, prep):
            return None
        if not prep.done.is_set():
            loop = prep.loop
            if loop is not None and loop.is_running() and _loop_of_this_thread(loop):
                return None  # its task cannot run while this thread blocks its loop
            if not prep.done.wait(wanted.timeout):
                return None
        return self._take(wanted, prep)

    async def await_prepared(self, wanted: SpanWanted) -> SummaryOutcome | None:
        """Async `wait_prepared`."""
        prep = self._ready(wanted)
        if prep is None or self._still_queued(wanted, prep):
            return None
        if not prep.done.is_set():
            try:
                if prep.task is not None and prep.loop is asyncio.get_running_loop():
                    await asyncio.wait_for(asyncio.shield(prep.task), wanted.timeout)
                else:  # started by a sync build (or another loop): wait off the loop
                    await asyncio.wait_for(asyncio.to_thread(prep.done.wait), wanted.timeout)
            except asyncio.TimeoutError:
                return None
        return self._take(wanted, prep) if prep.done.is_set() else None

    def pending(self, key: str) -> str | None:
        """The digest of the thread's preparation (waiting for a slot, running or ready)."""
        with self._lock:
            prep = self._preps.peek(key)
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
    """The summarizer's plan factory, run in the background (a preparation holds its slot)."""
    wait_seconds: float | None
    """Longest wait at the trigger for a preparation still running (`None`: until it ends)."""
    summarize_now: SummarizePlan
    """Summarizes in the build when nothing prepared is ready: under the cap on summarizer
    calls in flight, never waiting for a slot (`SummarySlots.plan`)."""

    def has(self, digest: str) -> bool:
        """Whether the thread's preparation is of `digest` (waiting, running or ready).

        Starting it again would change nothing, so a build need not work out what it reads.
        """
        return self.preparer.pending(self.key) == digest

    def plan_start(
        self, digest: str, messages: Sequence[BaseMessage], previous: str | None
    ) -> Plan[bool]:
        """Start preparing `messages` (idempotent); the plan returns whether it started."""
        span = SpanToPrepare(self.key, digest, self.summarize, tuple(messages), previous)
        started = yield MethodCall(self.preparer, "start", (span,))
        return bool(started)

    def plan_outcome(
        self,
        digest: str,
        read: Callable[[], list[BaseMessage]],
        previous: str | None,
        note: dict[str, Any],
    ) -> Plan[Any]:
        """The prepared outcome of `digest`, else the summarizer's (`note["ahead"]` says which).

        `read` gives the span as the summarizer reads it; called only to summarize now.
        """
        wanted = SpanWanted(self.key, digest, self.wait_seconds)
        outcome = yield MethodCall(self.preparer, "wait_prepared", (wanted,))
        if outcome is not None:
            note["ahead"] = "prepared"
            return outcome
        note["ahead"] = "not ready: summarized now"
        return (yield from self.summarize_now(read(), previous))
