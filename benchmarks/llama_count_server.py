"""A counting stand-in for llama-cpp-python's server: its chat template and tokenizer, no model.

Run with the Python of `.venv-llama` (`make llama_cpp` installs it), not the package's:

    .venv-llama/bin/python benchmarks/llama_count_server.py --model PATH.gguf --port 8080

It answers `POST /v1/chat/completions` as llama-cpp-python's OpenAI-compatible server does for
what the context manager sees: the prompt is rendered by llama-cpp-python's own
`Jinja2ChatFormatter` with the GGUF's chat template (SmolLM2's shows each message's text and
nothing else) and tokenized by the GGUF's vocabulary exactly as `Llama.create_completion` does
(`tokenize(prompt, special=True)`, the BOS token first), so `usage.prompt_tokens` is the
server's; a prompt of `n_ctx` tokens or more gets the server's HTTP 400
(`context_length_exceeded`). The model is never evaluated (the reply is one word): a 135M model
evaluates about 60 prompt tokens a second on a shared two-core CPU, too slow to replay hundreds
of recorded calls, and the benchmark replaces every reply anyway (`benchmarks.llama_cpp`).

Stands alone: it imports only llama-cpp-python and the standard library.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def counter(model_path: str) -> Any:
    """`count(messages, tools) -> prompt tokens`, as llama-cpp-python's server counts."""
    here = __file__.rsplit("/", 1)[0]
    sys.path[:] = [p for p in sys.path if p not in (here, "")]  # not `benchmarks/llama_cpp.py`
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    llama = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    metadata = llama.metadata
    eos = llama._model.token_get_text(int(metadata["tokenizer.ggml.eos_token_id"]))
    bos = llama._model.token_get_text(int(metadata["tokenizer.ggml.bos_token_id"]))
    formatter = Jinja2ChatFormatter(metadata["tokenizer.chat_template"], eos, bos)

    def count(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        prompt = formatter(messages=messages, tools=tools).prompt
        return len(llama.tokenize(prompt.encode("utf-8"), special=True))

    return count


def serve(model_path: str, port: int, n_ctx: int) -> None:
    """Answer on 127.0.0.1:`port` until killed."""
    count = counter(model_path)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, {"object": "list", "data": [{"id": model_path, "object": "model"}]})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            try:
                tokens = count(request["messages"], request.get("tools"))
            except Exception as exc:  # the template's own failure (e.g. a None content)
                self._send(500, {"error": {"message": str(exc), "type": "internal_error"}})
                return
            if tokens >= n_ctx:
                message = (
                    f"This model's maximum context length is {n_ctx} tokens. However, you "
                    f"requested {tokens} tokens ({tokens} in the messages, None in the "
                    "completion). Please reduce the length of the messages or completion."
                )
                error = {"message": message, "type": "invalid_request_error"}
                self._send(400, {"error": {**error, "code": "context_length_exceeded"}})
                return
            self._send(
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": request.get("model", "local"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Hello"},
                            "finish_reason": "length",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": tokens,
                        "completion_tokens": 1,
                        "total_tokens": tokens + 1,
                    },
                },
            )

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> None:
    """Parse the arguments and serve."""
    parser = argparse.ArgumentParser(prog="llama_count_server.py")
    parser.add_argument("--model", required=True, help="the GGUF whose template and vocabulary")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n_ctx", type=int, default=4096)
    args = parser.parse_args()
    serve(args.model, args.port, args.n_ctx)


if __name__ == "__main__":
    main()
