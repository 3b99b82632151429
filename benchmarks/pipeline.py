"""Comparative replays of langgraph_ctx against today's answers (issues 3, 4 and 5).

Three sections, each replaying the recorded trajectories of `data/trajectories`
(aggregated) and a long seeded synthetic coding-agent run
(`benchmarks.synthetic`) call by call (`benchmarks.replay`), window 32,000 tokens, limit
32,000 (no output reserve):

* `pipeline` (issue 3): ours with the default `SlidingWindow` against `trim_messages` and
  `ContextEditingMiddleware(ClearToolUsesEdit)`: prompt tokens, cache-reusable share,
  overruns, invalid prompts and policy time per call at 100, 1,000 and 5,000 messages; then
  the first build on a long history without a ledger (`benchmarks.first_build`).
* `compaction` (issue 4): ours with `Compaction()` + `SlidingWindow()` and an archive against
  deepagents' large tool result eviction: also the share of removed content restorable byte
  for byte and the archive bytes written.
* `summarization` (issue 5): ours with `SlidingWindow(summarize=True)` and a `Summarizer` against
  LangChain's `SummarizationMiddleware`, langmem's `summarize_messages` and deepagents'
  summarization, all with the same summarizer (a fresh instance each of the summary condition's
  model, `--summaries`, named in the titles: `same`, the deterministic summary; `shape`, the
  conversation's shape only): effective input cost, facts visible in the final prompt, facts
  recoverable from state and archive, summarizer calls.

Anchors are driven through their own code (see `benchmarks.anchors`); nothing is
re-implemented. `--quick` replays fewer trajectories and a shorter synthetic run, and measures
the policy times on that run (100 and 1,000 messages; 5,000 only in the full mode, where a
replay of every anchor to 5,000 messages takes minutes). `python -m benchmarks.pipeline --times`
prints the `pipeline` section's policy times alone, with their ratios, in a few minutes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.store.memory import InMemoryStore

from benchmarks._table import fmt_int, print_table
from benchmarks.anchors import (
    ContextEditingAnchor,
    DeepagentsEvictionAnchor,
    DeepagentsSummarizationAnchor,
    LangmemAnchor,
    LCSummarizationAnchor,
    TrimMessagesAnchor,
)
from benchmarks.first_build import first_build
from benchmarks.replay import (
    ReplayResult,
    System,
    condition_note,
    counter,
    load_trajectories,
    make_model,
    probe_time_at,
    replay,
    summaries_of,
    time_at,
)
from benchmarks.synthetic import SyntheticRun, generate_run
from langgraph_ctx.archive import StoreBackend
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import (
    DropMemory,
    PruneToolOutputs,
    SlidingWindow,
    default_strategies,
)
from langgraph_ctx_tools.replay.models import RecordingModel
from langgraph_ctx_tools.replay.pipeline_system import PipelineSystem
from langgraph_ctx_tools.replay.summary_models import condition_model

WINDOW = 32_000
LIMIT = WINDOW  # no output reserve
BUDGET = ContextBudget(context_window_tokens=WINDOW)
TRIGGER = BUDGET.trigger_tokens  # our high-water mark, given to anchors that need a trigger
TARGET = BUDGET.target_tokens  # our low-water mark, given to anchors that need a "keep"
SIZES = (100, 1_000, 5_000)
LONG_RUN = 5_200  # messages: the policy time at 5,000 is measured inside the run
QUICK_RUN = 600  # --quick: a run short enough that every table prints in about 2 CPU minutes
QUICK_TRAJECTORIES = 3
SEED = 0


# --- ours ------------------------------------------------------------------------------------


class CountingBackend:
    """An `ArchiveBackend` around another one, counting the bytes written."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bytes_written = 0

    def put(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        """Count, then write."""
        self.bytes_written += len(data)
        self.inner.put(namespace, key, data)

    def get(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        """Read."""
        return self.inner.get(namespace, key)  # type: ignore[no-any-return]

    async def aput(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        """Count, then write (async)."""
        self.bytes_written += len(data)
        await self.inner.aput(namespace, key, data)

    async def aget(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        """Read (async)."""
        return await self.inner.aget(namespace, key)  # type: ignore[no-any-return]

    def keys(self, namespace: tuple[str, ...]) -> list[str]:
        """List (searching the archive needs it)."""
        return self.inner.keys(namespace)  # type: ignore[no-any-return]

    async def akeys(self, namespace: tuple[str, ...]) -> list[str]:
        """List (async)."""
        return await self.inner.akeys(namespace)  # type: ignore[no-any-return]


class Ours(PipelineSystem):
    """Our pipeline as the benchmarks replay it (`langgraph_ctx_tools.replay.PipelineSystem`) on the
    exact gpt-4o counter, its archive's bytes counted (`finish` adds `archive_bytes`).

    With `remove_summarized`, messages a summary covers leave the kept history by the memory's
    own rule (their span dumped first), as `ContextMemory(..., remove_summarized=True)` does.
    """

    def __init__(
        self,
        name: str,
        *,
        strategies: Sequence[Any] | None = None,
        archive: bool = False,
        summarize: bool = False,
        remove_summarized: bool = False,
        model: RecordingModel | None = None,
        budget: ContextBudget = BUDGET,
        bind_search: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if model is None and summarize:
            model = make_model(WINDOW)
        self.backend = CountingBackend(StoreBackend(InMemoryStore())) if archive else None
        super().__init__(
            name,
            budget=budget,
            counter=counter(),
            strategies=strategies,
            archive=archive,
            model=model,
            remove_summarized=remove_summarized,
            bind_search=bind_search,
            backend=self.backend,  # type: ignore[arg-type]
            thread_id="bench",
            options=options,
        )

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """`PipelineSystem.finish`, and the archive bytes written."""
        out = super().finish(original, final_prompt)
        out["archive_bytes"] = self.backend.bytes_written if self.backend else 0
        return out


# --- running ---------------------------------------------------------------------------------


@dataclass
class Entry:
    """One system in a section: how to build it, and whether its calls are stateless."""

    name: str
    make: Callable[[], System]
    stateless: bool = False


@dataclass
class Aggregate:
    """Sums over several replays of one system."""

    name: str
    runs: list[ReplayResult] = field(default_factory=list)

    def total(self, attr: str) -> float:
        """Sum of a `ReplayResult` property over runs."""
        return sum(getattr(r, attr) for r in self.runs)

    def extra(self, key: str) -> int:
        """Sum of an `extra` metric over runs."""
        return sum(int(r.extra.get(key, 0)) for r in self.runs)

    def codes(self) -> str:
        """Problem codes and error kinds, summed."""
        counts: dict[str, int] = {}
        for r in self.runs:
            for code, n in [*r.problem_codes.items(), *r.error_kinds.items()]:
                counts[code] = counts.get(code, 0) + n
        return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))

    @property
    def calls(self) -> int:
        """Model calls replayed."""
        return sum(len(r.calls) for r in self.runs)

    def share(self) -> float:
        """Cache-reusable share of prompt tokens, %."""
        total = self.total("total_tokens")
        return 100 * self.total("reusable_tokens") / total if total else 0.0


def _progress(text: str) -> None:
    print(f"  .. {text}", flush=True)


def run_entries(
    entries: Sequence[Entry],
    runs: Sequence[tuple[str, Sequence[BaseMessage], Sequence[str]]],
) -> dict[str, Aggregate]:
    """Replay every entry on every run; aggregate per entry."""
    out = {e.name: Aggregate(e.name) for e in entries}
    for label, messages, facts in runs:
        for e in entries:
            out[e.name].runs.append(replay(e.make(), messages, limit=LIMIT, facts=facts))
        _progress(f"{label}: {len(messages)} messages")
    return out


def policy_times(
    entries: Sequence[Entry], long_run: SyntheticRun, measured: dict[str, Aggregate] | None
) -> dict[str, list[float | None]]:
    """ms/call at `SIZES` per entry: from the measured long replay, or timed on the long run."""
    times: dict[str, list[float | None]] = {}
    for e in entries:
        if measured is not None:
            result = measured[e.name].runs[-1]
        elif e.stateless:
            times[e.name] = [probe_time_at(e.make, long_run.messages, n) for n in SIZES]
            continue
        else:
            result = replay(e.make(), long_run.messages, limit=LIMIT, measure=False)
        times[e.name] = [time_at(result, n) for n in SIZES]
    _progress("policy times")
    return times


def _timing_note(n_messages: int, quick: bool) -> str:
    if quick:  # a 5,000-message replay of every anchor takes many minutes
        return (
            f"ms/call: median policy time of the 15 calls nearest each history size on the"
            f" {QUICK_RUN:,}-message quick run (same replay); 1,000 and 5,000 messages: full"
            " mode only."
        )
    return (
        "ms/call: median policy time of the 15 calls nearest each history size on the"
        f" {n_messages:,}-message run (same replay)."
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _inputs(quick: bool) -> tuple[list[tuple[str, list[BaseMessage]]], SyntheticRun, SyntheticRun]:
    trajectories = load_trajectories(QUICK_TRAJECTORIES if quick else None)
    if quick:
        run = generate_run(QUICK_RUN, seed=SEED)
        return trajectories, run, run
    long_run = generate_run(LONG_RUN, seed=SEED)
    return trajectories, long_run, long_run


def _traj_note(trajectories: Sequence[tuple[str, Sequence[BaseMessage]]]) -> str:
    calls = sum(1 for _, ms in trajectories for i, m in enumerate(ms) if i and m.type == "ai")
    msgs = sum(len(ms) for _, ms in trajectories)
    return (
        f"{len(trajectories)} real trajectories, {fmt_int(msgs)} messages, {fmt_int(calls)} calls"
    )


def _target(label: str, checks: Sequence[tuple[str, bool]]) -> None:
    met = all(ok for _, ok in checks)
    parts = "; ".join(f"{text} [{'ok' if ok else 'MISSED'}]" for text, ok in checks)
    print(f"target ({label}): {parts} -> {'MET' if met else 'MISSED'}")


def _fresh_note(aggs: Iterable[Aggregate]) -> str:
    parts = [
        f"{a.name} {_pct(a.total('fresh_tokens'), a.total('total_tokens'))}"
        for a in aggs
        if a.total("total_tokens")
    ]
    return (
        "first-time tokens (messages absent from the previous prompt; no cache can serve them,"
        " so cache-reusable <= 100% minus this): " + "; ".join(parts)
    )


def _codes_notes(aggs: Iterable[Aggregate]) -> list[str]:
    notes = []
    for a in aggs:
        codes = a.codes()
        if codes:
            notes.append(f"  {a.name}: {codes}")
    return ["problems (calls per validate_messages code / exception):", *notes] if notes else []


# --- issue 3: pipeline -----------------------------------------------------------------------


def _pipeline_entries() -> list[Entry]:
    return [
        Entry("ours: SlidingWindow (default)", lambda: Ours("ours: SlidingWindow (default)")),
        Entry("trim_messages", lambda: TrimMessagesAnchor(limit=LIMIT), stateless=True),
        Entry(
            "ContextEditing(ClearToolUses keep=3)",
            lambda: ContextEditingAnchor(limit=LIMIT, trigger=TRIGGER, keep=3),
            stateless=True,
        ),
    ]


_ANCHOR_NOTES_PIPELINE = [
    f"trim_messages(strategy='last', max_tokens={LIMIT}, start_on='human', include_system=True,"
    " allow_partial=False, token_counter=TiktokenCounter('gpt-4o')) on the whole history.",
    "ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger="
    f"{TRIGGER} - system tokens, keep=3)], token_counter=TiktokenCounter) via wrap_model_call"
    " with a real ModelRequest (system prompt as request.system_message, as in create_agent).",
    f"ours: ContextManager(budget=ContextBudget(context_window_tokens={WINDOW})),"
    " default_strategies(summarize=False) (no archive: no compaction),"
    f" trigger {BUDGET.trigger} / target {BUDGET.target}"
    f" ({TRIGGER:,} / {TARGET:,} tokens), ledger carried between calls.",
    "cache-reusable = tokens of the leading messages identical (role, content, name, tool"
    " calls) to the previous call's prompt.",
]


def run(args: argparse.Namespace) -> None:
    """Issue 3: ours (SlidingWindow) vs trim_messages vs ContextEditing(ClearToolUses)."""
    trajectories, synth, long_run = _inputs(args.quick)
    entries = _pipeline_entries()
    traj = run_entries(entries, [(name, ms, ()) for name, ms in trajectories])
    syn = run_entries(entries, [("synthetic", synth.messages, ())])
    times = policy_times(entries, long_run, syn)
    headers = ["system", "prompt tokens", "cache-reusable", "overruns", "invalid", "errors"]
    if trajectories:
        print_table(
            f"Issue 3 - pipeline on {_traj_note(trajectories)} (window {WINDOW:,})",
            headers,
            [
                [
                    a.name,
                    fmt_int(int(a.total("total_tokens"))),
                    f"{a.share():.1f}%",
                    int(a.total("overruns")),
                    int(a.total("invalid")),
                    int(a.total("errors")),
                ]
                for a in traj.values()
            ],
            notes=[*_codes_notes(traj.values()), _fresh_note(traj.values())],
        )
    else:
        print("\n" + _traj_note(trajectories))
    n_calls = next(iter(syn.values())).calls
    print_table(
        f"Issue 3 - pipeline on the synthetic coding run ({len(synth.messages):,} messages,"
        f" {n_calls:,} calls, seed {SEED}, window {WINDOW:,})",
        [*headers, "ms/call @100", "@1,000", "@5,000"],
        [
            [
                a.name,
                fmt_int(int(a.total("total_tokens"))),
                f"{a.share():.1f}%",
                int(a.total("overruns")),
                int(a.total("invalid")),
                int(a.total("errors")),
                *(_ms(t) for t in times[a.name]),
            ]
            for a in syn.values()
        ],
        notes=[
            *_codes_notes(syn.values()),
            _fresh_note(syn.values()),
            *_ANCHOR_NOTES_PIPELINE,
            _timing_note(len(long_run.messages), args.quick),
        ],
    )
    ours = entries[0].name
    both = [traj[ours], syn[ours]] if trajectories else [syn[ours]]
    # The goal line says whose share each figure is (the README quotes them with the goal).
    shares_of = [f"{len(trajectories)} runs", "synthetic"][-len(both) :]
    t100, _, t5000 = times[ours]
    far, t_far = "5000", t5000
    if args.quick:  # the quick run has no 5,000 (nor 1,000) messages: its last stretch instead
        far = str(QUICK_RUN - 100)
        t_far = time_at(syn[ours].runs[-1], QUICK_RUN - 100)
    _target(
        "pipeline, ours",
        [
            (
                f"overruns {sum(int(a.total('overruns')) for a in both)} == 0",
                all(a.total("overruns") == 0 for a in both),
            ),
            (
                f"invalid {sum(int(a.total('invalid')) for a in both)} == 0",
                all(a.total("invalid") == 0 for a in both),
            ),
            (
                f"cache-reusable ({' / '.join(shares_of)}) "
                + " / ".join(f"{a.share():.1f}%" for a in both)
                + " >= 95%",
                all(a.share() >= 95 for a in both),
            ),
            (
                f"time@{far} {_ms(t_far)} ms <= 2 x time@100 {_ms(t100)} ms",
                t100 is not None and t_far is not None and t_far <= 2 * t100,
            ),
        ],
    )
    first_build(quick=args.quick)  # the build that starts without a ledger (issue 13)


# --- issue 4: compaction ---------------------------------------------------------------------

EVICT_TOKENS = 500  # deepagents' threshold, set to our Compaction(min_chars=2000) / 4


def _compaction_entries() -> list[Entry]:
    name = "ours: Compaction + SlidingWindow + archive"
    return [
        Entry(
            name, lambda: Ours(name, strategies=default_strategies(summarize=False), archive=True)
        ),
        Entry(
            f"deepagents eviction (limit {EVICT_TOKENS} tok)",
            lambda: DeepagentsEvictionAnchor(limit=LIMIT, evict_tokens=EVICT_TOKENS),
        ),
    ]


def _compaction_rows(aggs: dict[str, Aggregate], times: dict[str, list[float | None]] | None):
    rows = []
    for a in aggs.values():
        row = [
            a.name,
            fmt_int(int(a.total("total_tokens"))),
            f"{a.share():.1f}%",
            int(a.total("overruns")),
            int(a.total("invalid")),
            int(a.total("errors")),
            f"{_pct(a.extra('restorable'), a.extra('removed'))} of {fmt_int(a.extra('removed'))}",
            fmt_int(a.extra("archive_bytes")),
        ]
        if times is not None:
            row += [_ms(t) for t in times[a.name]]
        rows.append(row)
    return rows


def run_compaction(args: argparse.Namespace) -> None:
    """Issue 4: ours (Compaction + SlidingWindow + archive) vs deepagents eviction."""
    trajectories, synth, long_run = _inputs(args.quick)
    entries = _compaction_entries()
    traj = run_entries(entries, [(name, ms, ()) for name, ms in trajectories])
    syn = run_entries(entries, [("synthetic", synth.messages, ())])
    times = policy_times(entries, long_run, syn)
    headers = [
        "system",
        "prompt tokens",
        "cache-reusable",
        "overruns",
        "invalid",
        "errors",
        "removed restorable",
        "archive bytes",
    ]
    notes = [
        "removed = messages that left the prompt or were shown pruned/compacted (ours), or whose"
        " content was evicted from state (deepagents); restorable = ours: the message rebuilt"
        " from live state or archive encodes to the same bytes; deepagents: the evicted file"
        " holds the same content.",
        "deepagents FilesystemMiddleware(backend=FilesystemBackend(tmp),"
        f" tool_token_limit_before_evict={EVICT_TOKENS}): each tool result passes wrap_tool_call"
        " when produced, each model call wrap_model_call. Its default limit (20,000 tokens ="
        " 80,000 chars) evicts nothing on these runs; results of tools named read_file, grep,"
        " ls, glob, edit_file, write_file, delete are never evicted (by name). It manages no"
        " window, so prompts grow without bound.",
        "ours: ContextManager(strategies=default_strategies(summarize=False),"
        " archive=Archive(StoreBackend(InMemoryStore())); archive bytes = bytes put (entries"
        " and id index).",
    ]
    if trajectories:
        print_table(
            f"Issue 4 - compaction on {_traj_note(trajectories)} (window {WINDOW:,})",
            headers,
            _compaction_rows(traj, None),
            notes=[*_codes_notes(traj.values()), _fresh_note(traj.values())],
        )
    else:
        print("\n" + _traj_note(trajectories))
    n_calls = next(iter(syn.values())).calls
    print_table(
        f"Issue 4 - compaction on the synthetic coding run ({len(synth.messages):,} messages,"
        f" {n_calls:,} calls, window {WINDOW:,})",
        [*headers, "ms/call @100", "@1,000", "@5,000"],
        _compaction_rows(syn, times),
        notes=[
            *_codes_notes(syn.values()),
            _fresh_note(syn.values()),
            *notes,
            _timing_note(len(long_run.messages), args.quick),
        ],
    )
    ours = entries[0].name
    both = [traj[ours], syn[ours]] if trajectories else [syn[ours]]
    removed = sum(a.extra("removed") for a in both)
    restorable = sum(a.extra("restorable") for a in both)
    _target(
        "compaction, ours",
        [
            (f"restorable {_pct(restorable, removed)} == 100%", restorable == removed),
            (
                f"overruns {sum(int(a.total('overruns')) for a in both)} == 0",
                all(a.total("overruns") == 0 for a in both),
            ),
            (
                f"invalid {sum(int(a.total('invalid')) for a in both)} == 0",
                all(a.total("invalid") == 0 for a in both),
            ),
        ],
    )


# --- issue 5: summarization ------------------------------------------------------------------

LANGMEM_SUMMARY_TOKENS = 1024  # our Summarizer's max_output_tokens


def _summarization_entries(summaries: str = "same") -> list[Entry]:
    ours = "ours: summarizing window + Summarizer"

    def model() -> RecordingModel:
        return condition_model(summaries, LIMIT)

    return [
        Entry(
            ours,
            lambda: Ours(
                ours,
                strategies=[DropMemory(), PruneToolOutputs(), SlidingWindow(summarize=True)],
                archive=True,
                summarize=True,
                remove_summarized=True,
                model=model(),
            ),
        ),
        Entry(
            "LC SummarizationMiddleware",
            lambda: LCSummarizationAnchor(limit=LIMIT, trigger=TRIGGER, keep=TARGET, model=model()),
        ),
        Entry(
            "langmem summarize_messages",
            lambda: LangmemAnchor(
                limit=LIMIT,
                before_summary=TARGET,
                max_summary_tokens=LANGMEM_SUMMARY_TOKENS,
                model=model(),
            ),
        ),
        Entry(
            "deepagents summarization",
            lambda: DeepagentsSummarizationAnchor(limit=LIMIT, model=model()),
        ),
    ]


_SUMMARY_NOTES = [
    "effective cost = uncached prompt tokens + 0.1 x cache-reusable tokens + summarizer input"
    " tokens (all exact gpt-4o counts; summarizer input = every call the fake model received).",
    "fake summarizer (every system, ours too; the summary condition in the titles): a"
    " BaseChatModel answering with the deterministic summary (same) or the shape (shape) of the"
    " messages each system's prompt asks it to summarize"
    " (langgraph_ctx_tools.replay.summary_models).",
    "ours: ContextManager(strategies=[DropMemory(), PruneToolOutputs(),"
    " SlidingWindow(summarize=True)], summarizer=Summarizer(model=fake), archive=...);"
    " covered messages leave live state once in the insurance dump"
    " (remove_summarized=True).",
    f"LC SummarizationMiddleware(model=fake, trigger=('tokens', {TRIGGER} - system),"
    f" keep=('tokens', {TARGET} - system), token_counter=TiktokenCounter); default"
    " trim_tokens_to_summarize=4000; before_model + add_messages on its update.",
    f"langmem summarize_messages(max_tokens={LIMIT}, max_tokens_before_summary={TARGET},"
    f" max_summary_tokens={LANGMEM_SUMMARY_TOKENS}, token_counter=TiktokenCounter),"
    " RunningSummary carried.",
    "deepagents create_summarization_middleware(fake with profile max_input_tokens=32000,"
    " FilesystemBackend(tmp), token_counter=TiktokenCounter): trigger 0.85, keep 0.10 of the"
    " window; wrap_model_call, _summarization_event carried.",
    "facts recoverable = planted facts found in the live state or the archive/offload files"
    " after the run (ours: live history + insurance dumps + archived tool outputs).",
]


def _fits(a: Aggregate) -> bool:
    return a.total("invalid") == 0 and a.total("overruns") == 0 and a.total("errors") == 0


def run_summarization(args: argparse.Namespace) -> None:
    """Issue 5: ours (auto_compact + Summarizer) vs three summarizing anchors."""
    trajectories, synth, _ = _inputs(args.quick)
    summaries = summaries_of(args)
    entries = _summarization_entries(summaries)
    traj = run_entries(entries, [(name, ms, ()) for name, ms in trajectories])
    facts = [f.text for f in synth.facts]
    syn = run_entries(entries, [("synthetic", synth.messages, facts)])
    cost_headers = [
        "system",
        "effective cost",
        "prompt tokens",
        "cache-reusable",
        "summ. calls",
        "summ. input tok",
        "invalid",
        "overruns",
        "errors",
    ]

    def cost_row(a: Aggregate) -> list[object]:
        return [
            a.name,
            fmt_int(round(a.total("effective_cost"))),
            fmt_int(int(a.total("total_tokens"))),
            f"{a.share():.1f}%",
            int(a.total("summarizer_calls")),
            fmt_int(int(a.total("summarizer_input_tokens"))),
            int(a.total("invalid")),
            int(a.total("overruns")),
            int(a.total("errors")),
        ]

    if trajectories:
        print_table(
            f"Issue 5 - summarization on {_traj_note(trajectories)} (no planted facts: cost"
            f" only; window {WINDOW:,}; {condition_note(summaries)})",
            cost_headers,
            [cost_row(a) for a in traj.values()],
            notes=[*_codes_notes(traj.values()), _fresh_note(traj.values())],
        )
    else:
        print("\n" + _traj_note(trajectories))
    n_calls = next(iter(syn.values())).calls
    print_table(
        f"Issue 5 - summarization on the synthetic coding run ({len(synth.messages):,} messages,"
        f" {n_calls:,} calls, {len(facts)} planted facts, window {WINDOW:,};"
        f" {condition_note(summaries)})",
        [
            *cost_headers[:2],
            "facts visible",
            "facts recoverable",
            "removed restorable",
            *cost_headers[2:],
        ],
        [
            [
                a.name,
                fmt_int(round(a.total("effective_cost"))),
                f"{int(a.total('facts_visible'))}/{len(facts)}",
                f"{int(a.total('facts_recoverable'))}/{len(facts)}",
                (
                    f"{_pct(a.extra('restorable'), a.extra('removed'))} of"
                    f" {fmt_int(a.extra('removed'))}"
                    if "removed" in a.runs[0].extra
                    else "-"
                ),
                *cost_row(a)[2:],
            ]
            for a in syn.values()
        ],
        notes=[*_codes_notes(syn.values()), _fresh_note(syn.values()), *_SUMMARY_NOTES],
    )
    ours_name = entries[0].name
    groups = [traj, syn] if trajectories else [syn]
    checks: list[tuple[str, bool]] = []
    for label, group in zip(["trajectories", "synthetic"][-len(groups) :], groups, strict=True):
        ours = group[ours_name]
        rivals = [a for n, a in group.items() if n != ours_name and _fits(a)]
        cost = ours.total("effective_cost")
        best = min((a.total("effective_cost") for a in rivals), default=None)
        checks.append(
            (
                f"{label}: cost {fmt_int(round(cost))} < every valid in-budget anchor"
                f" ({', '.join(a.name for a in rivals) or 'none'}"
                f"{'' if best is None else f'; best {fmt_int(round(best))}'})",
                best is None or cost < best,
            )
        )
    ours = syn[ours_name]
    best_facts = max(int(a.total("facts_visible")) for n, a in syn.items() if n != ours_name)
    removed, restorable = ours.extra("removed"), ours.extra("restorable")
    all_ours = [g[ours_name] for g in groups]
    checks += [
        (
            f"facts visible {int(ours.total('facts_visible'))} >= best anchor {best_facts}",
            ours.total("facts_visible") >= best_facts,
        ),
        (f"restorable {_pct(restorable, removed)} == 100%", restorable == removed),
        (
            f"invalid {sum(int(a.total('invalid')) for a in all_ours)} == 0",
            all(a.total("invalid") == 0 for a in all_ours),
        ),
        (
            f"overruns {sum(int(a.total('overruns')) for a in all_ours)} == 0",
            all(a.total("overruns") == 0 for a in all_ours),
        ),
    ]
    _target("summarization, ours", checks)


# --- policy times alone ------------------------------------------------------------------------

TIME_REPEATS = 3  # repetitions of the policy times, each size's fastest kept (`--times`)


def run_times(repeats: int = TIME_REPEATS) -> dict[str, list[float | None]]:
    """The pipeline section's policy times alone, and their ratios: minutes, not 16.

    The same `policy_times` on the same seeded 5,200-message run as `python -m benchmarks
    pipeline`, without the token-counting replays of every system that make that section long
    (ours is replayed unmeasured; the stateless anchors are timed at the 15 calls nearest each
    size), repeated `repeats` times, keeping each size's fastest median: other jobs on the
    machine only ever add time, and one busy stretch had made ours 10x slower at 5,000
    messages in a single repetition. The ratios within one run are the figures to compare.
    """
    entries = _pipeline_entries()
    long_run = generate_run(LONG_RUN, seed=SEED)
    runs = [policy_times(entries, long_run, None) for _ in range(repeats)]
    times = {
        e.name: [_fastest(run[e.name][n] for run in runs) for n in range(len(SIZES))]
        for e in entries
    }
    ours = times[entries[0].name]
    rows = []
    for name, (t100, t1000, t5000) in times.items():
        growth = f"{t5000 / t100:.2f}x" if t100 and t5000 else "-"
        vs_ours = f"{t5000 / ours[2]:.2f}x" if t5000 and ours[2] else "-"
        rows.append([name, _ms(t100), _ms(t1000), _ms(t5000), growth, vs_ours])
    print_table(
        f"Policy time per call on the synthetic coding run ({LONG_RUN:,} messages, seed {SEED},"
        f" window {WINDOW:,})",
        ["system", "ms/call @100", "@1,000", "@5,000", "@5,000 / @100", "@5,000 vs ours"],
        rows,
        notes=[
            _timing_note(LONG_RUN, quick=False),
            f"each size: the fastest of {repeats} repetitions of that median.",
        ],
    )
    t100, _, t5000 = ours
    _target(
        "policy time, ours",
        [
            (
                f"time@5000 {_ms(t5000)} ms <= 2 x time@100 {_ms(t100)} ms",
                t100 is not None and t5000 is not None and t5000 <= 2 * t100,
            )
        ],
    )
    return times


def _fastest(times: Iterable[float | None]) -> float | None:
    """The least of the measured times (None when no repetition reached the size)."""
    measured = [t for t in times if t is not None]
    return min(measured) if measured else None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pipeline",
        description="The pipeline section's policy times alone (the whole section: python -m"
        " benchmarks pipeline).",
    )
    parser.add_argument(
        "--times",
        action="store_true",
        required=True,
        help=f"time the policies, best of {TIME_REPEATS} (a few minutes)",
    )
    parser.parse_args()
    run_times()
