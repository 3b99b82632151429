"""`langgraph-ctx demo`: the tools, the scripted explorer, and the whole run, offline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from langgraph_ctx import count_tokens
from langgraph_ctx_tools.cli import INSTALL_HINT, main
from langgraph_ctx_tools.cli.demo import run_demo
from langgraph_ctx_tools.cli.edits import edit_of
from langgraph_ctx_tools.cli.explorer import ScriptedExplorer, keywords, read_view
from langgraph_ctx_tools.cli.folder_tools import make_tools


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small project: a package with a sub-package, a README and a binary file."""
    root = tmp_path / "project"
    (root / "pkg" / "store").mkdir(parents=True)
    (root / "README.md").write_text("# Project\n\nCounts tokens and archives messages.\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (root / ".hidden").write_text("secret")
    body = "\n".join(f"    total += {i}  # count tokens" for i in range(140))
    (root / "pkg" / "tokens.py").write_text(
        f'"""Token counting."""\n\n\ndef count_tokens(items):\n    total = 0\n{body}\n'
        "    return total\n\n\nclass TokenCounter:\n    pass\n"
    )
    lines = "\n".join(f"    save(messages, {i})  # archive" for i in range(160))
    (root / "pkg" / "store" / "archive.py").write_text(
        f'"""Archiving."""\n\n\ndef archive_messages(messages):\n{lines}\n    return None\n'
    )
    notes = "\n".join(f"Note {i}: messages are archived." for i in range(120))
    (root / "pkg" / "notes.txt").write_text(notes + "\n")
    for k in range(4):  # a few more modules to read
        code = "\n".join(f"    step_{j} = helper({j}, {k})" for j in range(100 + k))
        (root / "pkg" / f"mod{k}.py").write_text(f"def run_{k}():\n{code}\n")
    return root


def call(tool: Any, **args: Any) -> ToolMessage:
    result = tool.invoke({"name": tool.name, "args": args, "id": "c1", "type": "tool_call"})
    assert isinstance(result, ToolMessage)
    assert result.id == "t-c1"
    return result


# --- tools --------------------------------------------------------------------------------------


def test_list_dir_shows_folders_and_files(tree: Path) -> None:
    tools = {t.name: t for t in make_tools(tree)}
    root = call(tools["list_dir"], path=".").content
    assert root.splitlines() == [
        "./",
        "dir  pkg/",
        "file README.md  3 lines  48 bytes",
        f"file logo.png  0 lines  {(tree / 'logo.png').stat().st_size} bytes",
    ]
    assert "dir  pkg/store/" in call(tools["list_dir"], path="pkg").content


def test_read_file_numbers_lines_and_pages(tree: Path) -> None:
    read = {t.name: t for t in make_tools(tree)}["read_file"]
    text = call(read, path="pkg/tokens.py", start_line=1, end_line=3).content
    assert text.splitlines()[:3] == [
        "pkg/tokens.py (lines 1-3 of 150)",
        '    1| """Token counting."""',
        "    2| ",
    ]
    assert "[more: call read_file with start_line=4]" in text
    long = call(read, path="pkg/tokens.py").content
    assert "lines 1-100 of 150" in long  # one call returns at most 100 lines


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"path": "../outside.txt"}, "outside the folder"),
        ({"path": "missing.py"}, "does not exist"),
        ({"path": "logo.png"}, "binary file"),
        ({"path": "pkg"}, "not a file"),
        ({"path": "README.md", "start_line": 50}, "past the end"),
    ],
)
def test_read_file_errors_come_back_as_error_results(
    tree: Path, args: dict[str, Any], needle: str
) -> None:
    read = {t.name: t for t in make_tools(tree)}["read_file"]
    result = call(read, **args)
    assert result.status == "error"
    assert needle in result.content


def test_search_text_is_case_insensitive_and_skips_binaries(tree: Path) -> None:
    search = {t.name: t for t in make_tools(tree)}["search_text"]
    text = call(search, pattern="class tokencounter", path=".").content
    assert text.splitlines() == [
        "1 matches for /class tokencounter/ under .",
        "pkg/tokens.py:149: class TokenCounter:",
    ]
    many = call(search, pattern="archive", path="pkg").content
    assert many.startswith("281 matches for /archive/ under pkg (first 40 shown)")
    assert call(search, pattern="(", path=".").status == "error"


# --- the explorer -------------------------------------------------------------------------------


def test_keywords_stem_the_request() -> None:
    assert keywords("Find where tokens are counted.") == ["token", "count"]
    assert keywords("Find where messages are archived.") == ["messag", "archiv"]
    assert keywords("find it") == []


def explorer_step(messages: list[BaseMessage], tree: Path) -> AIMessage:
    model = ScriptedExplorer()
    schemas = [convert_to_openai_tool(t) for t in make_tools(tree)]
    schemas.append({"type": "function", "function": {"name": "recall", "parameters": {}}})
    return model.respond(messages, schemas)


def test_explorer_lists_then_reads_the_largest_files(tree: Path) -> None:
    task = HumanMessage("Map this code base.")
    first = explorer_step([task], tree)
    assert first.tool_calls[0]["name"] == "list_dir"
    listing = call({t.name: t for t in make_tools(tree)}["list_dir"], path=".")
    ai = AIMessage("", tool_calls=[{"name": "list_dir", "args": {"path": "."}, "id": "c1"}])
    second = explorer_step([task, ai, listing], tree)
    assert second.tool_calls[0]["args"] == {"path": "pkg"}


def test_explorer_does_not_repeat_what_the_summary_says_is_done(tree: Path) -> None:
    summary = SystemMessage(
        '<summary>\n<completed>\n- Called list_dir({"path":"."}) → ok\n</completed>\n'
        "<current_state>\n- Last stated plan or intent: Reading a.py. Still to read: "
        "pkg/tokens.py, pkg/notes.txt.\n</current_state>\n</summary>"
    )
    step = explorer_step([summary, HumanMessage("Map this code base.")], tree)
    assert step.tool_calls[0]["name"] == "read_file"
    assert step.tool_calls[0]["args"]["path"] == "pkg/tokens.py"


def test_explorer_recalls_a_compacted_listing(tree: Path) -> None:
    ai = AIMessage("", tool_calls=[{"name": "list_dir", "args": {"path": "."}, "id": "c1"}])
    placeholder = ToolMessage(
        '[compacted tool output]\ntool: list_dir\nref: lgctx:t:message:abc\nCall recall(ref="'
        'lgctx:t:message:abc") to read the full output.',
        tool_call_id="c1",
    )
    step = explorer_step([HumanMessage("Map this code base."), ai, placeholder], tree)
    assert step.tool_calls[0] == {
        "name": "recall",
        "args": {"ref": "lgctx:t:message:abc"},
        "id": "call_0000",
        "type": "tool_call",
    }
    view = read_view([ai, placeholder])
    assert view.hidden == {'list_dir:{"path":"."}': "lgctx:t:message:abc"}


def test_explorer_restates_the_last_output_before_its_next_step(tree: Path) -> None:
    task = HumanMessage("Map this code base.")
    listing = call({t.name: t for t in make_tools(tree)}["list_dir"], path=".")
    ai = AIMessage("", tool_calls=[{"name": "list_dir", "args": {"path": "."}, "id": "c1"}])
    lines = explorer_step([task, ai, listing], tree).content.splitlines()
    assert lines[0] == "Notes on the last output (./):"
    assert "- dir  pkg/" in lines
    assert lines[-1] == "Listing pkg next."  # the intent is the turn's last line


def test_explorer_recalls_once_and_reads_what_an_excerpt_shows(tree: Path) -> None:
    request = HumanMessage("Find where tokens are counted.")
    search = {"pattern": "token.*count|count.*token", "path": "."}
    ai = AIMessage("", tool_calls=[{"name": "search_text", "args": search, "id": "c1"}])
    excerpt = ToolMessage(
        '[compacted tool output: search_text, 900 chars, 2 of 9 lines shown; call recall(ref="'
        'lgctx:t:message:abc") for the rest]\n9 matches for /token.*count|count.*token/ under .\n'
        "pkg/tokens.py:4: def count_tokens(items):",
        tool_call_id="c1",
    )
    view = read_view([request, ai, excerpt])
    assert view.matches[search["pattern"]] == [("pkg/tokens.py", 4, "def count_tokens(items):")]
    step = explorer_step([request, ai, excerpt], tree)
    assert step.tool_calls[0]["args"]["pattern"].endswith("count_tokens\\b")
    # A recall whose own output comes back compacted is not repeated.
    recall = AIMessage(
        "", tool_calls=[{"name": "recall", "args": {"ref": "lgctx:t:message:x"}, "id": "c2"}]
    )
    again = ToolMessage(
        '[compacted tool output: recall, 900 chars; call recall(ref="lgctx:t:message:y")]',
        tool_call_id="c2",
    )
    assert "lgctx:t:message:x" in read_view([recall, again]).recalled


def test_explorer_answers_when_nothing_is_left(tree: Path) -> None:
    reply = explorer_step([HumanMessage("Summarize what you learned.")], tree)
    assert not reply.tool_calls
    assert reply.content.startswith("Answer to: Summarize what you learned.")


def test_explorer_reports_exact_prompt_tokens(tree: Path) -> None:
    tools = make_tools(tree)
    bound = ScriptedExplorer().bind_tools(tools)
    prompt = [SystemMessage("Explore."), HumanMessage("Map this code base.")]
    reply = bound.invoke(prompt)
    schemas = [convert_to_openai_tool(t) for t in tools]
    assert reply.usage_metadata["input_tokens"] == count_tokens(prompt, tools=schemas)
    assert reply.id == "ai-0001"
    assert reply.tool_calls[0]["id"] == "call_0001"


# --- whole runs ---------------------------------------------------------------------------------


def test_the_demo_runs_the_default_strategies(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_ctx.strategies import default_strategies
    from langgraph_ctx_tools.cli import demo

    seen: list[Any] = []
    real = demo.execute

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs["memory"])
        return real(**kwargs)

    monkeypatch.setattr(demo, "execute", spy)
    run_demo(root=tree, window=3000, steps=2)
    assert seen[0].manager.strategies == default_strategies()
    assert seen[0].hint_threshold == 0.8  # the library's default too


def table_row(out: str, label: str) -> str:
    """The value cell of one row of the final table."""
    row = next(line for line in out.splitlines() if f"│ {label}" in line)
    return row.split("│")[2].strip()


def test_demo_on_a_small_tree(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A window in which a turn ends over the hint threshold, so the run also rebuilds.
    assert main(["demo", str(tree), "--window", "3500"]) == 0
    out = capsys.readouterr().out
    for label in (
        "prompt tokens per call",
        "edits",
        "tool outputs excerpted",
        "model turns shortened",
        "summaries",
        "cache-reusable share",
        "restorable from the archive",
        "full history",
        ".langgraph_ctx/demo.sqlite",
        "the agent's last answer",
    ):
        assert label in out
    reports = json.loads(Path(".langgraph_ctx/demo.reports.json").read_text())
    assert reports["root"] == str(tree.resolve())
    calls = reports["calls"]
    assert len(calls) > 10
    assert all(c["tokens"] <= c["limit"] == 3500 for c in calls)
    decisions = [d for c in calls for d in c["report"]["decisions"] if d["message_ids"]]
    kinds = {d["kind"] for d in decisions}
    assert {"compact", "shrink", "auto_compact"} <= kinds
    # What the defaults do, each counted in the table: excerpts of tool outputs as they
    # arrive, shortened model turns, summaries quoting the lines the agent used.
    compacted = [d for d in decisions if d["kind"] == "compact"]
    outputs = sum(len(d["message_ids"]) for d in compacted if "model_turns" not in d["detail"])
    turns = sum(len(d["message_ids"]) for d in compacted if "model_turns" in d["detail"])
    assert outputs > 0 and any(d["detail"].get("arrival") for d in compacted)
    assert turns > 0
    assert table_row(out, "tool outputs excerpted").startswith(f"{outputs} (")
    assert table_row(out, "model turns shortened").startswith(f"{turns} (")
    assert any(d["detail"].get("quoted_lines") for d in decisions if d["kind"] == "auto_compact")
    assert "quoting" in table_row(out, "summaries")
    reusable = sum(c["cache_reusable_tokens"] for c in calls) / sum(c["tokens"] for c in calls)
    assert table_row(out, "cache-reusable share").startswith(f"{reusable:.0%} of prompt tokens")
    assert reusable > 0.5
    assert max(c["unmanaged_tokens"] for c in calls) > 2 * 3500
    assert reports["events"], "a finished turn over the hint threshold rebuilds"
    assert not list(tree.glob(".langgraph_ctx"))  # nothing written into the explored tree


def test_demo_loses_nothing_and_repeats_itself(tree: Path) -> None:
    first = run_demo(root=tree, window=4000)
    assert first.log.error is None
    check = first.check
    assert check is not None
    assert check.archived and check.restored == check.archived
    assert check.missing == []
    assert check.full_history == check.produced == len(first.log.produced)
    again = run_demo(root=tree, window=4000)  # the default thread is reset
    assert "was reset" in again.notes[0]
    assert [c.report for c in again.log.calls] == [c.report for c in first.log.calls]
    assert again.answer == first.answer


def test_demo_steps_bound_each_request(tree: Path) -> None:
    result = run_demo(root=tree, window=20_000, steps=2)
    assert len(result.log.calls) <= 2 * 5
    assert result.log.error is None


def test_demo_on_the_default_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "langgraph_ctx" in out  # the package's own sources
    assert "none lost" in out
    assert Path(".langgraph_ctx/archive").is_dir()


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["demo", "no-such-folder"], 2, "is not a folder"),
        (["demo", "--model", "nosuchprovider:x"], 2, "cannot use model 'nosuchprovider:x'"),
        (["demo", "--steps", "0"], 2, ">= 1"),
        (["demo", "--thread", "t1", "--window", "100"], 1, "ContextWindowExceededError"),
    ],
)
def test_demo_errors_are_one_line(
    argv: list[str], code: int, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert "\n" not in err
    assert "Traceback" not in err


def test_demo_refuses_to_mix_an_existing_thread(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", str(tree), "--thread", "mine", "--steps", "2"]) == 0
    capsys.readouterr()
    assert main(["demo", str(tree), "--thread", "mine", "--steps", "2"]) == 2
    assert "already exists" in capsys.readouterr().err


def test_a_reset_thread_starts_with_an_empty_archive(tree: Path) -> None:
    # Same ids, different content: a stale archive index would restore the earlier run's.
    run_demo(root=tree, window=4000, steps=3)
    result = run_demo(root=tree, window=4000)
    assert result.check is not None
    assert result.check.archived
    assert result.check.restored == result.check.archived


def test_without_the_cli_extra_one_line_and_exit_2(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As if `[cli]` were not installed: every rich module (loaded or not) fails to import, and
    # the command modules are imported afresh.
    for name in ["rich", *(n for n in sys.modules if n.startswith("rich."))]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in ("commands", "handlers", "output"):
        monkeypatch.delitem(sys.modules, f"langgraph_ctx_tools.cli.{name}", raising=False)
    assert main(["demo", str(tree), "--window", "4000", "--steps", "3"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == INSTALL_HINT + "\n"
    assert not Path(".langgraph_ctx").exists()  # nothing ran


def test_a_failed_model_run_keeps_the_stored_thread_and_its_reports(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph_ctx import ScriptedChatModel
    from langgraph_ctx_tools.cli.threads import inspect_thread

    assert main(["demo", str(tree), "--steps", "3"]) == 0
    reports = Path(".langgraph_ctx/demo.reports.json")
    before = reports.read_text()
    stored = inspect_thread(
        Path(".langgraph_ctx/demo.sqlite"), "demo", Path(".langgraph_ctx/archive")
    )
    assert stored["live"] and stored["full"]
    capsys.readouterr()

    def unreachable(spec: str) -> ScriptedChatModel:
        return ScriptedChatModel(failures={1: ConnectionError("Connection error.")})

    monkeypatch.setattr("langgraph_ctx_tools.cli.demo.init_model", unreachable)
    assert main(["demo", str(tree), "--model", "openai:gpt-4o-mini"]) == 1
    captured = capsys.readouterr()
    assert "Connection error" in captured.err
    assert "keep the earlier run" in captured.err
    assert reports.read_text() == before
    failed = json.loads(Path(".langgraph_ctx/demo.failed.reports.json").read_text())
    assert "Connection error" in failed["error"]
    after = inspect_thread(
        Path(".langgraph_ctx/demo.sqlite"), "demo", Path(".langgraph_ctx/archive")
    )
    assert [m.id for m in after["live"]] == [m.id for m in stored["live"]]
    assert [m.id for m in after["full"]] == [m.id for m in stored["full"]]


def test_inspect_leads_to_restore(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`inspect` lists every kind of edit the run made, each with references that restore."""
    import re

    assert main(["demo", str(tree), "--window", "3500"]) == 0  # a turn ends over the hint
    progress = capsys.readouterr().err
    reports = json.loads(Path(".langgraph_ctx/demo.reports.json").read_text())
    # Progress showed every call that edited the prompt, as it happened.
    edited = [
        c["call"]
        for c in reports["calls"]
        if any(
            d["message_ids"] or d["tokens_before"] != d["tokens_after"]
            for d in c["report"]["decisions"]
        )
    ]
    assert edited
    shown = [int(n) for n in re.findall(r"demo agent: call (\d+), ", progress)]
    assert set(edited) <= set(shown)
    assert main(["inspect", "--db", ".langgraph_ctx/demo.sqlite", "--thread", "demo"]) == 0
    out = capsys.readouterr().out
    decisions = [d for c in reports["calls"] for d in c["report"]["decisions"]]
    kinds = {d["kind"] for d in decisions if d["message_ids"]}
    assert kinds & {"prune", "compact"} and "auto_compact" in kinds
    # inspect names each edit with the words the demo's table and progress lines use.
    words = {edit_of(d) for d in decisions if d["message_ids"]} - {None}
    assert "summarized" in words
    grid = out.split("what the thread's edits took out", 1)[1].split("restore any of these", 1)[0]
    for word in words | {"cleared by a rebuild"}:
        assert re.search(rf"│[\w ]* {re.escape(str(word))}\s+│", grid), word
    refs = re.findall(r"^  (\S.*?)\s+(lgctx:\S+)$", out, re.M)
    assert {word for word, _ in refs} >= {"summarized", "cleared by a rebuild"}
    for _, ref in refs:
        assert main(["restore", ref, "--thread", "demo"]) == 0, ref
    assert "written without a model" in out  # "fallback" explained where it is shown
