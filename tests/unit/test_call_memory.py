"""The middleware's interface to `ContextMemory` (`CallMemory`) says what `ContextMemory` has.

The Protocol restates the signatures it uses; each parameter it declares must be the
implementation's, to the annotation and the default, so the copies can not drift (they had:
`ledger: Any` against a mapping); the implementation may add parameters with defaults.
"""

from __future__ import annotations

import inspect

import pytest

from langgraph_ctx import ContextMemory
from langgraph_ctx.graph.middleware import CallMemory


def _members() -> list[str]:
    return [
        name
        for name, value in vars(CallMemory).items()
        if callable(value) and not name.startswith("_")
    ]


def test_the_interface_names_the_methods_the_middleware_calls() -> None:
    assert {"plan_build", "plan_removals", "plan_after_turn"} <= set(_members())


@pytest.mark.parametrize("name", _members())
def test_each_method_has_the_signature_of_context_memory(name: str) -> None:
    declared = inspect.signature(getattr(CallMemory, name))
    implemented = inspect.signature(getattr(ContextMemory, name))
    assert declared.return_annotation == implemented.return_annotation
    for parameter in declared.parameters.values():
        assert implemented.parameters.get(parameter.name) == parameter, f"{name}: {parameter}"
    extra = set(implemented.parameters) - set(declared.parameters)
    assert all(implemented.parameters[p].default is not inspect.Parameter.empty for p in extra)


def test_context_memory_is_a_call_memory() -> None:
    assert isinstance(ContextMemory(context_window_tokens=8_000), CallMemory)
