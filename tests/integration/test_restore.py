"""`ContextMemory.restore` on an agent whose archive is the graph's own store.

With `create_agent(..., store=InMemoryStore())` and no `archive=`, the archive lives in the
graph's store. Outside a run, `memory.restore(message_id, config)` has no way to know that
store: it reads the memory's in-process archive (the one of graphs with no store and in-memory
checkpoints). Its error says where it looked and that the graph's store needs `graph=`; with
`graph=agent` it gives back the message byte for byte. The memory does not remember the store
of a graph it ran under: one memory may serve graphs with different stores (one thread id in
each), and a process that never ran the graph (a UI, a script) would answer otherwise.
"""

from __future__ import annotations

from typing import cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_ctx.archive import encode_message
from langgraph_ctx.errors import ArchiveEntryNotFoundError
from tests.conftest import run
from tests.integration._agents import adrive, compacting_memory, drive, recall_script
from tests.integration.test_deploy import agent_for, thread


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_restore_without_graph_names_where_it_looked_and_graph(mode: str) -> None:
    script = recall_script()
    memory = compacting_memory()
    agent = agent_for(
        memory, script, script.model(), checkpointer=InMemorySaver(), store=InMemoryStore()
    )
    config = cast(RunnableConfig, thread())
    seen = await run(mode, drive, adrive, agent, script.inputs, config)
    compacted = agent.get_state(config).values["context_ledger"]["compacted"]
    assert compacted, "the run compacted nothing: the test needs an archived message"
    message_id = next(iter(compacted))
    assert message_id in {m.id for m in memory.get_full_history(agent, config)}

    # Without graph=: a clear error naming where it looked and the fix.
    with pytest.raises(ArchiveEntryNotFoundError) as caught:
        if mode == "sync":
            memory.restore(message_id, config)
        else:
            await memory.arestore(message_id, config)
    text = str(caught.value)
    assert "in-process archive" in text, text
    assert "graph=" in text, text
    assert "neither an archive reference" in text  # what was asked is still said

    # A reference read without graph= says the same.
    ref = memory.archive_for(config, graph=agent).lookup(message_id)
    assert ref is not None
    with pytest.raises(ArchiveEntryNotFoundError, match=r"in-process archive.*graph="):
        memory.restore(ref, config)

    # With graph=: the bytes.
    if mode == "sync":
        restored = memory.restore(message_id, config, graph=agent)
    else:
        restored = await memory.arestore(message_id, config, graph=agent)
    assert encode_message(restored) == encode_message(seen.messages[message_id])
    assert encode_message(memory.restore(ref, config, graph=agent)) == encode_message(restored)


def test_restore_with_graph_says_a_summarized_message_is_in_a_dump() -> None:
    """An id the graph's store does not index (not archived one by one) names the store."""
    script = recall_script()
    memory = compacting_memory()
    agent = agent_for(
        memory, script, script.model(), checkpointer=InMemorySaver(), store=InMemoryStore()
    )
    config = cast(RunnableConfig, thread())
    drive(agent, script.inputs, config)
    with pytest.raises(ArchiveEntryNotFoundError) as caught:
        memory.restore("no-such-id", config, graph=agent)
    text = str(caught.value)
    assert "the graph's store (InMemoryStore)" in text, text
    assert "get_full_history" in text, text
