"""langgraph_ctx: the context-window manager for LangGraph and LangChain agents."""
