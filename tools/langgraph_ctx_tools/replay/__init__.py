"""Replaying recorded threads and measuring them: one engine for the CLI and the benchmarks.

* `engine`: the call-by-call replay of a system through a recorded run (`replay`), its typed
  results (`ReplayResult`, `CallRecord`) and what a replayed system is (`System`).
* `measure`: what a prompt costs (effective cost, cache-reusable and fresh tokens), and
  next-step recall (what the next step used that the prompt still shows), with the
  one-search recall of the archive search.
* `pipeline_system`: our pipeline as `ContextMemory` runs it (`PipelineSystem`), with the one
  check of what restores byte for byte.
* `anchors`, `anchors_deepagents`: what a team would pick instead, each through its own code.
* `models`: what a replayed summarizer costs (`RecordingModel`, `SummarizerMeter`).
* `summary_models`: the summary conditions, one stand-in summarizer for every system
  (`DeterministicSummaryModel`, `ShapeSummaryModel`, `condition_model`).
* `settings`: the settings `langgraph-ctx frontier` and `python -m benchmarks.cost_sweep`
  compare (the defaults and their neighbours), reading a user's setting and saying how to
  apply one.
* `tally`: the frontier's rows (`Tally`), its alternatives and its recommendation.

Below `langgraph_ctx_tools.cli` (which prints, parses options and reads files) and above the graph
layer: the benchmarks import from here, never from the command line.
"""
