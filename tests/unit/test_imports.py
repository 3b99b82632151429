import subprocess
import sys

import langgraph_ctx

EXPECTED = [
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


def test_all_is_sorted_and_pinned() -> None:
    assert langgraph_ctx.__all__ == sorted(langgraph_ctx.__all__)
    assert langgraph_ctx.__all__ == EXPECTED


def test_every_public_name_has_a_docstring() -> None:
    missing = [
        name
        for name in langgraph_ctx.__all__
        if not (getattr(getattr(langgraph_ctx, name), "__doc__", None) or "").strip()
    ]
    # Plan and TokenCounter are type aliases; their documentation lives next to them.
    assert missing in ([], ["Plan", "TokenCounter"])


def test_the_library_loads_no_tool_or_postgres_dependency() -> None:
    # A fresh interpreter: this test process has long imported everything. httpx (under
    # langchain) loads rich for its own command line when click is installed (the test extra's
    # langgraph-cli brings it): the probe counts only what `import langgraph_ctx` adds.
    code = (
        "import sys, httpx, langchain_core, langchain, langgraph; before = set(sys.modules); "
        "import langgraph_ctx; print('\\n'.join(set(sys.modules) - before))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = done.stdout.split()
    assert "langgraph_ctx.tokens" in loaded  # the probe sees the library's own modules
    heavy = ("rich", "psycopg", "psycopg_pool", "langgraph.checkpoint.postgres", "matplotlib")
    heavy += ("langgraph_ctx.cli",)
    assert [n for n in loaded if n in heavy or n.startswith(tuple(f"{h}." for h in heavy))] == []
