"""State schemas that carry the context ledger next to the messages.

The ledger is plain JSON-able data (see `langgraph_ctx.ledger`) merged key by key, so it works
with the standard `add_messages` reducer, every checkpointer and `LANGGRAPH_STRICT_MSGPACK=true`.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain.agents import AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from typing_extensions import NotRequired, TypedDict

from langgraph_ctx.ledger.repair import merge_ledger

Ledger = Annotated[dict[str, Any], merge_ledger]
"""The ledger channel: later updates replace earlier values key by key."""


class ContextState(TypedDict):
    """State for a hand-built `StateGraph`: messages, the ledger, and the model's input.

    The context node writes `llm_input_messages` (what the model receives) and `context_ledger`
    (the ledger); the model node reads `llm_input_messages`.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    context_ledger: NotRequired[Ledger]
    llm_input_messages: NotRequired[list[AnyMessage]]


class ContextAgentState(AgentState[Any]):
    """`create_agent` state with the ledger (used by `ContextMiddleware`).

    The ledger is the middleware's own bookkeeping, private as LangChain's middleware keep
    theirs (`PrivateStateAttr`): it is checkpointed with the thread (`graph.get_state(config)
    .values["context_ledger"]`) but is not part of the agent's input or output, and a host
    that runs agents inside agents (deepagents' `task` tool) neither hands it to a subagent
    nor merges a subagent's back into the parent's.
    """

    context_ledger: NotRequired[Annotated[Ledger, PrivateStateAttr]]


class ContextReactState(TypedDict):
    """State for `create_react_agent(..., state_schema=ContextReactState)` with our hook."""

    messages: Annotated[list[AnyMessage], add_messages]
    remaining_steps: NotRequired[RemainingSteps]
    context_ledger: NotRequired[Ledger]
    llm_input_messages: NotRequired[list[AnyMessage]]
