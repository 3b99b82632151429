"""langgraph_ctx: the context-window manager for LangGraph and LangChain agents.

Drop it into an agent and the prompt always fits, never breaks the provider's message rules,
costs as few tokens as possible, keeps the provider's prompt cache warm, loses nothing, and
says what it did (the `context_cost` report).

- `ContextMemory`: create once; gives `.middleware()` for `create_agent`, `.node()` (also the
  `pre_model_hook` of `create_react_agent`) and `.after_turn_node()` for a `StateGraph`,
  `.recall_tool()`, and thread views over a checkpointer.
- `ContextManager`: the pure pipeline behind it (`build` / `abuild`).
- Strategies: `default_strategies()` and the strategies it lists; your own is any object
  with `apply(view: PromptView)` (see `Strategy`).
- `count_tokens` / `TiktokenCounter`: exact OpenAI token counts, offline.
- `ScriptedChatModel`: a chat model replaying a script, to try all this without a key.

Less common pieces live in their modules: `langgraph_ctx.errors` (every error class),
`langgraph_ctx.messages` (blocks, turns, validation), `langgraph_ctx.prompt.fallback`
(`fallback_summary`), `langgraph_ctx.tokens` (`context_window_for`, `prime_tiktoken_cache`).
"""

from langgraph_ctx._effects import Plan
from langgraph_ctx.archive import Archive, ArchiveBackend, DirectoryBackend
from langgraph_ctx.errors import (
    ArchiveError,
    ConfigError,
    ContextWindowExceededError,
    LangGraphCtxError,
)
from langgraph_ctx.graph.memory import ContextMemory
from langgraph_ctx.graph.state import ContextReactState, ContextState
from langgraph_ctx.messages import repair_messages, validate_messages
from langgraph_ctx.pipeline import BuildResult, ContextManager
from langgraph_ctx.prompt.report import ContextBudget, ContextCostReport, Decision
from langgraph_ctx.prompt.view import PromptView
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.strategies import (
    Compaction,
    DropMemory,
    DynamicSummarization,
    EntityExtraction,
    PruneToolOutputs,
    SlidingWindow,
    Strategy,
    default_strategies,
    register_strategy,
    strategies_from_config,
)
from langgraph_ctx.summaries.extract import EntityExtractor
from langgraph_ctx.summaries.summarizer import Summarizer
from langgraph_ctx.tokens import (
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    count_tokens,
    counter_for_model,
)

__all__ = [
    "ApproximateCounter",
    "Archive",
    "ArchiveBackend",
    "ArchiveError",
    "BuildResult",
    "Compaction",
    "ConfigError",
    "ContextBudget",
    "ContextCostReport",
    "ContextManager",
    "ContextMemory",
    "ContextReactState",
    "ContextState",
    "ContextWindowExceededError",
    "Decision",
    "DirectoryBackend",
    "DropMemory",
    "DynamicSummarization",
    "EntityExtraction",
    "EntityExtractor",
    "LangGraphCtxError",
    "Plan",
    "PromptView",
    "PruneToolOutputs",
    "ScriptedChatModel",
    "SlidingWindow",
    "Strategy",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "count_tokens",
    "counter_for_model",
    "default_strategies",
    "register_strategy",
    "repair_messages",
    "strategies_from_config",
    "validate_messages",
]
