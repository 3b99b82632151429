"""Sync and async from one body: plans are generators that yield effects.

A plan (a generator) decides everything on plain data. When it needs I/O (search a store, write
the archive, call a summarizer) it yields an `Effect`; a driver runs the effect and sends the
result back in, or throws the effect's exception into the plan. `run_plan` and `arun_plan` are
the only two drivers, in the spirit of `httpx.Auth.auth_flow`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

Plan = Generator["Effect", Any, T]
"""A generator that yields effects and returns its result."""


@dataclass(frozen=True, slots=True)
class Effect:
    """One piece of I/O a plan asks for, with a sync and an async way to perform it."""

    name: str
    """What it does, for traces and errors (e.g. `archive.put_messages`)."""
    run: Callable[[], Any]
    """Perform the effect synchronously."""
    arun: Callable[[], Awaitable[Any]]
    """Perform the effect asynchronously."""


def run_plan(plan: Plan[T]) -> T:
    """Drive a plan synchronously."""
    try:
        effect = next(plan)
        while True:
            try:
                value = effect.run()
            except Exception as exc:  # handed to the plan, which decides
                effect = plan.throw(exc)
            else:
                effect = plan.send(value)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def arun_plan(plan: Plan[T]) -> T:
    """Drive a plan asynchronously."""
    try:
        effect = next(plan)
        while True:
            try:
                value = await effect.arun()
            except Exception as exc:
                effect = plan.throw(exc)
            else:
                effect = plan.send(value)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def pure(value: T) -> Plan[T]:
    """A plan that yields nothing and returns `value` (handy default for hooks)."""
    return value
    yield  # pragma: no cover - makes this a generator
