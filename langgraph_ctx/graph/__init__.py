"""The LangGraph shells: what a graph, an agent or a UI holds of the package.

- `memory`: `ContextMemory`, the component created once, one class: nodes, middleware,
  recall and search tools, the thread views, and the per-call plans the shells drive (with
  `remove_summarized`: that option's removal of summarized messages from the state,
  `persistence`: the graph's store and checkpointer, `durable`: the archive kept in a durable
  checkpointer's own database when the graph has no store).
- `middleware`: `ContextMiddleware` for `create_agent`, the LangChain adapter; one model call
  reads top-down through `attempts` (the called model's counter and window, what the ledger
  learned of it, and after a failed call: rebuild or raise), `model_request` (the request it
  builds, and the builds a retried call reuses) and `guard` (the call guard that counts what
  the model actually receives).
- `state`: the state schemas carrying the ledger next to the messages.
- `client`: a thread's full history read from a LangGraph server (`langgraph_sdk`).

One model call reads top-down: the shell asks the pipeline (`langgraph_ctx.pipeline`), the
pipeline runs the strategies, the strategies edit the view; nothing below calls back up here.
"""
