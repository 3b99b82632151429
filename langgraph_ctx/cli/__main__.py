"""`python -m langgraph_ctx.cli`: the same as the `langgraph-ctx` console script."""

from langgraph_ctx.cli import main

raise SystemExit(main())
