import langgraph_ctx

EXPECTED = [
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


def test_all_is_sorted_and_pinned() -> None:
    assert langgraph_ctx.__all__ == sorted(langgraph_ctx.__all__)
    assert langgraph_ctx.__all__ == EXPECTED


def test_every_public_name_has_a_docstring() -> None:
    missing = [
        name
        for name in langgraph_ctx.__all__
        if not (getattr(getattr(langgraph_ctx, name), "__doc__", None) or "").strip()
    ]
    # TokenCounter is a type alias; its documentation lives in tokens.py next to it.
    assert missing in ([], ["TokenCounter"])
