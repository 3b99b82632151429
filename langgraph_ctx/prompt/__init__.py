"""What the model will see: the prompt view of one build, and every piece it is written with.

- `view`: `PromptView`, the prompt of one build as strategies read and edit it.
- `report`: the token budget (`ContextBudget`) and the `context_cost` report of a build.
- `render`: placeholders, notes, the summary message, the render cache; `assembly`: the base
  system prompt, its fragments and the tools.
- `excerpt`: which lines of a tool output stay in view once it is shortened.
- `markup`, `sections`, `fallback`: the package's tags, the four sections of a summary and the
  deterministic fallback summary.
"""
