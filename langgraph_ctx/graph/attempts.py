"""One model call's attempts: what each is built for, what the calls taught, what comes next.

Middleware placed inside `ContextMiddleware` may change a request after the build: add to the
system prompt or tools, drop `recall`, call a fallback model with a smaller window. The call
guard (`graph/guard.py`) measures what the model received (`Received`) and refuses a call that
cannot fit (`CallRefused`); this module holds what follows from it, as values and pure
decisions:

- `Target`: the model a build is made for, with its counter and window, looked up once per call.
- `CalledModel`: what the ledger's `called` entry says (`CalledEntry`): the tokens the inner
  middleware add, the smallest window called and the model that has it, whether `recall` is
  bound. Read from the ledger, updated after a call that passed or one that was refused, and
  written back as the same JSON.
- `KnownModels`: the models this process saw called, so a fallback the ledger names is found
  again and built for from the first attempt.
- `Attempt`: one build of the call; `Attempt.first` is the first, `after_failure` decides the
  next one or the error to raise. A refusal must teach something (a smaller window, a larger
  addition, `recall` unbound, another model's counter), and the call is rebuilt for it, at
  most `MAX_REBUILDS` times; a refusal that teaches nothing proves the call cannot fit, and
  the error names the cause. A provider overflow (`errors.is_context_overflow`) is rebuilt
  once against a smaller window (`Attempt.harder`). Any other failure is raised as it came.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from langgraph_ctx._lru import LRUCache
from langgraph_ctx.errors import (
    ContextWindowExceededError,
    ModelCallRefusedError,
    is_context_overflow,
)
from langgraph_ctx.ledger.schema import CalledEntry
from langgraph_ctx.tokens._providers import ls_params
from langgraph_ctx.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from langgraph_ctx.prompt.report import ContextCostReport

MAX_REBUILDS = 4
"""Rebuilds of one model call after refusals; each must have taught something."""


class ModelTerms(Protocol):
    """Where a called model's counter and window are looked up (`ContextMemory` is one)."""

    def counter_for(self, model: Any = None) -> TokenCounter:
        """The token counter of a call to `model`."""
        ...

    def window_for(self, model: Any = None) -> int:
        """The window of a call to `model`."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class Target:
    """The model a build is made for, with its counter and its window (looked up once).

    Compared by identity: a target is the one built for, or another.
    """

    model: Any
    counter: Any
    window: int
    """The model's own window (`ContextMemory.window_for`), before what was learned."""

    @classmethod
    def of(cls, model: Any, terms: ModelTerms) -> Target:
        """`model`'s counter and window, as `terms` gives them."""
        return cls(model, terms.counter_for(model), terms.window_for(model))


@dataclass(frozen=True, slots=True)
class Received:
    """One model call as the model received it (measured by the call guard)."""

    tokens: int
    """Messages and tools, counted with the called model's counter."""
    limit: int
    """The called model's budget (its window minus the reserved output)."""
    window: int
    """The called model's window."""
    added: int | None
    """Tokens over what the build sent (the built-for model only; None for another model)."""
    unchanged: bool
    """The built-for model received no more than the build, in the window it was built for."""
    recall_bound: bool
    """The call binds the `recall` tool (True when the agent has none to bind)."""
    names_recall: bool
    """The prompt tells the model to call `recall(ref=...)`."""
    parts: Mapping[str, float] | None = None
    """The raw estimate by part of what the built-for model received over the build (the
    calibration pairs the reply's count with it); None when unknown or another model's."""
    model: Any = field(default=None, compare=False, repr=False)
    """The model called (of the ambiguous ones, the one with the smallest window)."""
    counter: Any = field(default=None, compare=False, repr=False)
    """The counter the call was counted with (the called model's)."""

    @property
    def recall_unbound(self) -> bool:
        """The prompt names `recall(ref=...)` but the call binds no `recall` tool."""
        return self.names_recall and not self.recall_bound

    @property
    def refused(self) -> bool:
        """Whether the call must not reach the provider."""
        return (self.tokens > self.limit and not self.unchanged) or self.recall_unbound

    def target(self) -> Target | None:
        """The target to build for after this call was refused: the model called.

        None when the call was counted with the build's counter (the built-for model).
        """
        if self.added is not None or self.model is None:
            return None
        return Target(self.model, self.counter, self.window)


class CallRefused(Exception):
    """Raised by the call guard before a model call that does not fit what the model received."""

    def __init__(self, received: Received) -> None:
        why = (
            f"{received.tokens} tokens over the called model's budget of {received.limit}"
            if received.tokens > received.limit
            else "the prompt names recall(ref=...) but the call binds no recall tool"
        )
        super().__init__(
            f"langgraph_ctx refused a model call a middleware inside ContextMiddleware changed: "
            f"{why}; rebuilding for what the model receives"
        )
        self.received = received


@dataclass(frozen=True, slots=True)
class CalledModel:
    """What the calls the model received taught (the ledger's `called`; see the module)."""

    added: int = 0
    """Tokens the inner middleware added to the last call of the built-for model."""
    window: int | None = None
    """The smallest window a model was called with, when smaller than the configured one."""
    recall_unbound: bool = False
    """The last call bound no `recall` tool: placeholders must not tell the model to call it."""
    model: tuple[str | None, ...] | None = None
    """The model with that smallest window (class, provider, model name)."""

    @classmethod
    def from_ledger(cls, entry: Mapping[str, Any] | None) -> CalledModel:
        """The ledger's `called` entry (None: nothing learned yet)."""
        old = entry or {}
        named = old.get("model")
        return cls(
            added=int(old.get("added", 0)),
            window=old.get("window"),
            recall_unbound=bool(old.get("recall_unbound", False)),
            model=None if named is None else tuple(named),
        )

    def to_ledger(self) -> CalledEntry | None:
        """The ledger's `called` entry; None when nothing was learned (not stored)."""
        if self == CalledModel():
            return None
        entry: CalledEntry = {
            "added": self.added,
            "window": self.window,
            "recall_unbound": self.recall_unbound,
        }
        if self.model is not None:
            entry["model"] = list(self.model)
        return entry

    def after_pass(self, received: Received | None, configured: int) -> CalledModel:
        """What was learned after a call that passed.

        The latest addition measured (a dynamic prompt may grow or shrink), `recall` unbound
        when the call's tools lacked it.
        """
        if received is None:
            return self
        added = self.added if received.added is None else received.added
        return replace(
            self._smallest(received, configured),
            added=added,
            recall_unbound=not received.recall_bound,
        )

    def after_refusal(self, received: Received, configured: int) -> CalledModel:
        """What was learned after a refusal: it only tightens.

        The larger addition, `recall` unbound if either says so: the rebuilds of one model
        call never go back to a prompt already refused.
        """
        added = self.added if received.added is None else max(self.added, received.added)
        return replace(
            self._smallest(received, configured),
            added=added,
            recall_unbound=self.recall_unbound or not received.recall_bound,
        )

    def _smallest(self, received: Received, configured: int) -> CalledModel:
        """A window smaller than `configured` kept as the smallest seen.

        With the identity of the model that has it: a fallback may be called again, and the
        next builds are for it.
        """
        if received.window >= min(configured, self.window or configured):
            return self
        model = self.model if received.model is None else tuple(identity_of(received.model))
        return replace(self, window=received.window, model=model)

    def build_window(self, window: int, *, with_added: bool = True) -> int:
        """The window to build for: the smallest called, less what the inner middleware add."""
        smallest = min(window, self.window or window)
        return max(1, smallest - (self.added if with_added else 0))

    def names(self, model: Any) -> bool:
        """Whether `model` is the one named as having the smallest window."""
        return self.model is not None and identity_of(model) == list(self.model)


def identity_of(model: Any) -> list[str | None]:
    """A model's class, provider and model name, as JSON (the ledger keeps it)."""
    return [None if x is None else str(x) for x in model_identity(model)]


def model_identity(model: Any) -> tuple[Any, Any, Any]:
    """A model's class, provider and model name (how a callback run names the model too)."""
    params = ls_params(model)
    return (type(model).__name__, params.get("ls_provider"), params.get("ls_model_name"))


class KnownModels:
    """The models this middleware saw called, by identity (`CalledModel.names` finds them)."""

    size = 16

    def __init__(self) -> None:
        self._models: LRUCache[int, Any] = LRUCache(max_items=self.size)

    def update(self, models: Sequence[Any]) -> None:
        """Remember `models` (the newest last; the oldest beyond `size` are forgotten)."""
        for model in models:
            self._models.put(id(model), model)  # kept alive here: the id is not reused

    def models(self) -> list[Any]:
        """The models remembered, oldest first."""
        return self._models.values()

    def target(self, requested: Target, called: CalledModel, terms: ModelTerms) -> Target:
        """What to build for: the requested model, or the smaller-window model `called` names.

        The ledger names the model with the smallest window seen (a fallback); when this
        process has seen it, the build counts with its counter from the first attempt, so a
        fallback call is not refused and rebuilt on every step. Another process learns it
        again from one refusal.
        """
        for seen in self.models():
            if seen is not requested.model and called.names(seen):
                return Target.of(seen, terms)
        return requested


@dataclass(frozen=True, slots=True)
class Attempt:
    """One build of a model call: what it is built for, and how many rebuilds came before."""

    target: Target
    """The model the build is for, with its counter and window."""
    called: CalledModel
    """What the calls so far taught (the window to build for follows from it)."""
    requested: Target
    """The model the request names (its window is what `called` keeps a smaller one below)."""
    rebuilds: int = 0
    """Rebuilds of this model call so far."""
    harder: bool = False
    """After a provider overflow: the build assumes a smaller window."""

    @classmethod
    def first(
        cls, model: Any, ledger: Mapping[str, Any] | None, terms: ModelTerms, known: KnownModels
    ) -> Attempt:
        """The first attempt at calling `model`, from what the thread's ledger learned.

        The model's window and counter are looked up here, once per call.
        """
        requested = Target.of(model, terms)
        called = CalledModel.from_ledger((ledger or {}).get("called"))
        return cls(known.target(requested, called, terms), called, requested)

    @property
    def configured(self) -> int:
        """The window of the model the request names."""
        return self.requested.window

    @property
    def window(self) -> int:
        """The window to build for: the target's, less what the calls taught."""
        return self.called.build_window(self.target.window)


def after_failure(
    attempt: Attempt,
    failure: Exception,
    refusal: CallRefused | None,
    report: ContextCostReport,
) -> Attempt | Exception:
    """The next attempt after `failure`, or the error to raise.

    The error is `failure` itself (raise it as it came) or another (raise it from `failure`).

    Args:
        attempt: The attempt that failed.
        failure: What the inner handler raised.
        refusal: The guard's last refusal of the call, if any: a fallback middleware may
            raise another error after it (`failure` itself, when it is a `CallRefused`, wins).
        report: The failed build's report; an error made here fails it and travels on it.
    """
    if isinstance(failure, ContextWindowExceededError):
        return failure
    if isinstance(failure, CallRefused):
        refusal = failure
    if refusal is not None:
        received = refusal.received
        taught = attempt.called.after_refusal(received, attempt.configured)
        target = received.target() or attempt.target
        if (taught == attempt.called and target is attempt.target) or (
            attempt.rebuilds >= MAX_REBUILDS
        ):
            return _cannot_fit(report, refusal, attempt.rebuilds)
        return replace(attempt, called=taught, target=target, rebuilds=attempt.rebuilds + 1)
    if not is_context_overflow(failure):
        return failure
    if attempt.harder:
        return _failed(report, f"the provider still overflowed: {failure}")
    return replace(attempt, harder=True, rebuilds=attempt.rebuilds + 1)


def too_little_left(
    err: ContextWindowExceededError, attempt: Attempt
) -> ContextWindowExceededError:
    """The build for what the model receives failed: say so when inner middleware are why."""
    added = attempt.called.added
    if not added:
        return err
    window = attempt.called.build_window(attempt.target.window, with_added=False)
    msg = (
        f"middleware inside ContextMiddleware adds {added:,} tokens to each model "
        f"call, which leaves too little of the called model's window ({window:,} tokens) for "
        "the conversation; make it add less, or call a model with a larger window"
    )
    return ContextWindowExceededError(msg, err.report)


def _cannot_fit(report: ContextCostReport, refusal: CallRefused, rebuilds: int) -> Exception:
    """The call was rebuilt for everything the refusals taught and is still refused.

    The error's type names the cause: `ContextWindowExceededError` only when the prompt is
    over the called model's budget, `ModelCallRefusedError` otherwise.
    """
    received = refusal.received
    if received.tokens > received.limit:
        return _failed(
            report,
            f"after {rebuilds} rebuild(s) for what the model receives, the called model still "
            f"receives {received.tokens:,} tokens, over its budget of {received.limit:,} "
            f"(window {received.window:,}); make the middleware inside ContextMiddleware add "
            "less, or call a model with a larger window",
        )
    why = (
        f"after {rebuilds} rebuild(s) the model call is still refused: {refusal}; the prompt "
        "names recall(ref=...) in text langgraph_ctx does not own while the call binds no "
        "recall tool. Bind the recall tool (memory.recall_tool()) or set expose_recall=False"
    )
    report.fail(why)
    return ModelCallRefusedError(why, report)


def _failed(report: ContextCostReport, why: str) -> ContextWindowExceededError:
    """Fail the build: its report says why and travels on `ContextWindowExceededError`."""
    report.fail(why)
    return ContextWindowExceededError(str(report.error), report)
