"""Summaries and the other model calls a build makes for itself.

- `summarizer`: `Summarizer`, a structured running summary from any chat model, with the
  deterministic fallback (with `transcript`: what the model reads, `validation`: what its
  answer must be).
- `preparer`: summaries prepared ahead, in the background (`SummaryPreparer`, `AheadBinding`).
- `slots`: the cap on summarizer calls in flight, shared by every summary of a manager
  (`SummarySlots`, `max_summaries_in_flight`).
- `extract`: `EntityExtractor`, entity state kept up to date by a structured-output call.
- `rebuild`: the rebuild from a compression hint between graph steps.
- `internal_calls`: how those model calls are marked internal (LangChain's convention), so no
  token of them reaches the user's stream.

The strategies reach these only through the build's `Resources` (plans), never by import.
"""
