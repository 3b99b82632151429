"""`python -m langgraph_ctx_tools.cli`: the same as the `langgraph-ctx` console script."""

from langgraph_ctx_tools.cli import main

raise SystemExit(main())
