"""langgraph_ctx: the context-window manager for LangGraph and LangChain agents.

Drop it into an agent and the prompt always fits, never breaks the provider's message rules,
costs as few tokens as possible, keeps the provider's prompt cache warm, loses nothing, and
says what it did (the `context_cost` report).

- `ContextMemory`: create once; gives `.middleware()` for `create_agent`, `.node()` and
  `.after_turn_node()` for a `StateGraph`, `.pre_model_hook()` for `create_react_agent`,
  `.recall_tool()`, and thread views over a checkpointer.
- `ContextManager`: the pure pipeline behind it (`build` / `abuild`).
- `count_tokens` / `TiktokenCounter`: exact OpenAI token counts, offline.
"""

from langgraph_ctx._assembly import Skill
from langgraph_ctx._encodings import prime_tiktoken_cache
from langgraph_ctx.archive import (
    Archive,
    ArchiveBackend,
    ArchiveRef,
    DirectoryBackend,
    StoreBackend,
)
from langgraph_ctx.errors import (
    ArchiveAccessError,
    ArchiveCorruptError,
    ArchiveEntryNotFoundError,
    ArchiveError,
    ConfigError,
    ContextWindowExceededError,
    HistoryTooLongError,
    InvalidMessagesError,
    LangGraphCtxError,
    TokenizerUnavailableError,
)
from langgraph_ctx.extract import EntityExtractor
from langgraph_ctx.memory import ContextMemory, afull_history, attach_report, full_history
from langgraph_ctx.messages import (
    Block,
    Problem,
    RepairResult,
    Turn,
    check_messages,
    repair_messages,
    split_blocks,
    split_turns,
    validate_messages,
)
from langgraph_ctx.middleware import ContextMiddleware
from langgraph_ctx.pipeline import BuildResult, ContextManager
from langgraph_ctx.recall import make_recall_tool
from langgraph_ctx.report import ContextBudget, ContextCostReport, Decision
from langgraph_ctx.state import ContextAgentState, ContextReactState, ContextState
from langgraph_ctx.strategies import (
    Compaction,
    DynamicSummarization,
    EntityExtraction,
    SlidingWindow,
    Strategy,
    Summarization,
    register_strategy,
    strategies_from_config,
)
from langgraph_ctx.summarize import Summarizer, SummaryOutcome, fallback_summary
from langgraph_ctx.tokens import (
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    context_window_for,
    count_tokens,
)

__all__ = [
    "ApproximateCounter",
    "Archive",
    "ArchiveAccessError",
    "ArchiveBackend",
    "ArchiveCorruptError",
    "ArchiveEntryNotFoundError",
    "ArchiveError",
    "ArchiveRef",
    "Block",
    "BuildResult",
    "Compaction",
    "ConfigError",
    "ContextAgentState",
    "ContextBudget",
    "ContextCostReport",
    "ContextManager",
    "ContextMemory",
    "ContextMiddleware",
    "ContextReactState",
    "ContextState",
    "ContextWindowExceededError",
    "Decision",
    "DirectoryBackend",
    "DynamicSummarization",
    "EntityExtraction",
    "EntityExtractor",
    "HistoryTooLongError",
    "InvalidMessagesError",
    "LangGraphCtxError",
    "Problem",
    "RepairResult",
    "Skill",
    "SlidingWindow",
    "StoreBackend",
    "Strategy",
    "Summarization",
    "Summarizer",
    "SummaryOutcome",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableError",
    "Turn",
    "afull_history",
    "attach_report",
    "check_messages",
    "context_window_for",
    "count_tokens",
    "fallback_summary",
    "full_history",
    "make_recall_tool",
    "prime_tiktoken_cache",
    "register_strategy",
    "repair_messages",
    "split_blocks",
    "split_turns",
    "strategies_from_config",
    "validate_messages",
]
