"""Scale check: several worker processes run agents on many threads against ONE PostgreSQL
database (PostgresSaver for the checkpoints, PostgresStore as the archive), then the parent
process re-reads every thread from the database and verifies it.

Per thread: every message the workers ever saw in state is in the full history, in order;
every archived reference restores (byte for byte for the ledger's pruned/compacted entries);
the ledger names only messages of the thread's history; every prompt the model got was valid
and within budget. Runs when `LANGGRAPH_CTX_TEST_POSTGRES_URI` is set.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.archive import encode_message
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.errors import ArchiveError
from langgraph_ctx.messages import validate_messages
from tests.conftest import summary_first_strategies
from tests.fakes import ScriptedChatModel
from tests.integration._agents import (
    Script,
    Seen,
    drive,
    long_turn_script,
    synthetic_script,
)
from tests.integration.conftest import POSTGRES_ENV, fresh_database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WORKERS = 4
THREADS = 16
TURNS = 5

VARIANTS = ("agent+rebuild", "agent+remove", "graph+long_turn")
"""create_agent whose provider reports 1.3x our count (hint rebuilds); create_agent with
`remove_summarized`; a hand-built StateGraph working one long turn (compaction in view)."""


@dataclass(frozen=True)
class Job:
    thread_id: str
    variant: str
    seed: int


def script_for(job: Job) -> Script:
    if job.variant == "graph+long_turn":
        return long_turn_script(8, seed=job.seed)
    return synthetic_script(turns=TURNS, seed=job.seed, recall=job.seed % 2 == 0)


def build(job: Job, model: ScriptedChatModel, saver: Any, store: Any) -> tuple[Any, ContextMemory]:
    """The thread's graph and memory (the parent rebuilds them to read the thread back)."""
    script = script_for(job)
    if job.variant == "graph+long_turn":
        from tests.integration._agents import hand_built

        memory = ContextMemory(context_window_tokens=14_000, archive=store)
        tools = [*script.tools(), memory.recall_tool()]
        return hand_built(memory, model, tools).compile(checkpointer=saver), memory
    # The agent variants are there for rebuilds and removals: the summary-first list reaches
    # them in a short script (the defaults' excerpts keep these prompts under the hint's bar).
    memory = ContextMemory(
        context_window_tokens=5_000,
        archive=store,
        remove_summarized=job.variant == "agent+remove",
        strategies=summary_first_strategies(),
    )
    agent = create_agent(
        model,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=saver,
    )
    return agent, memory


def run_worker(uri: str, jobs: list[Job]) -> list[dict[str, Any]]:
    """One worker process: its threads advance turn by turn, interleaved."""
    with (
        PostgresSaver.from_conn_string(uri) as saver,
        PostgresStore.from_conn_string(uri) as store,
    ):
        runs = []
        for job in jobs:
            script = script_for(job)
            scale = 1.3 if job.variant == "agent+rebuild" else 1.0
            model = script.model(usage_scale=scale)
            graph, memory = build(job, model, saver, store)
            if job.variant == "agent+rebuild":
                model.usage_counter = memory.manager.token_counter
            inputs: list[Any] = list(script.inputs)
            if job.variant == "graph+long_turn":
                inputs[0] = {"messages": [script.system_message(), script.inputs[0]]}
            config = {"configurable": {"thread_id": job.thread_id}}
            runs.append((job, graph, memory, model, inputs, config, Seen()))
        for turn in range(max(len(r[4]) for r in runs)):
            for _, graph, _, _, inputs, config, seen in runs:
                if turn < len(inputs):
                    drive(graph, [inputs[turn]], config, seen)
        out = []
        for job, _, memory, model, _, _, seen in runs:
            counter = memory.manager.token_counter
            limit = memory.manager.budget.limit
            bad_prompts = 0
            for prompt, tools in zip(model.prompts, model.prompt_tools, strict=True):
                tokens = counter(prompt) + counter.count_tools(tools)  # type: ignore[attr-defined]
                bad_prompts += bool(validate_messages(prompt)) or tokens > limit
            out.append(
                {
                    "job": job,
                    "produced": list(seen.order),
                    "versions": {k: encode_message(v) for k, v in seen.messages.items()},
                    "model_calls": len(model.prompts),
                    "bad_prompts": bad_prompts,
                    "pid": os.getpid(),
                }
            )
        return out


def verify(uri: str, result: dict[str, Any]) -> dict[str, int]:
    """Re-read one thread from the database: what was lost, what is inconsistent."""
    job: Job = result["job"]
    config = {"configurable": {"thread_id": job.thread_id}}
    problems: list[str] = []
    with (
        PostgresSaver.from_conn_string(uri) as saver,
        PostgresStore.from_conn_string(uri) as store,
    ):
        graph, memory = build(job, ScriptedChatModel(), saver, store)
        snapshot = graph.get_state(config)
        values = snapshot.values
        ledger = values.get("context_ledger") or {}
        live = {m.id: m for m in values.get("messages", [])}
        archive = memory.archive_for(config)  # type: ignore[arg-type]
        try:
            history = memory.get_full_history(graph, config)  # type: ignore[arg-type]
        except ArchiveError as exc:  # a dump is gone: what only it held is lost
            problems.append(f"full history: {exc}")
            history = list(live.values())
        by_id = {m.id: m for m in history}
        lost = [i for i in result["produced"] if i not in by_id]
        order = [m.id for m in history if m.id in set(result["produced"])]
        if not lost and order != result["produced"]:
            problems.append("history out of order")
        for mid in result["produced"]:
            if mid in by_id and encode_message(by_id[mid]) != result["versions"][mid]:
                found = by_id[mid]
                if not (found.type == "ai" and "context_cost" not in found.response_metadata):
                    problems.append(f"{mid} differs")
        summary = ledger.get("summary") or {}
        dumped: set[str] = set()
        try:
            refs = all_dump_refs(ledger, archive)
        except ArchiveError as exc:
            problems.append(f"dump index: {exc}")
            refs = []
        for ref in refs:
            try:
                dumped.update(m.id or "" for m in archive.read(ref))
            except ArchiveError as exc:
                problems.append(f"dump {ref}: {exc}")
        for mid in [summary["covered_last"]] if summary.get("covered_last") else []:
            if mid not in by_id:
                problems.append(f"covered id {mid} not in history")
            if mid not in dumped:
                problems.append(f"covered id {mid} has no dump")
        for kind in ("pruned", "compacted"):
            for mid, entry in (ledger.get(kind) or {}).items():
                if mid not in live:
                    problems.append(f"{kind} id {mid} not live")
                    continue
                try:
                    restored = archive.restore(entry["ref"])
                except (ArchiveError, KeyError) as exc:
                    problems.append(f"{kind} {mid}: {exc}")
                    continue
                if encode_message(restored) != encode_message(live[mid]):
                    problems.append(f"{kind} {mid} restores different bytes")
        hint = ledger.get("hint") or {}
        problems += [f"cleared {i} still live" for i in hint.get("cleared_ids", []) if i in live]
        step = int(snapshot.metadata.get("step", -1)) + 1 if snapshot.metadata else 0
        kinds = {d.kind for r in memory.get_reports(graph, config) for d in r.decisions}  # type: ignore[arg-type]
    return {
        "kinds": kinds,  # type: ignore[dict-item]
        "live": len(live),
        "steps": step,
        "model_calls": result["model_calls"],
        "lost": len(lost),
        "inconsistencies": len(problems) + result["bad_prompts"],
        "problems": problems[:5],  # type: ignore[dict-item]
    }


@pytest.fixture
def scale_database() -> Iterator[str]:
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"set {POSTGRES_ENV} to run the scale check")
    with fresh_database(base) as uri:
        # Migrations once, before the workers start (they must not race to create tables).
        with PostgresSaver.from_conn_string(uri) as saver:
            saver.setup()
        with PostgresStore.from_conn_string(uri) as store:
            store.setup()
        yield uri


def test_many_workers_one_database(scale_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    jobs = [Job(f"scale-{n:02d}", VARIANTS[n % len(VARIANTS)], seed=n) for n in range(THREADS)]
    chunks = [jobs[w::WORKERS] for w in range(WORKERS)]
    # spawn: no state (connections, executor threads) is shared with the test process.
    with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
        results = [
            r
            for chunk in pool.starmap(run_worker, [(scale_database, c) for c in chunks])
            for r in chunk
        ]
    ran = time.perf_counter() - started
    checked = [verify(scale_database, r) for r in results]
    rows = {
        "threads": len(checked),
        "steps": sum(c["steps"] for c in checked),
        "model calls": sum(c["model_calls"] for c in checked),
        "lost messages": sum(c["lost"] for c in checked),
        "inconsistencies": sum(c["inconsistencies"] for c in checked),
    }
    workers = len({r["pid"] for r in results})
    table = "\n".join(
        [
            f"scale check: {workers} worker processes, one PostgreSQL database, "
            f"{ran:.1f}s run + {time.perf_counter() - started - ran:.1f}s verify",
            " | ".join(f"{k:>{max(len(k), 6)}}" for k in rows),
            " | ".join(f"{v:>{max(len(k), 6)}}" for k, v in rows.items()),
        ]
    )
    with capsys.disabled():
        print("\n" + table)
    problems = {r["job"].thread_id: c["problems"] for r, c in zip(results, checked, strict=True)}
    assert workers == WORKERS
    # Each variant exercised what it is there for.
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for r, c in zip(results, checked, strict=True):
        by_variant.setdefault(r["job"].variant, []).append({**c, "produced": len(r["produced"])})
    assert all("rebuild" in c["kinds"] for c in by_variant["agent+rebuild"])
    assert all(c["live"] < c["produced"] for c in by_variant["agent+remove"])
    assert all("compact" in c["kinds"] for c in by_variant["graph+long_turn"])
    assert rows["lost messages"] == 0, problems
    assert rows["inconsistencies"] == 0, {k: v for k, v in problems.items() if v}
    assert rows["model calls"] >= THREADS * TURNS
