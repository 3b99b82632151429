"""Fixtures shared by the reliability tests: the Postgres and checkpointer fixtures of the
integration tests, re-exported so pytest finds them here too (same skip/fail rules: skipped
when `LANGGRAPH_CTX_TEST_POSTGRES_URI` is unset, an error when it is set and unreachable)."""

from tests.integration.conftest import (  # noqa: F401
    checkpointer,
    checkpointer_backend,
    postgres_store,
    postgres_uri,
)
