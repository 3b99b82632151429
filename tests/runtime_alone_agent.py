"""An agent on the runtime alone: what a deployment installs, with none of the tools.

Run as a script in a venv that holds the `langgraph-ctx` wheel and not `langgraph-ctx-tools`
(tests/integration/test_runtime_alone.py offline, `make wheel_check` in a clean venv): a
`create_agent` agent with `ContextMiddleware` and langchain_core's fake chat model runs a few
turns over a tool whose outputs overflow the window. It exits non-zero unless every model call
went through the middleware (a `context_cost` report each), the pipeline edited a prompt to fit
it, `langgraph_ctx` came from the installed wheel, and no module of the tools was importable or
imported.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import langgraph_ctx
from langgraph_ctx import ContextMemory
from langgraph_ctx.graph.middleware import ContextMiddleware

TURNS = 3
TOOLS = "langgraph_ctx_tools"


class FakeToolModel(GenericFakeChatModel):
    """langchain_core's fake chat model, which `create_agent` may bind tools to."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FakeToolModel:
        return self


@tool
def read_log(name: str) -> str:
    """Read a service's log."""
    return "\n".join(f"{name} line {i}: request {i * 7} served in {i % 13} ms" for i in range(300))


def main() -> int:
    if importlib.util.find_spec(TOOLS) is not None:
        sys.exit(f"{TOOLS} is importable: this venv holds the tools, not the runtime alone")
    if not langgraph_ctx.__file__ or not langgraph_ctx.__file__.startswith(sys.prefix):
        sys.exit(f"langgraph_ctx imported from {langgraph_ctx.__file__}, not this venv's wheel")
    script: list[AIMessage] = []
    for turn in range(TURNS):
        call = {"name": "read_log", "args": {"name": f"svc{turn}"}, "id": f"call-{turn}"}
        script += [AIMessage("", tool_calls=[call]), AIMessage(f"svc{turn} serves every request.")]
    memory = ContextMemory(context_window_tokens=3_000, reserved_output_tokens=500)
    middleware = memory.middleware()
    assert isinstance(middleware, ContextMiddleware)
    agent = create_agent(
        FakeToolModel(messages=iter(script)),
        [read_log],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "runtime-alone"}}
    for turn in range(TURNS):
        agent.invoke({"messages": [("user", f"Is svc{turn} healthy?")]}, config)
    reports = memory.get_reports(agent, config)
    lines = [report.summary_line() for report in reports]
    if len(reports) != 2 * TURNS:
        sys.exit(f"{len(reports)} context_cost reports for {2 * TURNS} model calls: {lines}")
    if all("(no edits)" in line for line in lines):
        sys.exit(f"no prompt was edited to fit the window: {lines}")
    loaded = sorted(name for name in sys.modules if name.split(".")[0] == TOOLS)
    if loaded:
        sys.exit(f"the runtime imported the tools: {loaded}")
    where = langgraph_ctx.__file__
    print(f"runtime alone: {len(reports)} model calls through ContextMiddleware, from {where}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
