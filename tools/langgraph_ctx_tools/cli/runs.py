"""A run recorded call by call (`RunLog`), what proves nothing was lost, and its reports.

`run_turns` (`langgraph_ctx_tools.cli.recorder`) feeds a compiled agent one user turn at a time and
records each model call's `context_cost` report, the prompt the model received and the rebuilds
after a turn in a `RunLog`. `check_run` proves nothing was lost; `summary_rows`,
`write_reports` and `plot_run` turn a run into the command line's table, a JSON file and a plot.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_ctx.archive.codec import encode_message
from langgraph_ctx.errors import ArchiveError, InputError
from langgraph_ctx_tools import INSTALL_LINE
from langgraph_ctx_tools.cli.edits import changed, counted, edit_of, message_count, tally

MODEL_NODE = "model"
"""The model node of a `create_agent` graph."""


# --- the record of a run ---------------------------------------------------------------------


@dataclass
class CallStat:
    """One model call as the run saw it."""

    index: int
    """1-based call number."""
    report: dict[str, Any]
    """The call's `context_cost` report."""
    unmanaged: int = 0
    """Tokens the prompt would have had with the whole history and no management."""
    cached: int = 0
    """Tokens of the prefix this prompt shares with the previous one (cache-reusable)."""

    @property
    def tokens(self) -> int:
        """Prompt tokens the pipeline sent."""
        return int(self.report.get("tokens") or 0)

    @property
    def limit(self) -> int:
        """The budget limit."""
        return int(self.report.get("limit") or 0)

    @property
    def kinds(self) -> list[str]:
        """Kinds of the decisions that changed something, in order.

        A pruning attempt that found nothing to prune is in the report but is not counted.
        """
        return [str(d.get("kind")) for d in self.decisions]

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """The report's decisions that changed something: they name messages or moved tokens.

        A pruning attempt that found nothing to prune is in the report but not here.
        """
        return [d for d in self.report.get("decisions") or [] if changed(d)]


SUMMARY_SOURCES = {
    "model": "written by the summarizer model",
    "fallback": "written without a model: the deterministic fallback summary",
}
"""What a summary's `source` means, said once where it is shown."""


@dataclass
class RunLog:
    """What a run did, in order."""

    calls: list[CallStat] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    """Rebuilds and skips after a turn: `{"after_call", "kind", "tokens", "cleared", ...}`."""
    produced: dict[str, BaseMessage] = field(default_factory=dict)
    """Every message that entered the thread, by id (newest version)."""
    turns: int = 0
    error: str | None = None
    """Why the run stopped early."""


# --- checking and summarizing ------------------------------------------------------------------


@dataclass
class RunCheck:
    """Proof that nothing was lost."""

    archived: int = 0
    """Messages found in the archive index."""
    restored: int = 0
    """Of those, restored byte for byte."""
    full_history: int = 0
    """Messages in the full history rebuilt from archive dumps plus live state."""
    produced: int = 0
    """Messages the run produced."""
    missing: list[str] = field(default_factory=list)
    """Produced ids the full history lacks."""
    in_order: bool = True
    """The full history lists the produced messages in the order they arrived."""
    live: int = 0
    """Messages in live state at the end."""
    ledger: dict[str, Any] = field(default_factory=dict)
    """The final ledger."""


def check_run(memory: Any, graph: Any, config: RunnableConfig, log: RunLog) -> RunCheck:
    """Restore every archived message of the run and rebuild the full history."""
    check = RunCheck(produced=len(log.produced))
    archive = memory.archive_for(config, graph=graph)
    for mid, original in log.produced.items():
        try:
            ref = archive.lookup(mid)
            if ref is None:
                continue
            check.archived += 1
            if encode_message(archive.restore(ref)) == encode_message(original):
                check.restored += 1
        except ArchiveError:
            continue
    full = memory.get_full_history(graph, config)
    ids = {m.id for m in full}
    check.full_history = len(full)
    check.missing = [i for i in log.produced if i not in ids]
    arrived = {mid: n for n, mid in enumerate(log.produced)}
    positions = [arrived[m.id] for m in full if m.id in arrived]
    check.in_order = positions == sorted(positions)
    values = graph.get_state(config).values
    check.live = len(values.get("messages") or [])
    check.ledger = dict(values.get("context_ledger") or {})
    return check


def summary_rows(log: RunLog, check: RunCheck | None = None) -> list[tuple[str, str]]:
    """The final table as (label, value) rows."""
    calls = log.calls
    rows = [("turns / model calls", f"{log.turns} / {len(calls)}")]
    if calls:
        tokens, limit = [c.tokens for c in calls], calls[-1].limit
        median, biggest = int(statistics.median(tokens)), max(c.unmanaged for c in calls)
        spread = f"min {min(tokens):,} · median {median:,} · max {max(tokens):,}"
        rows.append(("prompt tokens per call", f"{spread} (limit {limit:,})"))
        rows.append(("calls over the limit", str(sum(1 for t in tokens if t > limit))))
        ratio = f"{biggest / max(limit, 1):.1f}x the limit"
        rows.append(("unmanaged history (largest)", f"{biggest:,} tokens ({ratio})"))
    kinds = Counter(k for c in calls for k in c.kinds)
    kinds.update(e["kind"] for e in log.events if e["kind"] == "rebuild")
    decisions = [d for c in calls for d in c.decisions]
    rebuilt = [{"kind": "rebuild", "messages": e["cleared"]} for e in log.events]
    taken = [
        counted(count, word)
        for word, count in tally([*decisions, *(e for e in rebuilt if e["messages"])])
    ]
    rows.append(("edits", " · ".join(taken) if taken else "none (everything fit)"))
    compacted = [d for d in decisions if d["kind"] == "compact"]
    turns = [d for d in compacted if (d.get("detail") or {}).get("model_turns")]
    outputs = [d for d in compacted if not (d.get("detail") or {}).get("model_turns")]
    archived = sum(message_count(d) for d in outputs)
    on_arrival = sum(message_count(d) for d in outputs if (d.get("detail") or {}).get("arrival"))
    how = f" ({on_arrival} as they arrived, {archived - on_arrival} once older)" if archived else ""
    rows.append(("tool outputs excerpted", f"{archived}{how}"))
    shortened = sum(message_count(d) for d in turns)
    kept = " (archived whole; the prompt keeps their first and last lines and their calls)"
    rows.append(("model turns shortened", f"{shortened}{kept if shortened else ''}"))
    summary = (check.ledger.get("summary") if check else None) or {}
    source = SUMMARY_SOURCES.get(str(summary.get("source")), str(summary.get("source")))
    quotes = len(summary.get("quotes") or []) if check else _last_quotes(decisions)
    quoted = f"quoting {_plural(quotes, 'line')} of tool output the agent used; " if quotes else ""
    about = f" ({quoted}running summary: {len(summary.get('text') or ''):,} chars, {source})"
    count = kinds["auto_compact"] + kinds["summarize"] + kinds["rebuild"]
    rows.append(("summaries", f"{count}{about if summary.get('text') else ''}"))
    rebuilds = [e for e in log.events if e["kind"] == "rebuild"]
    if rebuilds:
        cleared = _plural(sum(e["cleared"] for e in rebuilds), "message")
        rows.append(("rebuilt from a hint", f"{len(rebuilds)} ({cleared} cleared)"))
    if total := sum(c.tokens for c in calls):
        share = sum(c.cached for c in calls) / total
        same = "the leading part equal to the previous call's prompt"
        rows.append(("cache-reusable share", f"{share:.0%} of prompt tokens ({same})"))
    if check is not None:
        ok = "ok" if check.restored == check.archived else "MISMATCH"
        restored = f"{check.restored}/{_plural(check.archived, 'archived message')} byte for byte"
        restored += f" ({ok})"
        if not check.archived:
            restored = "no message was archived one by one"
        rows.append(("restorable from the archive", restored))
        lost = f"{len(check.missing)} MISSING" if check.missing else "none lost"
        order = "in order" if check.in_order else "OUT OF ORDER"
        full = f"{check.full_history}/{check.produced} messages, {lost}, {order}"
        rows.append(("full history (archive + live)", f"{full}; {check.live} live"))
    if log.error:
        rows.append(("stopped early", log.error))
    return rows


# --- reports and plot ---------------------------------------------------------------------------


def _last_quotes(decisions: list[dict[str, Any]]) -> int:
    """Lines the newest summary quotes, as its decision recorded them (0: none)."""
    for decision in reversed(decisions):
        if "quoted_lines" in (decision.get("detail") or {}):
            return int(decision["detail"]["quoted_lines"])
    return 0


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def write_reports(path: str | Path, log: RunLog, *, meta: Mapping[str, Any]) -> Path:
    """Every call's report, the rebuild events and run metadata, as JSON."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        **meta,
        "calls": [
            {
                "call": c.index,
                "tokens": c.tokens,
                "limit": c.limit,
                "unmanaged_tokens": c.unmanaged,
                "cache_reusable_tokens": c.cached,
                "report": c.report,
            }
            for c in log.calls
        ],
        "events": log.events,
        "error": log.error,
    }
    out.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str), "utf-8")
    return out


_MARKS = {
    "pruned": (".", "tab:purple"),
    "excerpted": ("v", "tab:orange"),
    "shortened": ("^", "tab:red"),
    "left the window": ("|", "tab:gray"),
    "summarized": ("s", "tab:green"),
}


def plot_run(path: str | Path, log: RunLog, *, title: str) -> Path:
    """Prompt tokens per call against the limit, and below them the edits of each call (PNG, Agg).

    The top panel draws the whole history (what an unmanaged agent would send) and the prompt
    sent, against the limit; rebuilds are dashed vertical lines. The bottom panel, sharing the
    call axis, has one labelled row per decision kind with a mark at every call whose prompt
    that kind changed: a mark's height names its kind, never a token count.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InputError(f"--plot needs matplotlib: {INSTALL_LINE}") from exc
    calls = log.calls
    limit = max([c.limit for c in calls] + [1])
    top = limit * 1.25
    xs = [c.index for c in calls]
    fig, (ax, edits) = plt.subplots(
        2, 1, sharex=True, figsize=(11, 5.6), gridspec_kw={"height_ratios": [4, 1.4]}
    )
    ax.plot(xs, [c.unmanaged for c in calls], ":", color="tab:red", label="whole history")
    ax.plot(xs, [c.tokens for c in calls], "-", color="tab:blue", label="prompt sent")
    ax.axhline(limit, color="black", linewidth=1, label=f"limit {limit:,}")
    kinds = list(_MARKS)
    for row, kind in enumerate(kinds):
        marker, color = _MARKS[kind]
        hits = [c.index for c in calls if kind in {edit_of(d) for d in c.decisions}]
        if hits:
            edits.scatter(hits, [row] * len(hits), marker=marker, color=color, zorder=3)
    for i, event in enumerate(e for e in log.events if e["kind"] == "rebuild"):
        label = "rebuild" if i == 0 else None
        for axis in (ax, edits):
            axis.axvline(
                event["after_call"] + 0.5, color="tab:brown", linestyle="--", linewidth=1,
                label=label if axis is ax else None,
            )  # fmt: skip
    biggest = max([c.unmanaged for c in calls] + [0])
    if biggest > top:
        ax.annotate(f"whole history reaches {biggest:,}", (0.99, 0.97), xycoords="axes fraction",
                    ha="right", va="top", fontsize=8, color="tab:red")  # fmt: skip
    ax.set_ylim(0, top)
    ax.set_ylabel("prompt tokens")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    edits.set_yticks(range(len(kinds)), kinds, fontsize=8)
    edits.set_ylim(-0.7, len(kinds) - 0.3)
    edits.set_ylabel("edits")
    edits.set_xlabel("model call")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
