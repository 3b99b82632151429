"""Replaying recorded threads and measuring them, for the command line and the benchmarks.

* `measure`: what a prompt costs (effective cost, cache-reusable tokens), whether it is valid,
  and next-step recall (what the next step used that the prompt still shows), with the
  one-search recall of the archive search.
* `settings`: the settings `langgraph-ctx frontier` and `python -m benchmarks.cost_sweep`
  compare (the defaults and their neighbours), reading a user's setting and saying how to
  apply one.

Below `langgraph_ctx.cli` (which prints, parses options and reads files) and above the graph
layer: the benchmarks import from here, never from the command line.
"""
