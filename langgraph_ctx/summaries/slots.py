"""The cap on summarizer calls in flight: `SummarySlots`, one per manager.

Every summarizer call a manager makes (`ContextManager(max_summaries_in_flight=...)`) holds a
slot while it runs: the summaries made in a build (`SlidingWindow(summarize=True)`,
`DynamicSummarization`, a prepared summary not ready at the trigger), the rebuild from a
compression hint, and the summaries prepared in the background (`SummaryPreparer`). At most
`max_in_flight` slots are held at once, across every thread of the manager, in worker threads
and event loops alike, so a provider's rate limit holds however many threads share the memory.

The two kinds of callers differ in whether they may wait:

- A summary due in a build never waits for a slot (the agent's model call would wait with it).
  With none free, `plan` returns the deterministic summary (`Summarizer.fallback`), the one a
  failing summarizer falls back to: nothing leaves the prompt without a summary, and the
  insurance dump was written before. `SummaryOutcome.error` says why (`summarizer busy: ...`),
  so the `context_cost` report's decision does.
- A preparation waits for one, in its worker thread or task, oldest first (`enqueue`,
  `grant`): nobody waits for it, and a build at the trigger withdraws one still waiting.

A build's call takes a free slot ahead of the waiting preparations: it is due now.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import Plan

if TYPE_CHECKING:
    from langgraph_ctx.summaries.summarizer import Summarizer, SummaryOutcome

logger = logging.getLogger("langgraph_ctx.summarize")
"""Where a summary made deterministic for want of a slot is noted (at INFO)."""

DEFAULT_MAX_IN_FLIGHT = 16
"""The default cap on summarizer calls in flight per manager (see `ContextManager`).

16 calls of about 2 s at once are about 480 requests a minute, within an entry-tier provider
limit (500 RPM), and enough that most summaries of a burst of threads reaching their triggers
together are still the model's (how many: docs/benchmarks.md, load)."""


class Waiter(Protocol):
    """A preparation waiting for a slot (`SummaryPreparer`'s own record of one)."""

    running: bool
    """It holds a slot (set by `SummarySlots.grant`)."""
    wake: Callable[[], None] | None
    """Wakes it when a slot may be free; called under the slots' lock."""

    def gone(self) -> bool:
        """It will not take a slot any more (withdrawn, or its event loop closed)."""
        ...


class SummarySlots:
    """At most `max_in_flight` summarizer calls at once, across every thread of a manager.

    Thread-safe: one lock (`lock`), shared with the `SummaryPreparer` that uses these slots,
    so withdrawing a waiting preparation and granting it a slot never race.

    Args:
        max_in_flight: Summarizer calls at once, at most (None: no cap).

    Attributes:
        peak_in_flight: The most summarizer calls held at once (never above the cap).
        peak_background: The most background preparations among them at once.
        calls: Summaries that took a slot (each may make several model calls, one at a time:
            chunks and retries).
        busy: Summaries due in a build that found no slot free: the deterministic summary
            stood in for each.
    """

    def __init__(self, max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT) -> None:
        self.max_in_flight = max_in_flight
        self.lock = threading.Lock()
        """Guards the counts and the queue (and the preparer's records, which share it)."""
        self.in_flight = 0
        """Slots held now."""
        self.background = 0
        """Slots held now by background preparations."""
        self.peak_in_flight = 0
        self.peak_background = 0
        self.calls = 0
        self.busy = 0
        self._waiting: deque[Waiter] = deque()

    # --- under the lock ------------------------------------------------------------------

    def free(self) -> bool:
        """Under the lock: whether a slot is free."""
        return self.max_in_flight is None or self.in_flight < self.max_in_flight

    def _take(self, background: bool) -> None:
        self.in_flight += 1
        self.calls += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        if background:
            self.background += 1
            self.peak_background = max(self.peak_background, self.background)

    def _drop_gone(self) -> None:
        while self._waiting and self._waiting[0].gone():
            self._waiting.popleft()

    def wake_head(self) -> None:
        """Under the lock: wake the oldest waiting preparation when a slot is free."""
        self._drop_gone()
        wake = self._waiting[0].wake if self.free() and self._waiting else None
        if wake is not None:
            wake()

    def grant(self, waiter: Waiter) -> bool:
        """Under the lock: give `waiter` a slot if one is free and it is the oldest waiting.

        Returns whether it got one (`waiter.running` is then set).
        """
        self._drop_gone()
        if waiter.gone() or not self.free():
            return False
        if self._waiting and self._waiting[0] is not waiter:
            return False
        if self._waiting:
            self._waiting.popleft()
        waiter.running = True
        self._take(background=True)
        self.wake_head()  # with no cap, the next one may go too
        return True

    def enqueue(self, waiter: Waiter) -> bool:
        """Under the lock: a slot for `waiter` now, or a place in the queue; whether it got one."""
        if self.grant(waiter):
            return True
        if not waiter.gone():
            self._waiting.append(waiter)
        return False

    # --- taking and giving back ----------------------------------------------------------

    def try_take(self) -> str | None:
        """Take a slot for a build's own summary if one is free, never waiting.

        Returns:
            None when it took one, else why not (the summary's `error`, `busy_reason`).
        """
        with self.lock:
            if not self.free():
                self.busy += 1
                return self.busy_reason()
            self._take(background=False)
            return None

    def release(self, *, background: bool) -> None:
        """A summarizer call that held a slot ended: the slot goes to the oldest waiting."""
        with self.lock:
            self.in_flight -= 1
            self.background -= background
            self.wake_head()

    def busy_reason(self) -> str:
        """Under the lock: why a build's summary is the deterministic one (its `error`)."""
        return (
            f"summarizer busy: {self.in_flight} calls in flight "
            f"(max_summaries_in_flight={self.max_in_flight}); the deterministic summary "
            "stands in"
        )

    # --- the build's summaries -----------------------------------------------------------

    def plan(
        self,
        summarizer: Summarizer,
        messages: Sequence[BaseMessage],
        previous: str | None = None,
    ) -> Plan[SummaryOutcome]:
        """`summarizer.plan` holding a slot; the deterministic summary when none is free.

        Never waits for a slot. A summary that calls no model (no model, nothing to
        summarize) takes none.
        """
        if summarizer.model is None or not messages:
            return (yield from summarizer.plan(messages, previous))
        reason = self.try_take()
        if reason is not None:
            logger.info("%s", reason)
            return summarizer.fallback(messages, previous, error=reason)
        try:
            return (yield from summarizer.plan(messages, previous))
        finally:
            self.release(background=False)

    def gate(self, summarizer: Summarizer) -> Callable[[list[BaseMessage], str | None], Plan[Any]]:
        """`summarizer`'s plan factory under the cap (`plan`), for a build's `Resources`."""
        return functools.partial(self.plan, summarizer)
