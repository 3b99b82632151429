"""Write the notebooks in this folder from the Python source below (so they are reviewable).

    python notebooks/_build.py          # (re)write and execute the notebooks whose cells changed
    python notebooks/_build.py --execute  # re-execute every notebook (fresh outputs)
    python notebooks/_build.py --check  # exit 1 when a committed notebook's cells differ from here
    python notebooks/_build.py --execute frontier  # only the notebooks named (without .ipynb)

The cells have stable ids, so a rebuild of unchanged source changes no byte. The notebooks are
committed executed, top to bottom in a temporary folder, so a repository browser shows their
outputs and plots; `--check` compares the cells without their outputs. Edit the cells here, run
the script, commit both.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

Cell = tuple[str, str]


def md(text: str) -> Cell:
    return ("markdown", textwrap.dedent(text).strip("\n"))


def code(text: str) -> Cell:
    return ("code", textwrap.dedent(text).strip("\n"))


PIP = code(
    """
    # Offline on a fresh clone: `make install` (or `pip install -e ".[test]" -e tools`) is all it needs.
    # %pip install -e .. -e ../tools
    """
)

# --- quickstart -----------------------------------------------------------------------------

QUICKSTART: list[Cell] = [
    md(
        """
        # Quickstart: `create_agent` with `ContextMiddleware`

        **The point.** Add `ContextMemory(...).middleware()` to a `create_agent` agent and it
        stays inside its context window while its tools return far more than fits:

        - every model call's prompt is at or under the limit, and each AI message says what the
          pipeline did in `response_metadata["context_cost"]`;
        - large tool outputs are *compacted* (moved to the archive, a placeholder stays) and the
          history that leaves the window is folded into a running summary
          (`SlidingWindow(summarize=True)`);
        - nothing is lost: `memory.restore(...)` (and the agent's `recall` tool) give any compacted
          output back byte for byte.

        It runs offline: a scripted tool-calling model (no API key), real read-only tools over
        this package's own source files, a 6,000-token window, an `InMemorySaver`. The last cell
        proves the three points with `assert`s.
        """
    ),
    PIP,
    md(
        """
        ## Tools and a scripted model

        `langgraph_ctx_tools.cli.folder_tools.make_tools(root)` gives three real, read-only tools confined to a
        folder: `list_dir`, `read_file` (100 numbered lines per call) and `search_text`. We point
        them at the package's sources, so the outputs are real and large.

        The model is the package's `ScriptedChatModel` replaying a fixed plan of tool calls (it
        binds tools and has a model profile, like a real chat model). With an API key you would
        write `model = init_chat_model("openai:gpt-4o-mini")` instead; nothing else changes.
        """
    ),
    code(
        """
        from pathlib import Path
        from typing import Any

        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver

        import langgraph_ctx
        from langgraph_ctx import ContextMemory, ScriptedChatModel
        from langgraph_ctx_tools.cli.folder_tools import make_tools

        ROOT = Path(langgraph_ctx.__file__).parent  # the package's own sources
        tools = make_tools(ROOT)


        def call(n: int, name: str, **args: Any) -> AIMessage:
            \"\"\"The model's n-th reply: one tool call.\"\"\"
            tool_call = {"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}
            return AIMessage("", id=f"ai-{n}", tool_calls=[tool_call])


        def read(n: int, path: str, start: int = 1) -> AIMessage:
            return call(n, "read_file", path=path, start_line=start, end_line=start + 99)


        script = [
            # turn 1: "Map this code base."
            call(1, "list_dir", path="."),
            read(2, "pipeline/manager.py"),
            read(3, "graph/memory.py"),
            read(4, "archive/archive.py"),
            read(5, "summaries/summarizer.py"),
            read(6, "tokens/exact.py"),
            AIMessage("pipeline/manager.py builds each prompt; graph/memory.py plugs it in.", id="ai-7"),
            # turn 2: "Find where tokens are counted."
            call(8, "search_text", pattern="def count"),
            read(9, "tokens/exact.py", start=101),
            read(10, "prompt/view.py"),
            AIMessage("Tokens are counted by TiktokenCounter in tokens/exact.py.", id="ai-11"),
        ]
        model = ScriptedChatModel(messages=script)
        """
    ),
    md(
        """
        ## The agent

        `ContextMemory` holds the pipeline (its strategies, by default `default_strategies()`:
        drop memory, prune, compact, then a window that summarizes what leaves it), the archive
        (in memory here) and the rebuild policy.
        `memory.middleware()` builds every model request from the pipeline and also gives the
        agent the `recall` tool.
        """
    ),
    code(
        """
        WINDOW = 6_000  # small on purpose, so compaction and summaries happen

        memory = ContextMemory(context_window_tokens=WINDOW)
        agent = create_agent(
            model,
            tools,
            system_prompt="You explore a folder of source files with the tools you have.",
            middleware=[memory.middleware()],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "quickstart"}}
        shown: set[str] = set()


        def show(result: dict[str, Any]) -> None:
            \"\"\"Each AI message of the turn with its context_cost report.\"\"\"
            for message in result["messages"]:
                cost = message.response_metadata.get("context_cost")
                if cost and message.id not in shown:
                    shown.add(message.id)
                    kinds = ", ".join(d["kind"] for d in cost["decisions"]) or "no edits"
                    print(f"{message.id:>6}: {cost['tokens']:>5,}/{cost['limit']:,} tokens ({kinds})")


        result = agent.invoke({"messages": [HumanMessage("Map this code base.", id="user-1")]}, config)
        show(result)
        """
    ),
    code(
        """
        turn = HumanMessage("Find where tokens are counted.", id="user-2")
        result = agent.invoke({"messages": [turn]}, config)
        show(result)
        print()
        print(result["messages"][-1].content)
        """
    ),
    md(
        """
        ## Every call's report

        `memory.get_reports(agent, config)` reads every distinct report of the thread from the
        checkpoints. `tokens_in` is the prompt as first assembled (the whole history), `tokens`
        what was sent.
        """
    ),
    code(
        """
        reports = memory.get_reports(agent, config)
        print(f"{'call':>4} {'tokens_in':>9} {'sent':>6} {'limit':>6}  decisions")
        for i, report in enumerate(reports, 1):
            kinds = ", ".join(report.kinds()) or "-"
            print(f"{i:>4} {report.tokens_in:>9,} {report.tokens:>6,} {report.limit:>6,}  {kinds}")
        """
    ),
    md(
        """
        ## What the model sees next

        The checkpointed state keeps every message as it was; the ledger (`state["context_ledger"]`)
        records by message id what the prompt shows instead. `get_live_context` builds the
        prompt the next call would get from that state: a `<summary>` system message for the
        history that left the window, then the newest turn. (It reads the state only:
        `create_agent` adds its `system_prompt` and the tool schemas to each request on top.)
        """
    ),
    code(
        """
        state = agent.get_state(config).values
        print(
            len(state["messages"]),
            "messages in the checkpoint;",
            "compacted:",
            sorted(state["context_ledger"]["compacted"]),
        )
        live = memory.get_live_context(agent, config)
        print(f"next prompt: {live.report.tokens:,} tokens, {len(live.messages)} messages")
        for message in live.messages:
            first = str(message.content).splitlines()[0] if message.content else ""
            print(f"  {message.type:>6} {str(message.id)[:24]:<24} {first[:70]}")
        """
    ),
    md(
        """
        ## Getting a compacted output back

        Each `compact` decision names the messages it moved and their archive references. The
        archive gives them back byte for byte, by reference or by message id, and the agent's
        `recall` tool reads the same entry when the model asks for it.
        """
    ),
    code(
        """
        compactions = [d for r in reports for d in r.decisions if d.kind == "compact"]
        message_id, ref = compactions[0].message_ids[0], compactions[0].detail["refs"][0]
        # Summarized messages leave the live state once archived: the full history has them all.
        original = next(m for m in memory.get_full_history(agent, config) if m.id == message_id)
        restored = memory.restore(ref, config)
        print(message_id, "->", ref)
        print(restored.content[:300])

        recall = memory.recall_tool()
        recalled = recall.invoke({"ref": ref}, config)
        print()
        print(recalled[:200])
        """
    ),
    md("## Proof"),
    code(
        """
        assert reports and all(r.ok for r in reports), "every build succeeded"
        assert all(r.tokens <= r.limit == WINDOW for r in reports), "every prompt fits"
        kinds = {k for r in reports for k in r.kinds()}
        assert kinds & {"compact", "auto_compact"}, kinds
        from langgraph_ctx import count_tokens

        full = memory.get_full_history(agent, config)
        assert count_tokens(full) > WINDOW, "the unmanaged history outgrew the window"

        ai_messages = [m for m in state["messages"] if m.type == "ai"]
        assert all("context_cost" in m.response_metadata for m in ai_messages)

        assert restored == original and restored.content == original.content
        assert memory.restore(message_id, config) == original  # by message id too
        assert original.content in recalled
        print("ok:", len(reports), "calls, max", max(r.tokens for r in reports), "tokens of", WINDOW)
        """
    ),
]

# --- strategies -----------------------------------------------------------------------------

STRATEGIES: list[Cell] = [
    md(
        """
        # The strategies compared on a long agent run

        **The point.** Replayed call by call through `ContextManager`, every one of our
        strategy sets keeps every prompt under the limit and valid for OpenAI and Anthropic
        (`validate_messages` finds nothing), while the whole history grows to several times the
        window. They differ in what they keep and in how much of each prompt repeats the
        previous one (the share a provider's prompt cache can reuse). `trim_messages` from
        `langchain_core` is the anchor.

        The run comes from the demo agent (`langgraph_ctx_tools.cli.demo.run_demo`: a scripted explorer
        reading this package's sources in a 6,000-token window, offline, files in a temporary
        folder), or from a recorded conversation you point `TRAJECTORY` at. Plots are drawn
        inline; nothing is written into the repository. The last cells prove the point with
        `assert`s.
        """
    ),
    PIP,
    md(
        """
        ## The run

        Set `TRAJECTORY` to a JSON file of LangChain messages (`messages_to_dict` output, plain
        or gzip-compressed), for example one of the recorded runs in the repository's
        `data/trajectories/`, to compare the strategies on it instead of the demo run; `WINDOW`
        sets the window of the comparison.
        """
    ),
    code(
        """
        TRAJECTORY: str | None = None  # e.g. "../data/trajectories/<run>.json.gz"
        WINDOW: int | None = None  # None: 6,000 tokens for the demo run, 32,000 for a trajectory
        """
    ),
    code(
        """
        import shutil
        import tempfile
        from collections import Counter
        from pathlib import Path

        import matplotlib.pyplot as plt
        from langchain_core.messages import AIMessage, SystemMessage, trim_messages
        from langgraph.store.memory import InMemoryStore

        import langgraph_ctx
        from langgraph_ctx import (
            Archive,
            Compaction,
            ContextManager,
            DynamicSummarization,
            PromptView,
            TiktokenCounter,
            default_strategies,
            validate_messages,
        )
        from langchain_core.messages import ToolMessage
        from langgraph_ctx.archive.recall import make_recall_tool
        from langgraph_ctx_tools.cli.demo import SYSTEM_PROMPT, run_demo
        from langgraph_ctx_tools.cli.folder_tools import make_tools
        from langgraph_ctx_tools.cli.playback import load_transcript

        workdir = Path(tempfile.mkdtemp(prefix="langgraph-ctx-strategies-"))
        if TRAJECTORY and Path(TRAJECTORY).is_file():
            raw = load_transcript(TRAJECTORY)
            trajectory = [
                m if m.id else m.model_copy(update={"id": f"m{i:05d}"}) for i, m in enumerate(raw, 1)
            ]
            tools = None  # the recording's tool schemas are unknown
            WINDOW = WINDOW or 32_000
            source = Path(TRAJECTORY).name
        else:
            root = Path(langgraph_ctx.__file__).parent
            run = run_demo(root=root, db=workdir / "demo.sqlite", archive_dir=workdir / "archive")
            # Every message the run produced, in arrival order, behind the agent's system prompt.
            trajectory = [SystemMessage(SYSTEM_PROMPT, id="system"), *run.log.produced.values()]
            recall = make_recall_tool(Archive(InMemoryStore(), thread_id="schema-only"))
            tools = [*make_tools(root), recall]
            WINDOW = WINDOW or 6_000
            source = "the demo agent over langgraph_ctx/"

        counter = TiktokenCounter("gpt-4o")
        calls = [i for i, m in enumerate(trajectory) if isinstance(m, AIMessage)]
        whole = [counter.count(trajectory[:i], tools=tools) for i in calls]
        print(f"{source}: {len(trajectory)} messages, {len(calls)} model calls")
        print(
            f"whole history before the last call: {whole[-1]:,} tokens "
            f"({whole[-1] / WINDOW:.1f}x the {WINDOW:,}-token window)"
        )
        """
    ),
    md(
        """
        ## A strategy of your own

        A strategy is any object with `apply(view)`. The build hands each strategy of its list
        the same `PromptView`: what the prompt holds (`tokens`, `budget`, `window()`), and the
        edits (`protect`, `inject`, `prune`, `compact`, `shrink_once`, `set_summary`, ...). This
        one keeps the newest results of one tool whole whatever the strategies after it prune
        or compact: about ten lines on the public API alone.
        """
    ),
    code(
        """
        from dataclasses import dataclass


        @dataclass(frozen=True)
        class KeepLastResults:
            \"\"\"Keep the newest `keep` results of one tool whole: pruning and compaction skip them.\"\"\"

            tool: str
            keep: int = 1

            def apply(self, view: PromptView) -> None:
                results = [m for m in view.window() if isinstance(m, ToolMessage) and m.name == self.tool]
                view.protect(m.id for m in results[len(results) - self.keep :])


        # The tool the run calls most, so the strategy has something to keep.
        NEWEST_TOOL = Counter(m.name for m in trajectory if isinstance(m, ToolMessage)).most_common(1)[0][0]
        print("keeping the newest results of", NEWEST_TOOL)
        """
    ),
    md(
        """
        ## Replaying call by call

        Before each recorded AI message, the history up to it goes through the pipeline with
        the ledger the previous build returned, exactly as in an agent graph:

        | system | strategies |
        |---|---|
        | Window (no summary) | `default_strategies(summarize=False)`: drop memory, prune old tool outputs, compact large ones, then drop the oldest turns/blocks (the `ContextManager` default) |
        | Window + summary | `default_strategies()`: the same, and what leaves the window goes into a running summary (the `ContextMemory` default) |
        | DynamicSummarization first | `[DynamicSummarization(threshold_turns=1, turns=1), *default_strategies(summarize=False)]`: once the prompt holds an older turn besides the current one, summarize it |
        | KeepLastResults (yours) | `[KeepLastResults(...), *default_strategies(summarize=False)]`: a strategy written below, on the public API alone |
        | trim_messages (anchor) | `trim_messages(strategy="last", include_system=True, start_on="human")` to the limit minus the tool schemas |

        The cache-reusable part of a prompt is its prefix identical to the previous prompt
        (tool schemas, then whole messages).
        """
    ),
    code(
        """
        def same(a, b) -> bool:
            \"\"\"What a provider sees of a message is identical.\"\"\"
            keys = ("type", "content", "tool_calls", "tool_call_id", "name")
            return all(getattr(a, k, None) == getattr(b, k, None) for k in keys)


        def reusable(previous, prompt) -> int:
            \"\"\"Tokens of the prefix `prompt` shares with `previous`.\"\"\"
            if previous is None:
                return 0
            n = 0
            while n < min(len(previous), len(prompt)) and same(previous[n], prompt[n]):
                n += 1
            schemas = counter.count_tools(tools) if tools else 0
            return schemas + sum(counter.count_message(m) for m in prompt[:n])


        def ours(strategies):
            def prompts():
                archive = Archive(InMemoryStore(), thread_id="replay")
                manager = ContextManager(
                    context_window_tokens=WINDOW,
                    strategies=strategies,
                    archive=archive,
                )
                ledger = None
                for i in calls:
                    result = manager.build(trajectory[:i], tools=tools, state=ledger)
                    ledger = result.state
                    yield result.messages, result.report.tokens, result.report.kinds()

            return prompts


        def anchor():
            schemas = counter.count_tools(tools) if tools else 0
            for i in calls:
                prompt = trim_messages(
                    trajectory[:i],
                    max_tokens=WINDOW - schemas,
                    token_counter=counter,
                    strategy="last",
                    include_system=True,
                    start_on="human",
                )
                yield prompt, counter.count(prompt, tools=tools), []


        SYSTEMS = {
            "Window (no summary)": ours(default_strategies(summarize=False)),
            "Window + summary": ours(default_strategies()),
            "DynamicSummarization first": ours(
                [DynamicSummarization(threshold_turns=1, turns=1), *default_strategies(summarize=False)]
            ),
            "KeepLastResults (yours)": ours(
                [KeepLastResults(tool=NEWEST_TOOL, keep=2), *default_strategies(summarize=False)]
            ),
            "trim_messages (anchor)": anchor,
        }
        ANCHOR = "trim_messages (anchor)"

        runs = {}
        for name, prompts in SYSTEMS.items():
            rows, previous = [], None
            for prompt, tokens, kinds in prompts():
                rows.append(
                    {
                        "tokens": tokens,
                        "kinds": kinds,
                        "reusable": reusable(previous, prompt),
                        "problems": validate_messages(prompt),
                    }
                )
                previous = prompt
            runs[name] = rows
        """
    ),
    code(
        """
        def share(rows) -> float:
            sent = sum(r["tokens"] for r in rows[1:])
            return sum(r["reusable"] for r in rows[1:]) / sent if sent else 0.0


        print(f"{'system':<38} {'max':>6} {'mean':>6} {'over':>5} {'invalid':>8} {'cache':>6}  decisions")
        for name, rows in runs.items():
            tokens = [r["tokens"] for r in rows]
            over = sum(t > WINDOW for t in tokens)
            invalid = sum(bool(r["problems"]) for r in rows)
            kinds = Counter(k for r in rows for k in r["kinds"])
            taken = " ".join(f"{k}:{n}" for k, n in sorted(kinds.items())) or "-"
            print(
                f"{name:<38} {max(tokens):>6,} {sum(tokens) // len(tokens):>6,} {over:>5} "
                f"{invalid:>8} {share(rows):>6.0%}  {taken}"
            )
        for name, rows in runs.items():
            invalid = [(call, row["problems"][0]) for call, row in enumerate(rows, 1) if row["problems"]]
            for call, problem in invalid[:3]:
                print(f"{name}, call {call}: {problem}")
            if len(invalid) > 3:
                print(f"{name}: ... and {len(invalid) - 3} more invalid prompts")
        """
    ),
    md(
        """
        ## Prompt tokens per call

        The dotted line is the whole history (what an unmanaged agent would send), the black
        line the limit. Marks show the calls where the pipeline compacted (▼) or summarized (■).
        """
    ),
    code(
        """
        xs = list(range(1, len(calls) + 1))
        columns = 3
        lines = (len(runs) + columns - 1) // columns
        fig, grid = plt.subplots(lines, columns, figsize=(13, 7), sharey=True, squeeze=False)
        axes = list(grid.flat)
        top = min(max(whole), 3 * WINDOW) * 1.05
        for i, (name, rows) in enumerate(runs.items()):
            ax = axes[i]
            ax.plot(xs, whole, ":", color="tab:red", label="whole history")
            ax.plot(xs, [r["tokens"] for r in rows], "-", color="tab:blue", label="prompt sent")
            ax.axhline(WINDOW, color="black", linewidth=1, label=f"limit {WINDOW:,}")
            for kinds, marker, color, label in (
                (("compact",), "v", "tab:orange", "compacted"),
                (("auto_compact", "summarize"), "s", "tab:green", "summarized"),
            ):
                hits = [
                    (x, r["tokens"]) for x, r in zip(xs, rows, strict=True) if set(kinds) & set(r["kinds"])
                ]
                if hits:
                    ax.scatter(*zip(*hits, strict=True), marker=marker, color=color, zorder=3, label=label)
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("model call")
            ax.set_ylim(0, top)
        for ax in axes[len(runs) :]:
            ax.axis("off")
        for ax in grid[:, 0]:
            ax.set_ylabel("prompt tokens")
        legend = {}
        for ax in axes:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                legend.setdefault(label, handle)
        fig.legend(legend.values(), legend.keys(), loc="lower right", fontsize=9)
        fig.tight_layout()
        plt.show()
        """
    ),
    md(
        """
        ## Cache-reusable share

        Of the prompt tokens of calls 2..n, the share that repeats the previous prompt's prefix.
        Our edits happen in batches (trigger at 90% of the limit, cut to 25%, or to 10% when what
        leaves the window is summarized), so between edits the prefix stays byte-identical. The anchor's share counts its invalid prompts too (a
        prompt with no conversation left repeats the previous one perfectly).
        """
    ),
    code(
        """
        names = list(runs)
        shares = [share(runs[n]) for n in names]
        fig, ax = plt.subplots(figsize=(8, 3))
        bars = ax.barh(names, shares, color=["tab:gray" if n == ANCHOR else "tab:blue" for n in names])
        ax.bar_label(bars, labels=[f"{s:.0%}" for s in shares], padding=3)
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
        ax.set_xlabel("cache-reusable share of prompt tokens (calls 2..n)")
        fig.tight_layout()
        plt.show()
        """
    ),
    md("## Proof"),
    code(
        """
        ours_only = {n: rows for n, rows in runs.items() if n != ANCHOR}
        for name, rows in ours_only.items():
            assert len(rows) == len(calls), name
            assert all(r["tokens"] <= WINDOW for r in rows), f"{name} went over the limit"
            assert all(r["problems"] == [] for r in rows), f"{name} sent an invalid prompt"
        assert max(whole) > WINDOW, "the run outgrew the window, so the strategies had work to do"
        assert any(r["kinds"] for rows in ours_only.values() for r in rows)
        # Yours kept its promise: the newest results of the tool are whole in every prompt.
        for prompt, _, _ in SYSTEMS["KeepLastResults (yours)"]():
            newest = [m for m in prompt if isinstance(m, ToolMessage) and m.name == NEWEST_TOOL][-2:]
            assert not any(m.additional_kwargs.get("langgraph_ctx") for m in newest)
        print(
            "ok: every prompt of",
            len(ours_only),
            "strategy sets fits",
            f"{WINDOW:,}",
            "tokens and validates, over",
            len(calls),
            "calls",
        )
        """
    ),
    code(
        """
        shutil.rmtree(workdir, ignore_errors=True)  # the demo's SQLite file and archive
        """
    ),
]

# --- persistence ------------------------------------------------------------------------------

PERSISTENCE: list[Cell] = [
    md(
        """
        # Persistence: SQLite checkpointer, restart, archive, time travel

        **The point.** Everything langgraph-ctx keeps between calls lives in the checkpointer
        (the ledger in `state["context_ledger"]`, plain JSON keyed by message ids) and in the archive
        (content-addressed files), never in the Python process. So:

        1. a new process with a new saver and a new graph object continues a thread exactly
           where the old one stopped;
        2. any output the pipeline compacted comes back from the archive byte for byte;
        3. forking from an earlier checkpoint (`get_state_history`) gives a branch whose ledger
           names only that branch's messages, and the original branch stays as it was.

        Offline: a scripted tool-calling model, real tools over this package's sources, a
        `SqliteSaver` file and a `DirectoryBackend` archive in a temporary folder. Each section
        ends with an `assert` cell.
        """
    ),
    PIP,
    md(
        """
        ## Setup

        `open_agent` plays one process: it opens the SQLite file, builds a `ContextMemory` on the
        archive folder and compiles a fresh `create_agent` graph. The model replays the script it
        is given (a real model would decide by itself).
        """
    ),
    code(
        """
        import shutil
        import sqlite3
        import tempfile
        from pathlib import Path
        from typing import Any

        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.sqlite import SqliteSaver

        import langgraph_ctx
        from langgraph_ctx import ContextMemory, DirectoryBackend, ScriptedChatModel, validate_messages
        from langgraph_ctx_tools.cli.folder_tools import make_tools

        workdir = Path(tempfile.mkdtemp(prefix="langgraph-ctx-persistence-"))
        DB = workdir / "checkpoints.sqlite"
        ARCHIVE = workdir / "archive"
        WINDOW = 5_000
        tools = make_tools(Path(langgraph_ctx.__file__).parent)
        config = {"configurable": {"thread_id": "explore"}}


        def call(n: int, name: str, **args: Any) -> AIMessage:
            tool_call = {"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}
            return AIMessage("", id=f"ai-{n}", tool_calls=[tool_call])


        def read(n: int, path: str, start: int = 1) -> AIMessage:
            return call(n, "read_file", path=path, start_line=start, end_line=start + 99)


        def open_agent(script: list[AIMessage]):
            \"\"\"One process: a connection, a saver, a memory and a compiled graph.\"\"\"
            conn = sqlite3.connect(DB, check_same_thread=False)
            memory = ContextMemory(context_window_tokens=WINDOW, archive=DirectoryBackend(ARCHIVE))
            agent = create_agent(
                ScriptedChatModel(messages=script),
                tools,
                system_prompt="You explore a folder of source files with the tools you have.",
                middleware=[memory.middleware()],
                checkpointer=SqliteSaver(conn),
            )
            return conn, memory, agent


        def ledger_ids(ledger: dict[str, Any]) -> set[str]:
            \"\"\"Every message id the ledger names.\"\"\"
            ids = set(ledger.get("pruned") or {}) | set(ledger.get("compacted") or {})
            window = ledger.get("window") or {}
            ids |= {window.get("start_id"), window.get("pin_id")} - {None}
            ids |= {(ledger.get("summary") or {}).get("covered_last")} - {None}
            hint = ledger.get("hint") or {}
            ids |= set(hint.get("cleared_ids") or []) | ({hint.get("after_id")} - {None})
            return ids
        """
    ),
    md("## Process 1: two turns"),
    code(
        """
        conn, memory, agent = open_agent(
            [
                call(1, "list_dir", path="."),
                read(2, "pipeline/manager.py"),
                read(3, "graph/memory.py"),
                read(4, "archive/archive.py"),
                AIMessage(
                    "pipeline/ builds prompts, graph/ wires them in, archive/ stores.", id="ai-5"
                ),
                call(6, "search_text", pattern="def count_tokens"),
                read(7, "tokens/exact.py", start=250),
                read(8, "summaries/summarizer.py"),
                AIMessage("count_tokens (tokens/exact.py) counts exactly, offline.", id="ai-9"),
            ]
        )
        agent.invoke({"messages": [HumanMessage("Map this code base.", id="user-1")]}, config)
        agent.invoke({"messages": [HumanMessage("Find where tokens are counted.", id="user-2")]}, config)

        before = agent.get_state(config).values
        reports_before = memory.get_reports(agent, config)
        for report in reports_before:
            print(report.summary_line())
        print(len(before["messages"]), "messages; ledger keys:", sorted(before["context_ledger"]))
        """
    ),
    code(
        """
        assert all(r.ok and r.tokens <= WINDOW for r in reports_before)
        # Summarized messages leave the live state once archived: every id the ledger names is
        # in the state or the archive, that is in the full history.
        before_full = memory.get_full_history(agent, config)
        full_before = {m.id for m in before_full}
        assert ledger_ids(before["context_ledger"]) <= full_before
        """
    ),
    md(
        """
        ## Restart: a new process continues the thread

        Close the connection and drop every object; then open the same file with a new saver,
        a new `ContextMemory` and a new graph. The state, ledger included, comes back as it was,
        and the thread goes on.
        """
    ),
    code(
        """
        conn.close()
        del agent, memory

        conn, memory, agent = open_agent(
            [
                read(10, "strategies.py"),
                read(11, "prompt/view.py"),
                read(12, "archive/recall.py"),
                AIMessage("Strategies run by stage on a workspace; recall reads the archive.", id="ai-13"),
                # used by the fork below
                call(14, "search_text", pattern="def put_messages"),
                read(15, "archive/archive.py", start=600),
                AIMessage("Archive.put_messages (archive/archive.py) archives messages.", id="ai-16"),
            ]
        )
        restarted = agent.get_state(config).values
        print(
            "same messages:",
            restarted["messages"] == before["messages"],
            "| same ledger:",
            restarted["context_ledger"] == before["context_ledger"],
        )

        agent.invoke({"messages": [HumanMessage("How are strategies applied?", id="user-3")]}, config)
        head = agent.get_state(config)
        reports = memory.get_reports(agent, config)
        for report in reports[len(reports_before) :]:
            print(report.summary_line())
        """
    ),
    code(
        """
        assert restarted["messages"] == before["messages"]
        assert restarted["context_ledger"] == before["context_ledger"]
        # The thread continued: its full history (state and archive) extends the one before the
        # restart, even where summarized messages have left the live state.
        now = memory.get_full_history(agent, config)
        assert [m.id for m in now[: len(full_before)]] == [m.id for m in before_full], "the thread continued"
        assert now[len(full_before)].id == "user-3" and now[-1].id == "ai-13"
        assert head.values["messages"][-1].id == "ai-13"
        assert reports[: len(reports_before)] == reports_before and len(reports) > len(reports_before)
        assert all(r.ok and r.tokens <= WINDOW for r in reports)
        """
    ),
    md(
        """
        ## Restore from the archive

        Every `compact` decision in the reports names the tool outputs it moved to the archive,
        with their references. (The ledger's `compacted` entries name only those the prompt
        still shows as placeholders: once an output leaves the window, the ledger is done with
        it, the archive is not.) The archive folder holds them (files named by their sha256);
        `memory.restore` reads one back by message id or by reference, verified, equal to the
        message in the checkpoint. This process reads back what the first process archived too.
        """
    ),
    code(
        """
        # Compacted outputs may have left the live state with a summary: the full history has them.
        originals = {m.id: m for m in memory.get_full_history(agent, config)}
        archived = {}  # message id -> (reference, the process whose build compacted it)
        for n, report in enumerate(reports):
            by = "process 1" if n < len(reports_before) else "process 2"
            for decision in report.decisions:
                if decision.kind == "compact":
                    for message_id, ref in zip(decision.message_ids, decision.detail["refs"], strict=True):
                        archived[message_id] = (ref, by)
        shown = {**before["context_ledger"]["compacted"], **head.values["context_ledger"]["compacted"]}
        print("archive files:", sum(1 for p in ARCHIVE.rglob("*") if p.is_file()))
        print("compacted outputs still shown as placeholders:", sorted(shown))
        restored = {}
        for message_id, (ref, by) in archived.items():
            restored[message_id] = memory.restore(message_id, config)
            size = len(restored[message_id].content)
            print(f"{message_id}: {size:,} chars, archived by {by} as {ref[:40]}...")
        first = next(iter(restored.values()))
        print(first.content[:200])
        """
    ),
    code(
        """
        assert archived, "something was compacted"
        for message_id, (ref, _) in archived.items():
            assert restored[message_id] == originals[message_id]
            assert restored[message_id].content == originals[message_id].content
            assert memory.restore(ref, config) == originals[message_id]
        for message_id, entry in shown.items():  # a placeholder names the same reference
            assert entry["ref"] == archived[message_id][0]
        """
    ),
    md(
        """
        ## Time travel: fork from an earlier checkpoint

        `get_state_history` lists the thread's checkpoints, newest first. We take the one where
        turn 1 had just ended and send a different second request from there. The fork's ledger
        is the one checkpointed at that point, updated by the fork's own calls: it names only
        messages of the fork. The original branch stays reachable by its checkpoint.
        """
    ),
    code(
        """
        history = list(agent.get_state_history(config))
        fork_point = next(s for s in history if not s.next and s.values["messages"][-1].id == "ai-5")
        print(len(history), "checkpoints; forking from", fork_point.config["configurable"]["checkpoint_id"])

        fork_turn = HumanMessage("Instead: find where messages are archived.", id="user-fork")
        agent.invoke({"messages": [fork_turn]}, fork_point.config)
        fork = agent.get_state(config)
        fork_ids = [m.id for m in fork.values["messages"]]
        print("fork:", fork_ids)
        print("fork ledger names:", sorted(ledger_ids(fork.values["context_ledger"])))

        live = memory.get_live_context(agent, config)
        full = memory.get_full_history(agent, config)
        original = agent.get_state(head.config)
        print(
            f"next prompt on the fork: {live.report.tokens:,} tokens;",
            len(full),
            "messages in its full history;",
            len(original.values["messages"]),
            "on the original branch",
        )
        """
    ),
    code(
        """
        turn1 = [m.id for m in fork_point.values["messages"]]
        assert fork_ids[: len(turn1)] == turn1 and fork_ids[len(turn1)] == "user-fork"
        full_ids = {m.id for m in full}
        assert not {"user-2", "user-3"} & full_ids, "nothing of the other branch"
        assert ledger_ids(fork.values["context_ledger"]) <= full_ids, "the ledger names fork messages only"
        assert fork.values["context_ledger"]["last_report"]["ok"]
        assert validate_messages(live.messages) == [] and live.report.tokens <= WINDOW
        assert set(fork_ids) <= full_ids and "user-fork" in full_ids, "full history = this branch"
        assert original.values["messages"] == head.values["messages"], "the original branch is intact"
        """
    ),
    code(
        """
        conn.close()
        shutil.rmtree(workdir, ignore_errors=True)
        """
    ),
]

# --- frontier ---------------------------------------------------------------------------------

FRONTIER: list[Cell] = [
    md(
        """
        # Choose settings from your own runs

        **The point.** Every context manager asks you to guess its settings. `langgraph-ctx
        frontier` answers from your own traffic instead: it replays the threads your agent
        recorded through the pipeline under the defaults and their neighbouring settings (the
        rows of the frontier table in docs/frontier.md, plus any setting of yours), and prints for each
        what it costs (effective cost: uncached prompt tokens, cache-reusable ones at a tenth,
        summarizer tokens), what it hides (next-step recall: the share of what each next step
        used that the prompt still showed), whether every prompt fit the budget, and which
        setting to use.

        No model is called: the replay uses the recorded AI turns, the deterministic
        summarizer and an exact offline token counter. Here we record a thread with a SQLite
        checkpointer, run `frontier` on it, read the table and the plot, and apply the
        recommendation. Everything is written to a temporary folder.
        """
    ),
    PIP,
    md(
        """
        ## 1. Record a thread

        Your agent as it runs in production: `create_agent` with `ContextMemory` and a SQLite
        checkpointer. Here the model is the package's `ScriptedChatModel` replaying a plan of
        tool calls over this package's own source files (real, read-only tools), so the run is
        offline and the same every time; with a real model nothing below changes.
        """
    ),
    code(
        """
        import json
        import shutil
        import sqlite3
        import tempfile
        from pathlib import Path
        from typing import Any

        from IPython.display import Image, display
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage
        from langgraph.checkpoint.sqlite import SqliteSaver

        import langgraph_ctx
        from langgraph_ctx import ContextBudget, ContextMemory, ScriptedChatModel, strategies_from_config
        from langgraph_ctx_tools.cli import main as langgraph_ctx_cli
        from langgraph_ctx_tools.cli.folder_tools import make_tools

        workdir = Path(tempfile.mkdtemp(prefix="frontier-"))
        DB = workdir / "agent.sqlite"
        WINDOW = 8_000
        tools = make_tools(Path(langgraph_ctx.__file__).parent)  # the package's own sources


        def read(n: int, path: str, start: int, note: str) -> AIMessage:
            args = {"path": path, "start_line": start, "end_line": start + 99}
            return AIMessage(note, id=f"ai-{n}", tool_calls=[{"name": "read_file", "args": args, "id": f"call_{n}"}])


        # What the agent reads, and a name each file defines that the agent mentions later on.
        NAMES = {"pipeline/manager.py": "ContextManager", "graph/memory.py": "ContextMemory",
                 "summaries/summarizer.py": "SummaryOutcome", "prompt/view.py": "PromptView",
                 "strategies/window.py": "SlidingWindow", "ledger/edits.py": "record_pruned",
                 "graph/middleware.py": "ContextMiddleware", "tokens/approximate.py": "ApproximateCounter"}
        files = [*NAMES, "archive/archive.py", "tokens/exact.py", "strategies/compaction.py", "pipeline/steps.py"]
        plan = [(f, start) for f in files for start in (1, 101)]
        script = []
        for n, (path, start) in enumerate(plan, 1):
            earlier = plan[n - 5][0] if n > 4 else ""  # a file read four calls ago
            note = f"{NAMES[earlier]} in {earlier} matters here." if earlier in NAMES else ""
            script.append(read(n, path, start, note))
        script.append(AIMessage("ContextManager.build in pipeline/manager.py assembles the prompt; "
                                "TiktokenCounter in tokens/exact.py counts it.", id="ai-final"))
        conn = sqlite3.connect(DB, check_same_thread=False)
        memory = ContextMemory(context_window_tokens=WINDOW)
        agent = create_agent(ScriptedChatModel(messages=script), tools,
                             system_prompt="You explore a folder of source files with the tools you have.",
                             middleware=[memory.middleware()], checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": "explore-1"}}
        result = agent.invoke({"messages": [("user", "Where is the prompt built and counted?")]}, config)
        print(f"thread explore-1: {len(result['messages'])} messages in {DB.name}")
        """
    ),
    md(
        """
        ## 2. Run `frontier` on it

        The same command works in a shell:
        `langgraph-ctx frontier --db agent.sqlite --window 8000 --json rows.json --plot frontier.png`
        (every thread of the database, or `--thread ID`; message JSON files or folders of them
        work too, and `--model openai:gpt-4o-mini` takes the window from the model's profile).
        A thread the middleware managed is replayed whole: the messages it removed from live
        state come back from the archive in the same database. The system prompt of
        `create_agent` is not in the checkpoints, so we pass it with `--system-prompt`.
        """
    ),
    code(
        """
        ROWS, PLOT = workdir / "rows.json", workdir / "frontier.png"
        code = langgraph_ctx_cli([
            "frontier", "--db", str(DB), "--window", str(WINDOW),
            "--system-prompt", "You explore a folder of source files with the tools you have.",
            "--json", str(ROWS), "--plot", str(PLOT),
        ])
        assert code == 0
        """
    ),
    md(
        """
        ## 3. Read the table and the plot

        One row per setting. **eff. cost** is what the thread's prompts cost (cache-reusable
        tokens at `--cache-price`, 0.1 by default), **vs defaults** its ratio to the defaults'
        row; **recall** the next-step recall; **over budget** prompts over the window less the
        reserve (or calls that could not be fitted), **invalid** prompts a provider would
        reject; **restorable** the share of what left the prompt that comes back byte for
        byte. The `*` marks the recommendation: a change only when it buys something over the
        defaults (at least 1 point more recall at no more than `--max-cost` times their cost,
        1.0 unless you say more, or at least 2% less cost at no less recall, every prompt within
        the budget), else the defaults, with the runner-up and why on the line before.
        `--json` has the same rows, each with the strategies as configs and one line of Python
        that applies it.
        """
    ),
    code(
        """
        rows = json.loads(ROWS.read_text())
        for row in sorted(rows, key=lambda r: r["cost"])[:6]:
            print(f"{row['cost']:>9,.0f}  {row['cost_ratio']:.3f}x  {100 * row['recall']:5.1f}%  {row['setting']}")
        display(Image(str(PLOT)))
        """
    ),
    md(
        """
        ## 4. Apply the recommendation

        The rule favours what the agent sees within what you pay now, and changes nothing for
        less than a point of recall or 2% of cost (`--max-cost 1.2` allows 20% more, and the
        line then says what a point of recall costs). On a short thread a point is less than one name (the line says
        how many names the recall counts), so run `frontier` on a day of threads before you
        change a setting. The last line of the output says how to apply it; the JSON
        row holds the same setting as data.
        `strategies_from_config` builds the strategies back, `ContextBudget` the budget, and the
        next run of the agent uses them.
        """
    ),
    code(
        """
        best = next(r for r in rows if r["recommended"])
        print(best["setting"], "->", best["apply"])
        tuned = ContextMemory(
            budget=ContextBudget(context_window_tokens=WINDOW, **best["budget"]),
            strategies=strategies_from_config(best["strategies"]),
        )
        agent = create_agent(ScriptedChatModel(messages=script), tools,
                             system_prompt="You explore a folder of source files with the tools you have.",
                             middleware=[tuned.middleware()], checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": "explore-2"}}
        agent.invoke({"messages": [("user", "Where is the prompt built and counted?")]}, config)
        reports = tuned.get_reports(agent, config)
        print(f"{len(reports)} calls, largest prompt {max(r.tokens for r in reports):,} of {reports[0].limit:,} tokens")
        """
    ),
    code(
        """
        defaults = next(r for r in rows if r["defaults"])
        within = [r for r in rows if r["over_budget"] == 0 and r["invalid"] == 0
                  and r["cost"] <= defaults["cost"] + 1e-6]
        assert best in within and best["recall"] >= defaults["recall"]
        # A change only when it buys a point of recall, or 2% of cost at no less recall.
        assert best["defaults"] or best["recall"] >= defaults["recall"] + 0.01 - 1e-4 or (
            best["cost"] <= 0.98 * defaults["cost"] + 0.1)
        assert any("default" in r["setting"] for r in rows)
        assert all(r.tokens <= r.limit for r in reports), "the tuned agent stays in its budget"
        conn.close()
        shutil.rmtree(workdir, ignore_errors=True)
        """
    ),
]

NOTEBOOKS: dict[str, list[Cell]] = {
    "quickstart": QUICKSTART,
    "strategies": STRATEGIES,
    "persistence": PERSISTENCE,
    "frontier": FRONTIER,
}


def build_notebook(name: str, cells: list[Cell]) -> NotebookNode:
    nb = new_notebook()
    nb.metadata = {
        "kernelspec": {
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "name": "python3",
        },
        "language_info": {"name": "python"},
    }
    for i, (kind, source) in enumerate(cells):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell.id = f"{name}-{i:02d}"  # stable ids: a rebuild changes nothing
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def build() -> dict[Path, str]:
    """Every notebook's path and JSON text."""
    return {
        HERE / f"{name}.ipynb": nbformat.writes(build_notebook(name, cells)) + "\n"
        for name, cells in NOTEBOOKS.items()
    }


def without_outputs(text: str) -> str:
    """A notebook's JSON text with every output, execution count and timing removed (and the
    interpreter details an execution writes into `language_info`)."""
    nb = nbformat.reads(text, as_version=4)
    nb.metadata["language_info"] = {"name": nb.metadata.get("language_info", {}).get("name")}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    return nbformat.writes(nb) + "\n"


def execute(text: str) -> str:
    """Run a notebook top to bottom in a temporary folder; its JSON text with the outputs."""
    import tempfile

    from nbclient import NotebookClient

    nb = nbformat.reads(text, as_version=4)
    with tempfile.TemporaryDirectory() as folder:
        client = NotebookClient(
            nb,
            timeout=600,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": folder}},
        )
        client.execute()
    return nbformat.writes(nb) + "\n"


def main(argv: list[str]) -> int:
    check, again = "--check" in argv, "--execute" in argv
    names = [arg for arg in argv if not arg.startswith("--")]
    unknown = sorted(set(names) - set(NOTEBOOKS))
    if unknown:
        print(f"unknown notebook(s) {unknown}; choose from {sorted(NOTEBOOKS)}")
        return 2
    stale = []
    for path, text in build().items():
        if names and path.stem not in names:
            continue
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current is not None and without_outputs(current) == text and not again:
            continue
        if check:
            stale.append(path.name)
        else:
            path.write_text(execute(text), encoding="utf-8")
            print(f"wrote {path.relative_to(HERE.parent)} (executed)")
    if stale:
        print(f"out of date (run python notebooks/_build.py): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
