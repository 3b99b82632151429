"""The background half of summaries prepared ahead: `SummaryPreparer` (see `strategies.ahead`).

It performs the `PrepareSummary` and `AwaitPrepared` effects: a preparation runs in a daemon
worker thread (sync driver) or as an asyncio task (async driver), one per thread at a time,
and its outcome is kept in memory until a build takes it.

At most `max_in_flight` preparations call the summarizer at once, across every thread of the
manager (a provider's rate limit): the others wait for a slot, oldest first, in their worker
thread or task, so the build that started them never waits. A build at the trigger whose
preparation is still waiting for a slot withdraws it and summarizes in its own call, as when a
preparation is not ready (`AheadBinding.plan_outcome`); that call holds a slot too while it
runs, without waiting for one.

`AheadBinding` is the preparer as one build of one thread uses it (`Resources.ahead`): the
strategies start a preparation and take its outcome through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import AwaitPrepared, Plan, PrepareSummary, arun_plan, run_plan
from langgraph_ctx.strategies.ahead import SummarizePlan

if TYPE_CHECKING:
    from langgraph_ctx.summaries.summarizer import SummaryOutcome


DEFAULT_MAX_IN_FLIGHT = 4
"""The default cap on summarizer calls in flight per manager (see `ContextManager`)."""

POLL_SECONDS = 1.0
"""A preparation waiting for a slot looks again this often, even when nobody wakes it."""


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
        max_in_flight: Preparations calling the summarizer at once, at most, across every
            thread (None: no cap). The others wait for a slot in their worker thread or task,
            oldest first; the builds never wait for one.

    Attributes:
        peak_in_flight: The most summarizer calls this preparer counted at once (background
            preparations plus the calls builds made at the trigger, see `AheadBinding`).
        peak_background: The most background preparations calling the summarizer at once
            (never above `max_in_flight`).
    """

    def __init__(
        self, *, max_threads: int = 1024, max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT
    ) -> None:
        self.max_threads = max_threads
        self.max_in_flight = max_in_flight
        self.peak_in_flight = 0
        self.peak_background = 0
        self._preps: OrderedDict[str, _Prep] = OrderedDict()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._background = 0
        self._waiting: deque[_Prep] = deque()

    def _claim(self, effect: PrepareSummary) -> _Prep | None:
        """A new preparation for `effect`, or None when one exists or another still runs.

        The thread's preparation of another span that is still waiting for a slot is
        withdrawn and replaced (it has cost nothing yet); one that runs is let finish.
        """
        with self._lock:
            prep = self._preps.get(effect.key)
            if prep is not None and prep.digest != effect.digest:
                self._withdraw(prep)
            if prep is not None and (prep.digest == effect.digest or not prep.done.is_set()):
                return None  # the same span, or the thread's other preparation still runs
            prep = _Prep(effect.digest)
            self._preps[effect.key] = prep
            self._preps.move_to_end(effect.key)
            while len(self._preps) > self.max_threads:
                self._withdraw(self._preps.popitem(last=False)[1])
            return prep

    # --- slots: at most `max_in_flight` summarizer calls at once ---------------------------

    def _grant(self, prep: _Prep | None) -> bool:
        """Under the lock: give `prep` (None: a build's own call) a slot if one is free to it.

        A waiting preparation gets one only at the head of the queue (oldest first); a build's
        own call always gets one (it never waits).
        """
        while self._waiting and self._waiting[0].gone():
            self._waiting.popleft()
        if prep is not None:
            if prep.gone():
                return False
            free = self.max_in_flight is None or self._in_flight < self.max_in_flight
            if not free or (self._waiting and self._waiting[0] is not prep):
                return False
            if self._waiting and self._waiting[0] is prep:
                self._waiting.popleft()
            prep.running = True
            self._background += 1
            self.peak_background = max(self.peak_background, self._background)
        self._in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        self._wake_head()
        return True

    def _wake_head(self) -> None:
        """Under the lock: wake the oldest waiting preparation when a slot is free."""
        free = self.max_in_flight is None or self._in_flight < self.max_in_flight
        wake = self._waiting[0].wake if free and self._waiting else None
        if wake is not None:
            wake()

    def _release(self, background: bool) -> None:
        """A summarizer call counted by `_grant` ended: its slot goes to the oldest waiting."""
        with self._lock:
            self._in_flight -= 1
            self._background -= background
            while self._waiting and self._waiting[0].gone():
                self._waiting.popleft()
            self._wake_head()

    def _withdraw(self, prep: _Prep) -> bool:
        """Under the lock: give up `prep` if it still waits for a slot; whether it did."""
        if prep.running or prep.done.is_set():
            return False
        prep.withdrawn = True
        prep.done.set()
        self._wake_head()  # it may have been the head
        return True

    def _enqueue(self, prep: _Prep, wake: Callable[[], None]) -> bool:
        """Take a slot for `prep` now, or queue it (woken by `wake`); whether it got one."""
        with self._lock:
            prep.wake = wake
            if self._grant(prep):
                return True
            if not prep.gone():
                self._waiting.append(prep)
            return False

    def _acquire(self, prep: _Prep) -> bool:
        """Wait in this worker thread for a slot; False when `prep` was withdrawn meanwhile."""
        event = threading.Event()
        if self._enqueue(prep, event.set):
            return True
        while True:
            event.wait(POLL_SECONDS)
            event.clear()
            with self._lock:
                if prep.gone():
                    return False
                if self._grant(prep):
                    return True

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
                with self._lock:
                    if prep.gone():
                        return False
                    if self._grant(prep):
                        return True
        except BaseException:  # cancelled while waiting: never calls the summarizer
            with self._lock:
                if not prep.running:
                    prep.withdrawn = True
                    self._wake_head()
            raise

    # --- preparations ------------------------------------------------------------------

    def start(self, effect: PrepareSummary) -> bool:
        """Start the preparation in a daemon worker thread (sync driver)."""
        prep = self._claim(effect)
        if prep is None:
            return False

        def work() -> None:
            try:
                if not self._acquire(prep):
                    return
                try:
                    prep.outcome = run_plan(
                        effect.summarize(list(effect.messages), effect.previous)
                    )
                finally:
                    self._release(background=True)
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
                if not await self._aacquire(prep):
                    return
                try:
                    prep.outcome = await arun_plan(
                        effect.summarize(list(effect.messages), effect.previous)
                    )
                finally:
                    self._release(background=True)
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

    def _still_queued(self, effect: AwaitPrepared, prep: _Prep) -> bool:
        """Withdraw `prep` if it still waits for a slot; whether it did.

        The build then summarizes in its own call, as when nothing was prepared, rather than
        wait for a slot and then for the summarizer.
        """
        with self._lock:
            withdrawn = self._withdraw(prep)
            if withdrawn and self._preps.get(effect.key) is prep:
                del self._preps[effect.key]
        return withdrawn

    def wait(self, effect: AwaitPrepared) -> SummaryOutcome | None:
        """The prepared outcome, waiting up to `effect.timeout`; None when there is none.

        A preparation still waiting for a slot is withdrawn, not waited for: None at once.
        """
        prep = self._ready(effect)
        if prep is None or self._still_queued(effect, prep):
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
        if prep is None or self._still_queued(effect, prep):
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
        """The digest of the thread's preparation (waiting for a slot, running or ready)."""
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
        with self.preparer._lock:  # counted in flight, never waiting for a slot
            self.preparer._grant(None)
        try:
            return (yield from self.summarize(messages, previous))
        finally:
            self.preparer._release(background=False)
