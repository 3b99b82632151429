"""What is known about the model a call goes to: its terms, and what the ledger learned of it.

Middleware placed inside `ContextMiddleware` may change a request after the build: add to the
system prompt or tools, drop `recall`, call a fallback model with a smaller window. The call
guard (`graph/guard.py`) measures what the model received (`Received`); this module holds what
follows from it, as values:

- `Target`: the model a build is made for, with its counter and window, looked up once per call.
- `CalledModel`: what the ledger's `called` entry says (`CalledEntry`): the tokens the inner
  middleware add, the smallest window called and the model that has it, whether `recall` is
  bound. Read from the ledger, updated after a call that passed or one that was refused, and
  written back as the same JSON.
- `KnownModels`: the models this process saw called, so a fallback the ledger names is found
  again and built for from the first attempt.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from langgraph_ctx.ledger.schema import CalledEntry
from langgraph_ctx.tokens._providers import ls_params
from langgraph_ctx.tokens.counter import TokenCounter


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
        self._lock = threading.Lock()
        self._models: OrderedDict[int, Any] = OrderedDict()

    def update(self, models: Sequence[Any]) -> None:
        """Remember `models` (the newest last; the oldest beyond `size` are forgotten)."""
        with self._lock:
            for model in models:
                self._models[id(model)] = model  # kept alive here: the id is not reused
                self._models.move_to_end(id(model))
            while len(self._models) > self.size:
                self._models.popitem(last=False)

    def models(self) -> list[Any]:
        """The models remembered, oldest first."""
        with self._lock:
            return list(self._models.values())
