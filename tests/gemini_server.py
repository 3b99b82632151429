"""A fake Gemini token-count endpoint on 127.0.0.1 (`POST .../models/{model}:countTokens`).

google-genai posts the Developer API's count to `/v1beta/models/{model}:countTokens` and Vertex
AI's to `/v1beta1/publishers/google/models/{model}:countTokens`; both answer
`{"totalTokens": n}`. The count is deterministic, so a test can work it out: a quarter of the
characters (rounded up) of every text part, of every other part as JSON (function calls and
responses), of the system instruction and of the tools as JSON, plus 3 per content. It reads
each request form: plain `contents` (and Vertex AI's `systemInstruction` and `tools` beside
them), or the Developer API's `generateContentRequest`, refused with HTTP 400 when `contents`
are sent too, as the API's reference says never to. `fail` makes it answer HTTP 500 instead.
Start and stop it with `with GeminiCountServer() as server:` and give
`ChatGoogleGenerativeAI(base_url=server.url, api_key="test-key")`.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar

from tests.local_server import CountServer


def _chars(part: dict[str, Any]) -> int:
    text = part.get("text")
    return len(text) if isinstance(text, str) else len(json.dumps(part, sort_keys=True))


def count_request(request: dict[str, Any]) -> int:
    """Tokens of a count request: characters / 4 of what it holds, 3 per content."""
    body = request.get("generateContentRequest") or request
    contents = body.get("contents") or []
    system = body.get("systemInstruction")
    chars = sum(_chars(p) for c in [*contents, system] if c for p in c.get("parts") or [])
    chars += sum(len(json.dumps(t, sort_keys=True)) for t in body.get("tools") or [])
    return math.ceil(chars / 4) + 3 * len(contents)


class GeminiCountServer(CountServer):
    """The server; `url` is the `base_url` to give `ChatGoogleGenerativeAI`; `fail` answers 500."""

    route = ":countTokens"
    uses_tokenizer: ClassVar[bool] = False
    not_found: ClassVar[dict[str, Any]] = {
        "error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}
    }

    def __init__(self) -> None:
        self.answers: list[int] = []
        """The count answered to each of `requests`."""
        super().__init__()

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """`{"totalTokens": n}`; 400 for both request forms at once; 500 while `fail` is set."""
        if self.fail:
            error = {"code": 500, "message": "Internal error", "status": "INTERNAL"}
            return 500, {"error": error}
        if request.get("generateContentRequest") and request.get("contents"):
            message = "contents and generateContentRequest are mutually exclusive"
            return 400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
        tokens = count_request(request)
        self.requests.append(request)
        self.answers.append(tokens)
        return 200, {"totalTokens": tokens}
