"""A fake OpenAI-compatible chat server on 127.0.0.1 that counts prompts with a real tokenizer.

It behaves like llama.cpp's `llama-server` for what the context manager cares about:

- the prompt is rendered with a ChatML template (`<|im_start|>role\\n...<|im_end|>\\n`, tool
  schemas and tool calls as JSON, as llama.cpp's generic tool template does) and tokenized with
  a real SentencePiece tokenizer that is not OpenAI's: Mistral's v3 vocabulary (32,768 pieces),
  shipped inside the `mistral-common` package, so it works offline;
- a prompt over `n_ctx` tokens is rejected with HTTP 400 and llama.cpp's body
  (`"the request exceeds the available context size, try increasing it"`,
  `type: exceed_context_size_error`);
- every answer reports `usage.prompt_tokens`, the real count of the prompt.

The replies come from `policy(messages, tools) -> message dict`, so a test scripts an agent.
Start and stop it with `with LocalChatServer(...) as server:` (a fixture does it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

Policy = Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]

OVERFLOW_MESSAGE = "the request exceeds the available context size, try increasing it"
"""llama.cpp server's error message for a prompt over its context."""


@cache
def tokenizer() -> Any:
    """Mistral's v3 SentencePiece model, from the file `mistral-common` ships."""
    import mistral_common
    import sentencepiece

    path = Path(mistral_common.__file__).parent / "data"
    model = path / "mistral_instruct_tokenizer_240323.model.v3"
    return sentencepiece.SentencePieceProcessor(model_file=str(model))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The ChatML prompt text llama.cpp would build for this request."""
    out = []
    system = [m for m in messages if m.get("role") in ("system", "developer")]
    rest = [m for m in messages if m.get("role") not in ("system", "developer")]
    head = "\n\n".join(_text(m.get("content")) for m in system)
    if tools:
        head += "\n\n# Tools\n<tools>\n"
        head += "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in tools)
        head += '\n</tools>\nTo call a tool, answer <tool_call>{"name": ..., "arguments": ...}'
    if head:
        out.append(f"<|im_start|>system\n{head}<|im_end|>\n")
    for m in rest:
        body = _text(m.get("content"))
        for call in m.get("tool_calls") or []:
            function = call["function"]
            body += (
                f'\n<tool_call>{{"name": "{function["name"]}", '
                f'"arguments": {function["arguments"]}}}</tool_call>'
            )
        role = "tool" if m.get("role") == "tool" else m.get("role", "user")
        out.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def count_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """Tokens of the rendered prompt (BOS included), as the server counts it."""
    return 1 + len(tokenizer().encode(render_prompt(messages, tools)))


class JsonServer:
    """A JSON-over-HTTP server on 127.0.0.1 in a thread; `with` starts and stops it.

    Subclasses answer POSTs to `route` (a path suffix) in `answer(request) -> (status, body)`;
    other paths get `not_found`.
    """

    route = "/"
    not_found: ClassVar[dict[str, Any]] = {"error": {"code": 404, "message": "not found"}}
    uses_tokenizer: ClassVar[bool] = True
    """Load the SentencePiece tokenizer before the first request (a server that counts with it)."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Any:
        if self.uses_tokenizer:
            tokenizer()  # load before the first request
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON body for a request to `route`."""
        raise NotImplementedError

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith(server.route):
                    status, body = 404, server.not_found
                else:
                    status, body = server.answer(request)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # quiet
                return

        return Handler


class CountServer(JsonServer):
    """A provider's fake count endpoint: keeps the requests it answered, fails on demand.

    `url` is the `base_url` to give the provider's chat model.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        """Every count request answered, in order."""
        self.fail = False
        """Answer with the provider's server error to every request while set."""
        super().__init__()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return self.root


class LocalChatServer(JsonServer):
    """The server; `url` is the `base_url` to give `ChatOpenAI`.

    Args:
        policy: Writes each reply (an OpenAI assistant message dict) from the request.
        n_ctx: The context size; longer prompts are rejected like llama.cpp does.
    """

    route = "/chat/completions"

    def __init__(self, policy: Policy, *, n_ctx: int = 4096) -> None:
        self.policy, self.n_ctx = policy, n_ctx
        self.prompt_tokens: list[int] = []
        """The real size of every prompt answered."""
        self.rejected: list[int] = []
        """The real size of every prompt rejected for overflow."""
        super().__init__()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>/v1`."""
        return f"{self.root}/v1"

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A chat completion, or llama.cpp's 400 for a prompt over `n_ctx`."""
        messages, tools = request.get("messages") or [], request.get("tools") or []
        tokens = count_prompt(messages, tools)
        if tokens > self.n_ctx:
            self.rejected.append(tokens)
            error = {
                "code": 400,
                "message": OVERFLOW_MESSAGE,
                "type": "exceed_context_size_error",
                "n_prompt_tokens": tokens,
                "n_ctx": self.n_ctx,
            }
            return 400, {"error": error}
        self.prompt_tokens.append(tokens)
        message = {"role": "assistant", "content": "", **self.policy(messages, tools)}
        completion = len(tokenizer().encode(json.dumps(message)))
        return 200, {
            "id": f"chatcmpl-{len(self.prompt_tokens)}",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model", "local"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": tokens,
                "completion_tokens": completion,
                "total_tokens": tokens + completion,
            },
        }
