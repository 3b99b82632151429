"""Concurrency: many threads at once on one database, and two runs racing on one thread.

1. Several worker processes, each running many OS threads at once through ONE shared agent
   (one `ContextMemory`, one pooled `PostgresSaver`, one `PostgresStore`), one thread id each.
   Nothing is lost (each thread's full history holds every message produced, byte for byte,
   in order), no checkpoint's ledger names a message that is neither live nor archived, and
   every prompt was valid and within budget.
2. Two runs racing on ONE thread id (two processes on Postgres and on SQLite; two OS threads
   and two asyncio tasks on an `InMemorySaver`), each appending user turns with windows small
   enough that compaction, summaries and rebuilds happen, and with a first tool output large
   enough to be compacted as it arrives (so every schedule edits the view).

What LangGraph guarantees for a race: a checkpointer is last-writer-wins per thread. Each run
keeps its own channel values in memory and writes its own chain of checkpoints; every new
input starts from the thread's newest checkpoint, whoever wrote it. So the final state is one
lineage; the losing run's last steps are a fork that `get_state_history` still lists. When a
new input lands on a checkpoint where the other run's model had asked for tools, LangGraph
drops those pending tool tasks: the state keeps an AI message whose calls are never answered.
What we add: every checkpoint's ledger names only messages live in that checkpoint or held in
the archive; along every lineage the full history only grows (whatever left the state is in a
dump that checkpoint's ledger names); every prompt is valid (superseded calls are answered in
the prompt view by the build's repair step, `repair_messages`) and fits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import Compaction, ContextMemory
from langgraph_ctx._effects import run_plan
from langgraph_ctx.archive import Archive, encode_message
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.archive.history import full_history
from langgraph_ctx.errors import ArchiveError
from langgraph_ctx.messages import repair_messages, validate_messages
from langgraph_ctx.prompt.report import REPORT_KEY
from tests.conftest import summary_first_strategies
from tests.fakes import ScriptedChatModel
from tests.integration._agents import (
    Script,
    Seen,
    adrive,
    drive,
    replay_tools,
    synthetic_script,
)

WINDOW = 5_000
"""Small enough that 6 synthetic turns compact, summarize and rebuild (with the summary-first
list, `summary_first_strategies()`: summaries, their dumps and removals are what can leave a
racing thread's ledger dangling, and the default excerpts would make them rare here)."""


# --- models -------------------------------------------------------------------------------


def router(routes: Mapping[str, ScriptedChatModel]) -> ScriptedChatModel:
    """One model object for many threads: each call goes to the script of the calling thread."""
    return ScriptedChatModel(route=lambda: routes[get_config()["configurable"]["thread_id"]])


def prompt_problems(model: ScriptedChatModel, memory: ContextMemory) -> list[str]:
    """Every prompt the model answered: valid, and within the budget."""
    counter = memory.manager.token_counter
    limit = memory.manager.budget.limit
    out = []
    for n, (prompt, tools) in enumerate(zip(model.prompts, model.prompt_tools, strict=True)):
        problems = [str(p) for p in validate_messages(prompt)]
        tokens = counter(prompt) + counter.count_tools(tools)  # type: ignore[attr-defined]
        if tokens > limit:
            problems.append(f"{tokens} tokens > limit {limit}")
        out += [f"call {n}: {p}" for p in problems]
    return out


# --- the invariants, per checkpoint -------------------------------------------------------


class ThreadCheck:
    """Reads a thread's whole checkpoint history and checks the ledger and losslessness."""

    def __init__(self, graph: Any, memory: ContextMemory, config: Mapping[str, Any]) -> None:
        self.graph, self.memory, self.config = graph, memory, config
        self.archive: Archive = memory.archive_for(config)  # type: ignore[arg-type]
        self._dumps: dict[str, list[BaseMessage]] = {}
        self.snapshots = list(graph.get_state_history(config))
        self.by_id = {s.config["configurable"]["checkpoint_id"]: s for s in self.snapshots}
        self.problems: list[str] = []
        self.histories: dict[str, list[BaseMessage]] = {}

    def dump(self, ref: str) -> list[BaseMessage]:
        if ref not in self._dumps:
            self._dumps[ref] = self.archive.read(ref)
        return self._dumps[ref]

    def history_of(self, checkpoint_id: str) -> list[BaseMessage]:
        if checkpoint_id not in self.histories:
            values = self.by_id[checkpoint_id].values
            self.histories[checkpoint_id] = full_history(
                values.get("messages", []), values.get("context_ledger"), self.archive
            )
        return self.histories[checkpoint_id]

    def parent_of(self, checkpoint_id: str) -> str | None:
        parent = self.by_id[checkpoint_id].parent_config
        return parent["configurable"]["checkpoint_id"] if parent else None

    def run(self) -> ThreadCheck:
        for cid, snapshot in self.by_id.items():
            where = f"checkpoint {cid}"
            try:
                self.check_ledger(snapshot.values, where)
                self.check_growth(cid, where)
            except ArchiveError as exc:
                self.problems.append(f"{where}: {exc}")
        return self

    def check_ledger(self, values: Mapping[str, Any], where: str) -> None:
        """Each id the ledger names is live or archived; each reference reads back."""
        ledger = values.get("context_ledger") or {}
        live = {m.id: m for m in values.get("messages", [])}
        summary = ledger.get("summary") or {}
        hint = ledger.get("hint") or {}
        refs = all_dump_refs(ledger, self.archive) + (
            [hint["dump_ref"]] if hint.get("dump_ref") else []
        )
        dumped = {m.id for ref in refs for m in self.dump(ref)}
        for kind in ("pruned", "compacted"):  # view-only edits: the message must be live
            for mid, entry in (ledger.get(kind) or {}).items():
                if mid not in live:
                    self.problems.append(f"{where}: {kind} {mid} not live")
                elif entry.get("ref"):
                    restored = self.archive.restore(entry["ref"])
                    if encode_message(restored) != encode_message(live[mid]):
                        self.problems.append(f"{where}: {kind} {mid} restores other bytes")
        window = ledger.get("window") or {}
        named = [summary["covered_last"]] if summary.get("covered_last") else []
        named += list(hint.get("cleared_ids", []))
        named += [window[k] for k in ("start_id", "pin_id") if window.get(k)]
        named += [hint["after_id"]] if hint.get("after_id") else []
        for mid in named:
            if mid not in live and mid not in dumped and self.archive.lookup(mid) is None:
                self.problems.append(f"{where}: ledger names {mid}, neither live nor archived")
        for mid in hint.get("cleared_ids", []):
            if mid not in dumped:
                self.problems.append(f"{where}: cleared {mid} has no dump")

    def check_growth(self, cid: str, where: str) -> None:
        """The full history holds the parent checkpoint's full history, byte for byte."""
        parent = self.parent_of(cid)
        if parent is None or parent not in self.by_id:
            return
        mine = {m.id: m for m in self.history_of(cid)}
        for m in self.history_of(parent):
            found = mine.get(m.id)
            if found is None:
                self.problems.append(f"{where}: {m.id} of the parent checkpoint is lost")
            elif without_report(found) != without_report(m):
                self.problems.append(f"{where}: {m.id} differs from the parent's copy")

    def lineage(self) -> list[str]:
        """Checkpoint ids from the newest back to the first."""
        out: list[str] = []
        cid: str | None = self.snapshots[0].config["configurable"]["checkpoint_id"]
        while cid is not None and cid in self.by_id:
            out.append(cid)
            cid = self.parent_of(cid)
        return out


def without_report(message: BaseMessage) -> bytes:
    """Canonical bytes without the `context_cost` report (the after-turn step attaches it
    to the newest AI message, so an archived copy can predate it)."""
    metadata = {k: v for k, v in message.response_metadata.items() if k != REPORT_KEY}
    return encode_message(message.model_copy(update={"response_metadata": metadata}))


def check_produced(history: Sequence[BaseMessage], seen: Seen) -> list[str]:
    """Every message the thread held is in its full history, in order, byte for byte."""
    by_id = {m.id: m for m in history}
    lost = [i for i in seen.order if i not in by_id]
    if lost:
        return [f"{len(lost)} lost, e.g. {lost[:3]}"]
    expected = set(seen.order)
    if [m.id for m in history if m.id in expected] != seen.order:
        return ["the full history is out of order"]
    return [
        f"{i} differs"
        for i in seen.order
        if without_report(by_id[i]) != without_report(seen.messages[i])
    ]


# --- 1. many threads at once, several processes, one PostgreSQL database -----------------

PROCESSES = 3
THREADS_PER_PROCESS = 8
TURNS = 5


def _script(thread_id: str, seed: int) -> Script:
    return synthetic_script(turns=TURNS, seed=seed, recall=seed % 2 == 0, prefix=f"{thread_id}-")


def _shared_agents(
    saver: Any, store: Any, scripts: Mapping[str, Script]
) -> dict[str, tuple[Any, ContextMemory, dict[str, ScriptedChatModel]]]:
    """Two agents every thread of a process shares: hint rebuilds, and `remove_summarized`."""
    replies = [r for s in scripts.values() for r in s.replies]
    results = [t for s in scripts.values() for t in s.tool_results]
    agents = {}
    for variant in ("rebuild", "remove"):
        memory = ContextMemory(
            context_window_tokens=WINDOW,
            strategies=summary_first_strategies(),
            archive=store,
            remove_summarized=variant == "remove",
        )
        routes: dict[str, ScriptedChatModel] = {}
        agent = create_agent(
            router(routes),
            replay_tools(replies, results),
            system_prompt=next(iter(scripts.values())).system,
            middleware=[memory.middleware()],
            checkpointer=saver,
        )
        agents[variant] = (agent, memory, routes)
    return agents


def _variant(n: int) -> str:
    return ("rebuild", "remove")[n % 2]


def threads_worker(uri: str, process: int) -> list[dict[str, Any]]:
    """One process: THREADS_PER_PROCESS OS threads at once on the shared agents."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    threads = {f"conc-p{process}-t{n}": n + 100 * process for n in range(THREADS_PER_PROCESS)}
    scripts = {t: _script(t, seed) for t, seed in threads.items()}
    with (
        ConnectionPool(uri, min_size=4, max_size=THREADS_PER_PROCESS, kwargs=kwargs) as pool,
        PostgresStore.from_conn_string(uri) as store,
    ):
        saver = PostgresSaver(pool)  # type: ignore[arg-type]
        agents = _shared_agents(saver, store, scripts)
        for thread_id, seed in threads.items():
            _, memory, routes = agents[_variant(seed)]
            model = scripts[thread_id].model(
                usage_scale=1.3 if _variant(seed) == "rebuild" else 1.0
            )
            model.usage_counter = memory.manager.token_counter  # shared counter, many threads
            routes[thread_id] = model
        barrier = threading.Barrier(len(threads))

        def run(thread_id: str) -> dict[str, Any]:
            agent, memory, routes = agents[_variant(threads[thread_id])]
            seen = Seen()
            config = {"configurable": {"thread_id": thread_id}}
            barrier.wait()
            drive(agent, scripts[thread_id].inputs, config, seen)
            model = routes[thread_id]
            return {
                "thread_id": thread_id,
                "variant": _variant(threads[thread_id]),
                "order": seen.order,
                "versions": {k: encode_message(v) for k, v in seen.messages.items()},
                "replies": [m.id for m in seen.messages.values() if m.type == "ai"],
                "model_calls": len(model.prompts),
                "prompt_problems": prompt_problems(model, memory),
                "thread": threading.get_ident(),
                "pid": os.getpid(),
            }

        with ThreadPoolExecutor(len(threads)) as pool_exec:
            return list(pool_exec.map(run, threads))


@pytest.fixture
def pg_database(postgres_uri: str) -> str:
    """The session's throwaway database, migrated once before any worker starts."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(postgres_uri) as saver:
        saver.setup()
    with PostgresStore.from_conn_string(postgres_uri) as store:
        store.setup()
    return postgres_uri


@pytest.mark.postgres
def test_many_threads_many_processes_one_database(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
        args = [(pg_database, p) for p in range(PROCESSES)]
        results = [r for chunk in pool.starmap(threads_worker, args) for r in chunk]
    ran = time.perf_counter() - started
    problems: dict[str, list[str]] = {}
    figures: dict[str, Any] = {"threads": 0, "steps": 0, "calls": 0, "messages": 0, "lost": 0}
    figures["kinds"] = set()
    with (
        PostgresSaver.from_conn_string(pg_database) as saver,
        PostgresStore.from_conn_string(pg_database) as store,
    ):
        scripts = {r["thread_id"]: Script(None, [], [], []) for r in results}
        agents = _shared_agents(saver, store, scripts)
        for r in results:
            agent, memory, _ = agents[r["variant"]]
            config = {"configurable": {"thread_id": r["thread_id"]}}
            check = ThreadCheck(agent, memory, config).run()
            history = check.history_of(check.lineage()[0])
            by_id = {m.id: m for m in history}
            lost = [i for i in r["order"] if i not in by_id]
            found = [m.id for m in history if m.id in set(r["order"])]
            mine = check.problems + r["prompt_problems"]
            if not lost and found != r["order"]:
                mine.append("full history out of order")
            mine += [
                f"{i} differs"
                for i in r["order"]
                if i in by_id and without_report(by_id[i]) != without_report_bytes(r["versions"][i])
            ]
            live = memory.get_live_context(agent, config)  # type: ignore[arg-type]
            mine += [f"next prompt: {p}" for p in validate_messages(live.messages)]
            if live.report.tokens > memory.manager.budget.limit:
                mine.append("next prompt over the limit")
            if mine or lost:
                problems[r["thread_id"]] = mine[:5] + [f"lost {lost[:3]}"] * bool(lost)
            figures["threads"] += 1
            figures["steps"] += len(check.snapshots)
            figures["calls"] += r["model_calls"]
            figures["messages"] += len(r["order"])
            figures["lost"] += len(lost)
            figures["kinds"] |= {
                d.kind
                for rep in memory.get_reports(agent, config)  # type: ignore[arg-type]
                for d in rep.decisions
            }
    with capsys.disabled():
        print(
            f"\nconcurrency: {PROCESSES} processes x {THREADS_PER_PROCESS} OS threads at once, "
            f"one PostgreSQL database: {figures['threads']} threads, {figures['steps']} "
            f"checkpoints, {figures['calls']} model calls, {figures['messages']} messages, "
            f"{figures['lost']} lost; {ran:.1f}s run + {time.perf_counter() - started - ran:.1f}s "
            f"verify; decisions {sorted(figures['kinds'])}"  # type: ignore[call-overload]
        )
    assert len({r["pid"] for r in results}) == PROCESSES
    for pid in {r["pid"] for r in results}:  # each process really ran its threads at once
        assert len({r["thread"] for r in results if r["pid"] == pid}) == THREADS_PER_PROCESS
    assert figures["threads"] == PROCESSES * THREADS_PER_PROCESS
    assert {"compact", "rebuild", "auto_compact"} <= figures["kinds"]  # type: ignore[operator]
    assert figures["lost"] == 0, problems
    assert problems == {}


def without_report_bytes(data: bytes) -> bytes:
    from langgraph_ctx.archive import decode_message

    return without_report(decode_message(data))


# --- 2. two runs racing on one thread ------------------------------------------------------


LARGE_OUTPUT = 10_000
"""Characters of each racer's first tool output: over the size `Compaction(on_arrival=0.1)`
compacts as it arrives in `WINDOW` (its `arrival_min_tokens`, 2,000 tokens, and a tenth of
the limit; the other outputs, 2,500 characters, are about 700 tokens)."""


def with_large_output(script: Script) -> Script:
    """`script` with its first successful tool output grown to `LARGE_OUTPUT` characters.

    The output is compacted on arrival by the build of the model call after it, whatever the
    prompt's size. That call is made by the run that ran the tool, on its own channel values,
    so every interleaving of a race compacts it: without it, a race's view edits (prune and
    compact act only over the trigger) depend on the schedule, since rebuilds after turns can
    keep the thread under the trigger.
    """
    at = next(i for i, r in enumerate(script.tool_results) if r.status != "error")
    first = script.tool_results[at]
    text = str(first.content)
    # Its numbered lines (`make_conversation`'s long outputs: "{n:5d}  {code}") go on,
    # numbered on, so no two lines repeat.
    code = [line[7:] for line in text.splitlines() if line[:5].strip().isdigit()]
    n = len(code)
    while len(text) < LARGE_OUTPUT:
        text += f"\n{n + 1:5d}  {code[n % len(code)]}"
        n += 1
    results = list(script.tool_results)
    results[at] = first.model_copy(update={"content": text[:LARGE_OUTPUT]})
    return dataclasses.replace(script, tool_results=results)


def compacts_on_arrival(memory: ContextMemory, output: BaseMessage) -> bool:
    """Whether `memory`'s `Compaction` compacts `output` in the first build that sees it."""
    counter = memory.manager.token_counter
    limit = memory.manager.budget.limit
    return any(
        s.on_arrival is not None
        and len(str(output.content)) >= s.min_chars
        and counter([output]) > max(s.on_arrival * limit, s.arrival_min_tokens)
        for s in memory.manager.strategies
        if isinstance(s, Compaction)
    )


VIEW_EDITS = ("pruned", "compacted")
"""The ledger's view-only edits: each names a message that must stay live."""


def racer(
    name: str, saver: Any, store: Any
) -> tuple[Script, ContextMemory, ScriptedChatModel, Any]:
    """Runner `name` of a race: its own script (ids prefixed), the same graph shape for both.

    Each script's first output is compacted as it arrives (`with_large_output`), so every
    race edits the view; the turns after it grow the thread to summaries and rebuilds.
    """
    scripts = {
        n: with_large_output(synthetic_script(turns=6, seed=ord(n), recall=False, prefix=f"{n}-"))
        for n in "AB"
    }
    script = scripts[name]
    memory = ContextMemory(
        context_window_tokens=WINDOW,
        strategies=summary_first_strategies(),
        archive=store,
        remove_summarized=name == "B",
    )
    large = max(script.tool_results, key=lambda r: len(str(r.content)))
    assert compacts_on_arrival(memory, large), "the race would depend on its schedule"
    # A little time per call, so racing runs interleave.
    model = script.model(delay=0.002, usage_scale=1.3 if name == "A" else 1.0)
    model.usage_counter = memory.manager.token_counter
    tools = replay_tools(
        [r for s in scripts.values() for r in s.replies],
        [t for s in scripts.values() for t in s.tool_results],
    )
    agent = create_agent(
        model,
        tools,
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=saver,
    )
    return script, memory, model, agent


def race_outcome(
    graph: Any,
    memory: ContextMemory,
    config: Mapping[str, Any],
    seen: Mapping[str, Seen],
    prompt_issues: Sequence[str],
) -> dict[str, Any]:
    """Check a thread two runs raced on; returns figures (asserts the invariants)."""
    check = ThreadCheck(graph, memory, config).run()
    assert check.problems == [], check.problems[:10]
    assert list(prompt_issues) == []
    lineage = check.lineage()
    final = {m.id: m for m in check.history_of(lineage[0])}
    # Every message of the final lineage is in the final full history, byte for byte.
    for cid in lineage:
        for m in check.by_id[cid].values.get("messages", []):
            assert m.id in final, f"{m.id} of the final lineage is lost"
            assert without_report(final[m.id]) == without_report(m), m.id
    # Every message either run produced lives on: in the final history or in a fork.
    anywhere: dict[str | None, BaseMessage] = {}
    for cid in check.by_id:
        anywhere.update({m.id: m for m in check.history_of(cid)})
    for name, s in seen.items():
        missing = [i for i in s.order if i not in anywhere]
        assert missing == [], f"run {name}: {missing[:3]} in no checkpoint"
        for i in s.order:
            assert without_report(anywhere[i]) == without_report(s.messages[i]), i
    # The next prompt is valid and fits.
    live = memory.get_live_context(graph, config)  # type: ignore[arg-type]
    assert validate_messages(live.messages) == []
    assert live.report.tokens <= memory.manager.budget.limit
    kinds = {
        d["kind"]
        for s in seen.values()
        for m in s.messages.values()
        for d in m.response_metadata.get(REPORT_KEY, {}).get("decisions", [])
    } | {d.kind for r in memory.get_reports(graph, config) for d in r.decisions}  # type: ignore[arg-type]
    produced = {i for s in seen.values() for i in s.order}
    return {
        "checkpoints": len(check.by_id),
        "forks": sum(1 for cid in check.by_id if cid not in set(lineage)),
        "produced": len(produced),
        "in_final": len(produced & set(final)),
        "only_in_forks": len(produced - set(final)),
        # checkpoints whose state breaks the tool-call pairing, e.g. a call a later input
        # superseded (LangGraph dropped its pending tool task); the prompt view repairs it
        "superseded_states": sum(
            1
            for cid in check.by_id
            if repair_messages(check.by_id[cid].values.get("messages", [])).actions
        ),
        "kinds": kinds,
        # checkpoints whose ledger shows an output pruned or compacted (`check_ledger` checked
        # that each is live and restores its bytes)
        "ledger_edits": sum(
            1
            for snapshot in check.by_id.values()
            if any((snapshot.values.get("context_ledger") or {}).get(k) for k in VIEW_EDITS)
        ),
    }


def _race_exercised(figures: Mapping[str, Any]) -> bool:
    """The runs raced, removed or summarized something (what can leave the ledger dangling)
    and edited the view, and a checkpoint's ledger kept a view edit.

    The view edits do not depend on the schedule: each racer's first output is compacted as
    it arrives (`with_large_output`). Whether the other edits (prune, compaction over the
    trigger, summaries) also show does: rebuilds after turns can keep the thread under the
    trigger.
    """
    kinds = figures["kinds"]
    return bool(
        figures["forks"] > 0
        and kinds & {"rebuild", "auto_compact"}
        and kinds & {"compact", "prune"}
        and figures["ledger_edits"] > 0
    )


def _assert_race_exercised(figures: Mapping[str, Any]) -> None:
    assert _race_exercised(figures), f"the race exercised no edit: {figures}"


def race_until_exercised(race: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """Run `race(thread_id)` until a race exercises the edits (at most 3 races, fresh threads).

    Every race must keep every invariant (`race_outcome` asserts them). Each race compacts
    (`with_large_output`) and grows the thread past the window, so the first race is expected
    to exercise the edits; another race only guards what still rests on the schedule: that
    the runs forked, and that a rebuild or summary landed (the thread outgrows the window in
    every schedule, but which of the two shrinks it is the schedule's choice).
    """
    figures: dict[str, Any] = {}
    for attempt in range(3):
        figures = race(f"race-{attempt}")
        if _race_exercised(figures):
            break
    return figures


def _race_os_threads(saver: Any, store: Any, thread: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    runs = {n: racer(n, saver, store) for n in "AB"}
    seen = {n: Seen() for n in "AB"}
    barrier = threading.Barrier(2)
    errors: list[str] = []

    def go(name: str) -> None:
        script, _, _, agent = runs[name]
        try:
            barrier.wait()
            for item in script.inputs:
                drive(agent, [item], config, seen[name])
        except Exception:
            errors.append(traceback.format_exc())

    workers = [threading.Thread(target=go, args=(n,)) for n in "AB"]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    _, memory, _, agent = runs["A"]
    issues = [p for n in "AB" for p in prompt_problems(runs[n][2], runs[n][1])]
    return race_outcome(agent, memory, config, seen, issues)


def test_race_two_os_threads_in_memory(capsys: pytest.CaptureFixture[str]) -> None:
    saver, store = InMemorySaver(), InMemoryStore()
    figures = race_until_exercised(lambda thread: _race_os_threads(saver, store, thread))
    with capsys.disabled():
        print(f"\nrace, 2 OS threads, InMemorySaver: {figures}")
    _assert_race_exercised(figures)


async def _race_asyncio_tasks(saver: Any, store: Any, thread: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    runs = {n: racer(n, saver, store) for n in "AB"}
    seen = {n: Seen() for n in "AB"}

    async def go(name: str) -> None:
        script, _, _, agent = runs[name]
        for item in script.inputs:
            await adrive(agent, [item], config, seen[name])

    await asyncio.gather(go("A"), go("B"))
    _, memory, _, agent = runs["A"]
    issues = [p for n in "AB" for p in prompt_problems(runs[n][2], runs[n][1])]
    return race_outcome(agent, memory, config, seen, issues)


async def test_race_two_asyncio_tasks_in_memory(capsys: pytest.CaptureFixture[str]) -> None:
    saver, store = InMemorySaver(), InMemoryStore()
    figures: dict[str, Any] = {}
    for attempt in range(3):  # as race_until_exercised, awaiting each race
        figures = await _race_asyncio_tasks(saver, store, f"race-{attempt}")
        if _race_exercised(figures):
            break
    with capsys.disabled():
        print(f"\nrace, 2 asyncio tasks, InMemorySaver: {figures}")
    _assert_race_exercised(figures)


def race_process(
    backend: str, target: str, archive: str, thread: str, name: str, barrier: Any, queue: Any
) -> None:
    """One racing process: open the shared storage, wait for the other, run every turn."""
    try:
        with _open(backend, target, archive) as (saver, store):
            script, memory, model, agent = racer(name, saver, store)
            seen = Seen()
            config = {"configurable": {"thread_id": thread}}
            barrier.wait()
            for item in script.inputs:
                drive(agent, [item], config, seen)
            queue.put(
                {
                    "name": name,
                    "order": seen.order,
                    "versions": {k: encode_message(v) for k, v in seen.messages.items()},
                    "prompt_problems": prompt_problems(model, memory),
                }
            )
    except BaseException:
        queue.put({"name": name, "error": traceback.format_exc()})


class _open:
    """The checkpointer and archive a race runs on: Postgres + PostgresStore, or SQLite +
    an archive directory."""

    def __init__(self, backend: str, target: str, archive: str) -> None:
        self.backend, self.target, self.archive = backend, target, archive
        self._stack: Any = None

    def __enter__(self) -> tuple[Any, Any]:
        from contextlib import ExitStack

        self._stack = ExitStack()
        if self.backend == "postgres":
            from langgraph.checkpoint.postgres import PostgresSaver
            from langgraph.store.postgres import PostgresStore

            saver = self._stack.enter_context(PostgresSaver.from_conn_string(self.target))
            store = self._stack.enter_context(PostgresStore.from_conn_string(self.target))
            return saver, store
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = self._stack.enter_context(SqliteSaver.from_conn_string(self.target))
        return saver, self.archive

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()


def _race_processes(backend: str, target: str, archive: str) -> dict[str, Any]:
    return race_until_exercised(
        lambda thread: _race_once(backend, target, archive, f"{thread}-{backend}")
    )


def _race_once(backend: str, target: str, archive: str, thread: str) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=race_process, args=(backend, target, archive, thread, n, barrier, queue))
        for n in "AB"
    ]
    for p in procs:
        p.start()
    results = {}
    for _ in procs:
        r = queue.get(timeout=120)
        results[r["name"]] = r
    for p in procs:
        p.join(timeout=30)
    errors = [r["error"] for r in results.values() if "error" in r]
    assert errors == [], errors[0]
    from langgraph_ctx.archive import decode_message

    seen = {}
    for n, r in results.items():
        s = Seen()
        s.order = r["order"]
        s.messages = {k: decode_message(v) for k, v in r["versions"].items()}
        seen[n] = s
    issues = [p for r in results.values() for p in r["prompt_problems"]]
    with _open(backend, target, archive) as (saver, store):
        _, memory, _, agent = racer("A", saver, store)
        config = {"configurable": {"thread_id": thread}}
        return race_outcome(agent, memory, config, seen, issues)


def test_race_two_processes_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "race.sqlite")
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(db) as saver:
        saver.setup()  # once, before the racers (they must not race to create tables)
    figures = _race_processes("sqlite", db, str(tmp_path / "archive"))
    with capsys.disabled():
        print(f"\nrace, 2 processes, SQLite + archive directory: {figures}")
    _assert_race_exercised(figures)


@pytest.mark.postgres
def test_race_two_processes_postgres(pg_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    figures = _race_processes("postgres", pg_database, "")
    with capsys.disabled():
        print(f"\nrace, 2 processes, PostgreSQL: {figures}")
    _assert_race_exercised(figures)


# --- the view fix on its own ----------------------------------------------------------------


def test_superseded_calls_are_answered_in_the_view_only() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    calls = [{"name": "grep", "args": {}, "id": f"c{i}"} for i in range(2)]
    history: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage("", tool_calls=calls, id="a1"),
        ToolMessage("hit", tool_call_id="c0", id="t0"),
        HumanMessage("the other run's input", id="h2"),
    ]
    before = [m.model_dump() for m in history]
    memory = ContextMemory(context_window_tokens=4_000)
    config: Any = {"configurable": {"thread_id": "superseded"}}
    result = run_plan(memory.plan_build(history, None, config))
    prompt = result.messages
    assert validate_messages(prompt, provider="all") == []
    assert [m.id for m in prompt][:3] == ["h1", "a1", "t0"]
    stand_in = prompt[3]
    assert isinstance(stand_in, ToolMessage) and stand_in.tool_call_id == "c1"
    assert stand_in.status == "error" and str(stand_in.id).startswith("lgctx-repair-")
    assert prompt[4].id == "h2"
    assert "repair" in result.report.kinds()
    assert [m.model_dump() for m in history] == before, "the state is not touched"
    again = run_plan(memory.plan_build(history, result.state, config))
    assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in prompt]
    assert repair_messages(prompt).messages == prompt  # nothing left to repair
