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
from typing import Any, ClassVar

from tests.local_server import CountServer, tokenizer


def count_request(request: dict[str, Any]) -> int:
    """Tokens of a count request: its system, messages and tools as JSON, 3 per message."""
    system = request.get("system") or ""
    messages = request.get("messages") or []
    tools = request.get("tools") or []
    text = json.dumps(system) + "".join(json.dumps(m["content"]) for m in messages)
    text += "".join(json.dumps(t, sort_keys=True) for t in tools)
    return len(tokenizer().encode(text)) + 3 * len(messages) + (300 if tools else 0)


class AnthropicCountServer(CountServer):
    """The server; `url` is the `base_url` to give `ChatAnthropic`; `fail` answers 529."""

    route = "/v1/messages/count_tokens"
    not_found: ClassVar[dict[str, Any]] = {"type": "error", "error": {"type": "not_found_error"}}

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """`{"input_tokens": n}`, or 529 while `fail` is set."""
        if self.fail:
            return 529, {"type": "error", "error": {"type": "overloaded_error"}}
        self.requests.append(request)
        return 200, {"input_tokens": count_request(request)}
