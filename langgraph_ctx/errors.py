"""Errors raised by langgraph_ctx.

The hierarchy::

    LangGraphCtxError                      base of everything we raise
    ├── ConfigError (ValueError)           a developer mistake: bad argument, bad strategy config
    ├── TokenizerUnavailableError          offline tiktoken ranks missing or corrupt
    ├── InvalidMessagesError (ValueError)  a message list breaks the provider's rules
    ├── HistoryTooLongError                (kept for compatibility; builds no longer raise it)
    ├── ContextWindowExceededError         the prompt cannot fit the budget; carries the report
    │     (also a langchain_core ContextOverflowError, so existing handlers catch it)
    ├── ModelCallRefusedError (RuntimeError)  a call refused for another cause than the window
    │     that no rebuild could remove; carries the report
    ├── UntrustedCheckpointError (ValueError)  a checkpoint read from a file or database we did
    │     not write names a type outside the allowlist (never imported, never called)
    ├── InputError (ValueError)           a file or option a person gave the command line or a
    │     replay cannot be used
    └── ArchiveError                       the archive could not serve a request
          ├── ArchiveEntryNotFoundError (KeyError)
          ├── ArchiveCorruptError          stored bytes do not match their content address
          └── ArchiveAccessError (PermissionError)   a reference from another thread or a bad path

Every message says what was wrong, shows the value, and says what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.exceptions import ContextOverflowError

if TYPE_CHECKING:
    from langgraph_ctx.prompt.report import ContextCostReport


class LangGraphCtxError(Exception):
    """Base class of every error langgraph_ctx raises."""


class ConfigError(LangGraphCtxError, ValueError):
    """A developer mistake: an argument or strategy config that cannot work."""


class TokenizerUnavailableError(LangGraphCtxError):
    """The offline tiktoken ranks are missing or do not match tiktoken's expected hash."""


class InvalidMessagesError(LangGraphCtxError, ValueError):
    """A message list breaks the provider's rules (orphan tool results, unanswered calls...).

    Attributes:
        problems: One human-readable line per problem found.
    """

    def __init__(self, message: str, problems: list[Any] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class HistoryTooLongError(LangGraphCtxError):
    """The history holds more messages than `max_messages` allows the pipeline to examine.

    No longer raised by a build: `max_messages` now bounds what one build examines (the newest
    messages), so a long thread keeps working. Kept so code that catches it still imports.
    """


class ContextWindowExceededError(LangGraphCtxError, ContextOverflowError):
    """The prompt cannot be made to fit the budget, even after every degradation stage.

    Attributes:
        report: The `context_cost` report of the failed build, with each decision taken.
    """

    def __init__(self, message: str, report: ContextCostReport) -> None:
        super().__init__(message)
        self.report = report


class ModelCallRefusedError(LangGraphCtxError, RuntimeError):
    """A model call refused for a cause other than the window that no rebuild could remove.

    See `langgraph_ctx.graph.guard`: the call guard refused the call, and rebuilding for what
    the model receives did not change what it refused.

    Attributes:
        report: The `context_cost` report of the last build, with an `error` decision.
    """

    def __init__(self, message: str, report: ContextCostReport) -> None:
        super().__init__(message)
        self.report = report


class InputError(LangGraphCtxError, ValueError):
    """A file or option the user gave cannot be used; the message says why and what to do.

    Raised by the command line and the replay layer (`langgraph_ctx_tools.replay`): one line for a
    person, who fixes the file or the option and runs again.
    """


class UntrustedCheckpointError(LangGraphCtxError, ValueError):
    """A checkpoint names a type a LangGraph agent's state does not hold.

    Raised by `langgraph_ctx.graph.serde.StrictSerializer` before anything is imported or
    called: a checkpoint read from a file or database someone handed over is data, and a type
    outside the allowlist (LangChain messages, LangGraph's own types, plain data) is refused.
    """


class ArchiveError(LangGraphCtxError):
    """The archive could not serve a request."""


class ArchiveEntryNotFoundError(ArchiveError, KeyError):
    """No archive entry exists under the reference asked for."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ArchiveCorruptError(ArchiveError):
    """An archive entry exists but its bytes do not match their content address.

    The message ends with `CORRUPT_ADVICE`: the entry cannot be trusted, so the way back is a
    backup of the store (or the checkpoint history, which may still hold the message).
    """

    def __str__(self) -> str:
        return f"{super().__str__().rstrip('.')}. {CORRUPT_ADVICE}"


CORRUPT_ADVICE = (
    "The entry cannot be trusted and is not used: restore it from a backup of the archive "
    "store, or find the original message in the thread's checkpoint history "
    "(graph.get_state_history)"
)
"""What to do about a corrupt archive entry (the end of every `ArchiveCorruptError`)."""


class ArchiveAccessError(ArchiveError, PermissionError):
    """A reference points outside the archive namespace the caller may read."""


OVERFLOW_PHRASES = (
    "exceeds the available context size",  # llama.cpp server (HTTP 400)
    "exceed_context_size_error",  # llama.cpp server's error type
    "context_length_exceeded",  # OpenAI, and servers copying its error code
    "maximum context length",  # OpenAI's message; vLLM
    "prompt is too long",  # Anthropic
    "exceeds the context window",  # OpenAI Responses API
    "input tokens exceed the configured limit",  # Azure OpenAI
)
"""Lowercase phrases of providers' and servers' errors for a prompt over the context window."""


def is_context_overflow(exc: BaseException) -> bool:
    """Whether `exc` is a provider rejecting a prompt that is over its context window.

    LangChain's integrations raise `ContextOverflowError` for the errors they know. Others
    pass through as the client's own error: llama.cpp's server, served through
    `ChatOpenAI(base_url=...)`, answers HTTP 400 "the request exceeds the available context
    size, try increasing it", which `langchain-openai` leaves an `openai.BadRequestError`.
    Those are recognized by `OVERFLOW_PHRASES` in the message or the response body, and only
    on a client error (a status code of 400 or 413, or none).

    Example:
        >>> is_context_overflow(RuntimeError("the request exceeds the available context size"))
        True
        >>> is_context_overflow(RuntimeError("503 service unavailable"))
        False
    """
    if isinstance(exc, ContextOverflowError):
        return True
    status = getattr(exc, "status_code", None)
    if status is not None and status not in (400, 413):
        return False
    text = f"{exc} {getattr(exc, 'body', '')}".lower()
    return any(phrase in text for phrase in OVERFLOW_PHRASES)


ACTING_CHARACTERS: tuple[range, ...] = (
    range(0x00, 0x20),  # C0 controls: ESC starts an OSC title or clipboard write, a CSI clear
    range(0x7F, 0xA0),  # DEL and C1 controls (0x9B is CSI, 0x9D OSC, 0x85 a line break)
    range(0x061C, 0x061D),  # the Arabic letter mark, a bidi control
    range(0x200E, 0x2010),  # left-to-right and right-to-left marks
    range(0x2028, 0x202F),  # line and paragraph separators; bidi embeddings and overrides
    range(0x2066, 0x206A),  # bidi isolates
    range(0xD800, 0xE000),  # lone surrogates: no encoding has them
)
"""Characters a reader acts on rather than shows: untrusted text (a tool output, a model's
words, a file, a checkpoint) shown to a person or a model never carries them as they are. The
one list; each place that shows data chooses how to render them (`cli.output.inert` as
`\\uXXXX` on a terminal, `archive.search_answer` as U+FFFD in a search answer), and which of
tab and newline a block of text keeps."""


def shorten(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters, for showing a bad value in an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reason_of(exc: BaseException) -> str:
    """The first line of `exc`'s message, or its type's name when the message is empty.

    The reason another library gave, short enough to quote inside one of our messages.
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def install_extra(extra: str) -> str:
    """How to add the package's `extra` (`postgres`) today, for a message that needs it.

    The package is not on a package index yet, so `pip install "langgraph-ctx[postgres]"` would
    fail: a clone installs itself editable, a built wheel is installed with the extra named.
    """
    return (
        f'pip install -e ".[{extra}]" in a clone, or pip install "<the built wheel>[{extra}]" '
        "(README: Install)"
    )
