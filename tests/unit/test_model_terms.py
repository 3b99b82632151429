"""Which counter and which window a called model gets is read off each model object once."""

from __future__ import annotations

import gc
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from langgraph_ctx import ContextMemory
from langgraph_ctx.tokens.models import CallCounters


class CountingProfileModel(GenericFakeChatModel):
    """A fake chat model that counts how often its profile is read."""

    reads: int = 0

    def __getattribute__(self, name: str) -> Any:
        if name == "profile":
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
        return super().__getattribute__(name)


def _model(window: int) -> CountingProfileModel:
    model = CountingProfileModel(messages=iter(()))
    model.profile = {"max_input_tokens": window}
    return model


def test_a_called_model_is_resolved_once_however_many_calls_go_to_it() -> None:
    memory = ContextMemory(context_window_tokens=32_000)
    fallback = _model(8_000)
    fallback.reads = 0
    windows = {memory.window_for(fallback) for _ in range(50)}
    counters = {id(memory.counter_for(fallback)) for _ in range(50)}
    assert windows == {8_000}  # the smaller profile bounds the call
    assert len(counters) == 1
    assert fallback.reads == 1


def test_the_resolution_is_forgotten_with_the_model() -> None:
    calls = CallCounters()
    model = _model(4_000)
    assert calls.window_for(model, configured_model=None, configured=32_000) == 4_000
    assert len(calls._terms) == 1
    del model
    gc.collect()
    assert calls._terms == {}


def test_a_new_model_object_at_a_reused_address_is_read_afresh() -> None:
    calls = CallCounters()
    first = _model(4_000)
    assert calls.terms(first).window == 4_000
    key = id(first)
    second = _model(2_000)
    calls._terms[id(second)] = calls._terms.pop(key)  # as if the address were reused
    assert calls.terms(second).window == 2_000
