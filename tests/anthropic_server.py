"""A fake Anthropic token-count endpoint on 127.0.0.1 (`POST /v1/messages/count_tokens`).

It answers `{"input_tokens": n}` as Anthropic's API does, counting the request's system
prompt, messages and tools with a real tokenizer that is not OpenAI's (Mistral's
SentencePiece, shipped in `mistral-common`), so counts differ from every estimate the package
makes. `fail` makes it answer HTTP 529 (overloaded) instead, the way a provider outage does.
Start and stop it with `with AnthropicCountServer() as server:` and give
`ChatAnthropic(base_url=server.url, api_key="test")`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.local_server import tokenizer


def count_request(request: dict[str, Any]) -> int:
    """Tokens of a count request: its system, messages and tools as JSON, 3 per message."""
    system = request.get("system") or ""
    messages = request.get("messages") or []
    tools = request.get("tools") or []
    text = json.dumps(system) + "".join(json.dumps(m["content"]) for m in messages)
    text += "".join(json.dumps(t, sort_keys=True) for t in tools)
    return len(tokenizer().encode(text)) + 3 * len(messages) + (300 if tools else 0)


class AnthropicCountServer:
    """The server; `url` is the `base_url` to give `ChatAnthropic`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        """Every count request received, in order."""
        self.fail = False
        """Answer 529 (overloaded) to every request while set."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> AnthropicCountServer:
        tokenizer()  # load before the first request
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/v1/messages/count_tokens"):
                    status = 404
                    body: dict[str, Any] = {"type": "error", "error": {"type": "not_found_error"}}
                elif server.fail:
                    status = 529
                    body = {"type": "error", "error": {"type": "overloaded_error"}}
                else:
                    server.requests.append(request)
                    status, body = 200, {"input_tokens": count_request(request)}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # quiet
                return

        return Handler
