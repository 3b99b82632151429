"""The cost frontier (issue 16): every system side by side under the same hard conditions.

`python -m benchmarks cost [--workload synthetic|real32k|real8k]`

Every system gets, on each workload:

* the same budget: window W minus reserved output R (`limit`); a prompt over it is an overrun;
* the same exact counter (`TiktokenCounter("gpt-4o")`, shared);
* the same summarizer, ours included: a fresh instance, per system, of the summary
  condition's model (`--summaries same`: the deterministic summary of the messages each
  system asks it to summarize; `shape`: their shape only, no line of any tool output;
  `langgraph_ctx_tools.replay.summary_models`), named in each table's title;
* its best documented settings (see `_NOTES`), deepagents with its tool-result eviction scaled
  to the window (deepagents' default is 20,000 tokens for a 200k model: a tenth of the window).

Metrics: effective cost = uncached prompt tokens + 0.1 x cache-reusable tokens + summarizer
input tokens; facts kept (planted keys visible in the final prompt); invalid prompts as the
OpenAI and Anthropic LangChain converters judge them (`tests.providers`); errors; overruns;
restorable share of what left the prompt (byte for byte, where the system reports it).

Workloads: `synthetic` (`benchmarks.workload`, 300 steps, W=32k, R=4k; runs on a plain clone);
`real32k` and `real8k` (the recorded runs of `../shared/data/trajectories` at W=32k, R=4k and
W=8k, R=1k; skipped with a note when the folder is absent).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import PrivateAttr

from benchmarks._table import fmt_int, print_table
from benchmarks.anchors import (
    ContextEditingAnchor,
    DeepagentsAgentAnchor,
    LangmemAnchor,
    LCSummarizationAnchor,
    TrimMessagesAnchor,
)
from benchmarks.pipeline import Aggregate, Ours
from benchmarks.replay import (
    READS,
    FactEchoModel,
    ReplayResult,
    System,
    condition_note,
    load_trajectories,
    replay,
    summaries_of,
)
from benchmarks.workload import generate_workload
from langgraph_ctx.messages import text_of
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import SlidingWindow, default_strategies
from langgraph_ctx_tools.replay.models import RecordingModel
from langgraph_ctx_tools.replay.summary_models import condition_model

__all__ = ["SummaryModel", "WORKLOADS", "our_budget", "run"]


class SummaryModel(FactEchoModel):
    """A fake summarizer (latency's and load's): a real summary of its input, with its facts.

    The answer has the four sections every summarizer prompt asks for: `<completed>` (how
    many messages and which tools the input showed), `<remaining>` (the latest user request
    seen), `<current_state>` (the last tool seen) and `<notes>` (each planted fact whose key
    appears in the input, as a sentence). Never empty, whatever the input.
    """

    _keys: dict[str, str] = PrivateAttr(default_factory=dict)

    def with_facts(self, facts: dict[str, str]) -> SummaryModel:
        """Set the planted facts (key -> sentence) this summarizer recognizes."""
        self._keys = dict(facts)
        return self

    @property
    def _llm_type(self) -> str:
        return "fake-summary"

    def reply_text(self, messages: Sequence[BaseMessage]) -> str:
        """The four sections, from the input."""
        text = "\n".join(text_of(m) for m in messages)
        tools = Counter(
            re.findall(
                r"\b(open_file|search_code|run_tests|read_logs|http_get|list_dir|bash)\b", text
            )
        )
        asks = [text_of(m) for m in messages if isinstance(m, HumanMessage)]
        latest = " ".join((asks[-1] if asks else text[-300:]).split())[-200:]
        facts = [f"- {sentence}" for key, sentence in self._keys.items() if key in text]
        used = ", ".join(f"{name} x{n}" for name, n in tools.most_common(6)) or "none"
        body = (
            f"<completed>\n- Read {len(text):,} characters of history; tools used: {used}.\n"
            f"</completed>\n<remaining>\n- Continue the latest request: {latest}\n</remaining>\n"
            "<current_state>\n- Investigating the code paths named in the request.\n"
            f"</current_state>\n<notes>\n{chr(10).join(facts) or '- none'}\n</notes>"
        )
        return body


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload: its window, reserved output, and the runs it replays."""

    name: str
    window: int
    reserved: int
    load: Callable[[], list[tuple[str, list[BaseMessage], dict[str, str]]]]

    @property
    def limit(self) -> int:
        """The budget every system gets."""
        return self.window - self.reserved


def _synthetic(steps: int = 300) -> list[tuple[str, list[BaseMessage], dict[str, str]]]:
    run = generate_workload(steps=steps, seed=16)
    return [("synthetic", run.messages, {f.key: f.text for f in run.facts})]


QUICK = WorkloadSpec(
    "synthetic, 40 steps, W=8k R=1k (quick check)", 8_000, 1_000, lambda: _synthetic(40)
)
"""`--quick`: a short synthetic run in a small window, for a fast check (not the README figures)."""


def _real() -> list[tuple[str, list[BaseMessage], dict[str, str]]]:
    return [(name, messages, {}) for name, messages in load_trajectories()]


WORKLOADS = {
    "synthetic": WorkloadSpec("synthetic, 300 steps, W=32k R=4k", 32_000, 4_000, _synthetic),
    "real32k": WorkloadSpec("shared real runs, W=32k R=4k", 32_000, 4_000, _real),
    "real8k": WorkloadSpec("shared real runs, W=8k R=1k", 8_000, 1_000, _real),
}
"""`--workload` name -> spec."""


def _model(limit: int, summaries: str, facts: dict[str, str] | None = None) -> RecordingModel:
    if summaries == READS:
        return SummaryModel(profile={"max_input_tokens": limit}).with_facts(facts or {})
    return condition_model(summaries, limit)


def our_budget(spec: WorkloadSpec, *, trigger: float | None = None) -> ContextBudget:
    """The workload's budget (window W, reserved R); `trigger` replaces the default share.

    The target stays the default unless that is over the new trigger (it may not be).
    """
    budget = ContextBudget(context_window_tokens=spec.window, reserved_output_tokens=spec.reserved)
    if trigger is None:
        return budget
    return dataclasses.replace(budget, trigger=trigger, target=min(budget.target, trigger))


ANCHOR_TRIGGER = 0.9
"""The share of the limit at which the summarizing and editing anchors act."""
ANCHOR_KEEP = 0.25
"""The share of the limit LangChain's `SummarizationMiddleware` keeps after a summary."""


def systems(
    spec: WorkloadSpec,
    facts: dict[str, str],
    *,
    our_trigger: float | None = None,
    with_search: bool = False,
    with_facts_setting: bool = False,
    summaries: str = "same",
) -> list[Callable[[], System]]:
    """Every system of the table, as fresh-instance factories.

    `with_search` adds our row with `search_history` bound as the middleware binds it (second);
    `with_facts_setting`, on a workload with planted facts, our documented setting for facts
    (the summarizer reads the originals) after it.

    `our_trigger` replaces our budget's `trigger` (a share of the limit) and names the row so;
    the anchors keep their own settings (`ANCHOR_TRIGGER`, `ANCHOR_KEEP`). Every system that
    summarizes, ours too, gets a fresh summarizer of the condition `summaries`.
    """
    w, limit = spec.window, spec.limit
    # The anchors' own settings, fixed here so that they do not move with our defaults.
    trigger, keep = int(ANCHOR_TRIGGER * limit), int(ANCHOR_KEEP * limit)
    ours_budget = our_budget(spec, trigger=our_trigger)

    def ours(bind_search: bool = False) -> System:
        name = _OURS if our_trigger is None else f"langgraph-ctx, trigger={our_trigger:g}"
        return Ours(
            f"{name}{_SEARCH_BOUND}" if bind_search else name,
            strategies=default_strategies(),
            archive=True,
            model=_model(limit, summaries, facts),
            budget=ours_budget,
            bind_search=bind_search,
        )

    def facts_setting() -> System:
        # The documented setting for facts deep in long outputs: the summarizer reads the
        # originals (`SlidingWindow(summarize_shown=False)`), priced on the same run.
        strategies = [
            dataclasses.replace(s, summarize_shown=False) if isinstance(s, SlidingWindow) else s
            for s in default_strategies()
        ]
        return Ours(
            f"{_OURS}, {_READS_ORIGINALS}",
            strategies=strategies,
            archive=True,
            model=_model(limit, summaries, facts),
            budget=ours_budget,
        )

    return [
        ours,
        *([lambda: ours(bind_search=True)] if with_search else []),
        *([facts_setting] if with_facts_setting and facts and our_trigger is None else []),
        lambda: TrimMessagesAnchor(limit=limit),
        lambda: TrimMessagesAnchor(limit=limit, tool_safe=True),
        lambda: ContextEditingAnchor(limit=limit, trigger=trigger, keep=3),
        lambda: LCSummarizationAnchor(
            limit=limit,
            trigger=trigger,
            keep=keep,
            model=_model(limit, summaries, facts),
            trim_tokens_to_summarize=None,
        ),
        lambda: LangmemAnchor(
            limit=limit,
            before_summary=trigger,
            max_summary_tokens=min(1_024, limit // 10),
            model=_model(limit, summaries, facts),
        ),
        lambda: DeepagentsAgentAnchor(
            limit=limit, evict_tokens=20_000, model=_model(limit, summaries, facts)
        ),
        lambda: DeepagentsAgentAnchor(
            limit=limit, evict_tokens=w // 10, model=_model(limit, summaries, facts), scaled=True
        ),
    ]


_NOTES = [
    "effective cost = uncached prompt tokens + 0.1 x cache-reusable prompt tokens + summarizer"
    " input and output tokens (exact gpt-4o counts); every system's summarizer, ours too, is the"
    " model of the summary condition in the table's title (--summaries).",
    "next-step recall = at each call, the distinctive names (paths, dotted/snake/camel"
    " identifiers, long numbers, hex ids) the recorded next AI message uses that first came from"
    " an earlier tool output; the share of them for which the prompt shows a whole line (20+"
    " characters) of an earlier tool output carrying the name"
    " (tools/langgraph_ctx_tools/replay/measure.py);"
    " 'paths and dotted names': the same with only paths and dotted names counted as names"
    " (path_names_in), a second, stricter definition.",
    "one-search recall = of those names whose lines the prompt no longer showed, the share for"
    " which one search_history call with the name as the query (3 hits) returns a source line"
    " as a hit (systems with an archive; benchmarks/replay.py one_search).",
    "facts = planted keys visible in the final prompt; facts by one search = found by one"
    " search_history call with the fact's key at the end;"
    " restorable = removed messages whose"
    " original comes back byte for byte (ours: archive refs and live state; deepagents eviction:"
    " the evicted file); invalid = OpenAI or Anthropic converter rejects the prompt.",
    "ours: ContextManager(budget=ContextBudget(W, R), strategies=default_strategies(),"
    " summarizer=model, archive=...), as ContextMemory's defaults.",
    "trim_messages(strategy='last', max_tokens=limit, start_on='human', include_system=True);"
    " tool-safe: start_on=('human', 'ai') with the task message pinned in front when the kept"
    " history opens with the model (Anthropic wants a user message first), at its best:"
    " allow_partial=True fills the budget with the newest lines of the message that straddles"
    " it, instead of leaving the rest of the budget unused (fill=False).",
    "ContextEditingMiddleware([ClearToolUsesEdit(trigger=0.9 limit, keep=3)]).",
    "LC SummarizationMiddleware(trigger=('tokens', 0.9 limit), keep=('tokens', 0.25 limit),"
    " trim_tokens_to_summarize=None): its default 4,000 finds no human message to start at in a"
    " one-task tool loop and writes 'Previous conversation was too long to summarize.' without"
    " calling the summarizer, which is no summary.",
    "langmem summarize_messages(max_tokens=limit, max_tokens_before_summary=0.9 limit,"
    " max_summary_tokens=min(1024, limit/10)).",
    "deepagents = create_deep_agent's stack: FilesystemMiddleware(tool_token_limit_before_evict)"
    " then create_summarization_middleware(model with max_input_tokens=limit, FilesystemBackend);"
    " 'default' evicts at 20,000 tokens, 'scaled' at W/10.",
]


def _progress(text: str) -> None:
    print(f"  .. {text}", flush=True)


def _recall(a: Aggregate, kind: str = "recall") -> str:
    total = a.total(f"{kind}_total")
    return f"{100 * a.total(f'{kind}_hits') / total:.1f}%" if total else "-"


def _searched(a: Aggregate) -> str:
    total = a.total("search_total")
    return f"{100 * a.total('search_hits') / total:.1f}% of {int(total):,}" if total else "-"


def _halves(spec: WorkloadSpec, aggs: dict[str, Aggregate], summaries: str) -> None:
    """Each system on two halves of the runs (alternate runs in load order), and on the
    longest third of them (the last third in load order, by message count), apart.

    A setting chosen on one half is judged on the other: the halves table shows whether a
    system's cost ratio and recall hold on runs it was not chosen on; the longest third,
    whether they hold where a run outlives many summaries.
    """
    n = len(next(iter(aggs.values())).runs)
    longest = n - -(-n // 3)  # the first of the longest third (a third rounded up)
    groups: list[tuple[str, Callable[[int], bool]]] = [
        ("A (runs 1, 3, 5, ...)", lambda i: i % 2 == 0),
        ("B (runs 2, 4, 6, ...)", lambda i: i % 2 == 1),
        (f"longest third (runs {longest + 1}-{n})", lambda i: i >= longest),
    ]
    rows = []
    for half, member in groups:
        parts = {
            name: Aggregate(name, [r for i, r in enumerate(a.runs) if member(i)])
            for name, a in aggs.items()
        }
        cheapest = min(
            (
                p.total("effective_cost")
                for p in parts.values()
                if _valid(p) and not _is_ours(p.name)
            ),
            default=None,
        )
        for p in parts.values():
            cost = p.total("effective_cost")
            rows.append(
                [
                    half,
                    p.name,
                    fmt_int(round(cost)),
                    f"{cost / cheapest:.3f}x" if cheapest else "-",
                    _recall(p),
                    _recall(p, "strict"),
                ]
            )
    print_table(
        f"{spec.name}: the same systems on each half of the runs and on the longest third;"
        f" {condition_note(summaries)}",
        [
            "runs",
            "system",
            "eff. cost",
            "vs cheapest valid anchor of these runs",
            "next-step recall",
            "recall, paths and dotted names",
        ],
        rows,
    )


def _restorable(a: Aggregate) -> str:
    removed = a.extra("removed")
    if not removed:
        return "-"
    return f"{100 * a.extra('restorable') / removed:.0f}%"


def run_workload(
    spec: WorkloadSpec, *, our_trigger: float | None = None, summaries: str = "same"
) -> dict[str, Aggregate] | None:
    """Replay every system on the workload's runs; print the table; return the aggregates."""
    runs = spec.load()
    if not runs:
        print(f"\n{spec.name}: skipped (no recorded runs in data/trajectories)")
        return None
    aggs: dict[str, Aggregate] = {}
    facts_total = 0
    for label, messages, facts in runs:
        facts_total += len(facts)
        makers = systems(
            spec,
            facts,
            our_trigger=our_trigger,
            with_search=True,
            with_facts_setting=True,
            summaries=summaries,
        )
        for make in makers:
            started = time.perf_counter()
            system = make()
            result: ReplayResult = replay(
                system, messages, limit=spec.limit, facts=list(facts), providers=True
            )
            aggs.setdefault(result.name, Aggregate(result.name)).runs.append(result)
            if len(runs) == 1:
                _progress(f"{result.name}: {time.perf_counter() - started:.1f} s")
        if len(runs) > 1:
            _progress(f"{label}: {len(messages)} messages")
    cheapest = min(
        (a.total("effective_cost") for a in aggs.values() if _valid(a) and not _is_ours(a.name)),
        default=None,
    )
    rows = []
    for a in aggs.values():
        cost = a.total("effective_cost")
        rows.append(
            [
                a.name,
                fmt_int(round(cost)),
                f"{cost / cheapest:.2f}x" if cheapest else "-",
                _recall(a),
                _recall(a, "strict"),
                _searched(a),
                fmt_int(int(a.total("fresh_tokens"))),
                fmt_int(
                    int(a.total("summarizer_input_tokens") + a.total("summarizer_output_tokens"))
                ),
                str(int(a.total("summarizer_calls"))),
                f"{int(a.total('facts_visible'))}/{facts_total}" if facts_total else "-",
                f"{int(a.total('facts_searched'))}/{facts_total}"
                if facts_total and _is_ours(a.name)
                else "-",
                str(int(a.total("errors"))),
                str(int(a.total("overruns"))),
                str(int(a.total("invalid"))),
                _restorable(a),
            ]
        )
    print_table(
        f"{spec.name}: {len(runs)} run(s), {sum(len(r[1]) for r in runs):,} messages, limit"
        f" {spec.limit:,}; {condition_note(summaries)}",
        [
            "system",
            "eff. cost",
            "vs cheapest valid anchor",
            "next-step recall",
            "recall, paths and dotted names",
            "one-search recall",
            "fresh",
            "summ. tokens",
            "summ. calls",
            "facts kept",
            "facts by one search",
            "errors",
            "over",
            "invalid",
            "restorable",
        ],
        rows,
    )
    for a in aggs.values():
        base = aggs.get(a.name.removesuffix(_SEARCH_BOUND))
        if a.name.endswith(_SEARCH_BOUND) and base is not None:
            schema, cost = a.total("search_schema_cost"), a.total("effective_cost")
            before = base.total("effective_cost")
            said = a.total("mention_tokens")
            print(
                f"{a.name}: the excerpts' and the summary's lines naming search_history:"
                f" {fmt_int(int(said))} prompt tokens, at most {100 * said / cost:.2f}% of its"
                " eff. cost (each counted at the full price)"
            )
            print(
                f"{a.name}: search_history bound once something is archived, as the middleware"
                f" does: {fmt_int(round(cost + schema))} with its schema"
                f" ({100 * (cost + schema - before) / before:+.2f}% over {base.name}); the"
                f" excerpts' and the summary's line naming it, with the schema's room in the"
                f" budget: {100 * (cost - before) / before:+.2f}%; the schema:"
                f" {fmt_int(round(schema))} (the call that binds it pays it whole and loses"
                " its cached prefix)"
            )
    if len(runs) > 1:
        _halves(spec, aggs, summaries)
    return aggs


_OURS = "langgraph-ctx defaults"
_READS_ORIGINALS = "summarizer reads originals"
_SEARCH_BOUND = ", search bound"


def _is_ours(name: str) -> bool:
    return name.startswith("langgraph-ctx")


def _valid(a: Aggregate) -> bool:
    return a.total("invalid") == 0 and a.total("overruns") == 0 and a.total("errors") == 0


def run(args: argparse.Namespace) -> None:
    """The `cost` section: the chosen workloads (default all), one table each."""
    names: Sequence[str] = getattr(args, "workload", None) or list(WORKLOADS)
    warnings.filterwarnings("ignore", message="Failed to trim messages")  # langmem, every call
    trigger, summaries = getattr(args, "trigger", None), summaries_of(args)
    if getattr(args, "quick", False) and not getattr(args, "workload", None):
        run_workload(QUICK, our_trigger=trigger, summaries=summaries)
        names = []
    for name in names:
        run_workload(WORKLOADS[name], our_trigger=trigger, summaries=summaries)
    for note in _NOTES:
        print(note)
