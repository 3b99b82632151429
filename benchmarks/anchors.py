"""The anchors the benchmarks compare with: `langgraph_ctx_tools.replay.anchors` (and its
deepagents part), the one copy `langgraph-ctx frontier` replays too. The benchmarks give each
anchor that summarizes the summary condition's model
(`langgraph_ctx_tools.replay.summary_models`) explicitly."""

from langgraph_ctx_tools.replay.anchors import (
    ContextEditingAnchor,
    LangmemAnchor,
    LCSummarizationAnchor,
    TrimMessagesAnchor,
)
from langgraph_ctx_tools.replay.anchors_deepagents import (
    DeepagentsAgentAnchor,
    DeepagentsEvictionAnchor,
    DeepagentsSummarizationAnchor,
)

__all__ = [
    "ContextEditingAnchor",
    "DeepagentsAgentAnchor",
    "DeepagentsEvictionAnchor",
    "DeepagentsSummarizationAnchor",
    "LCSummarizationAnchor",
    "LangmemAnchor",
    "TrimMessagesAnchor",
]
