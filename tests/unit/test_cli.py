"""The `langgraph-ctx` command line, through `main(argv)` and once as a subprocess."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)

from langgraph_ctx import count_tokens
from langgraph_ctx.archive import encode_message
from langgraph_ctx_tools.cli import main
from langgraph_ctx_tools.cli.playback import (
    load_transcript,
    replay_model,
    replay_tools,
    split_turns,
)
from langgraph_ctx_tools.cli.threads import inspect_thread
from tests.conftest import TRAJECTORY_DIR, make_conversation

COMMANDS = ["demo", "replay", "inspect", "restore", "compact", "count", "view"]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in its own folder, so default paths (.langgraph_ctx/) land there."""
    monkeypatch.chdir(tmp_path)


def write(path: Path, messages: list[BaseMessage]) -> Path:
    path.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    return path


def recording(turns: int = 6) -> list[BaseMessage]:
    return make_conversation(turns, parallel=2, long_output=2_500, error_every=5, seed=3)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "Traceback" not in err
    return err


# --- help and usage -------------------------------------------------------------------------


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(command in out for command in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert f"usage: langgraph-ctx {command}" in capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_describes_every_command_and_states_defaults(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph_ctx_tools.cli.commands import _build_parser

    parser = _build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command_parser = sub.choices[command]
    assert command_parser.description, command
    text = command_parser.format_help()
    for action in command_parser._actions:
        if action.default not in (None, False, argparse.SUPPRESS) and action.help:
            assert f"default: {action.default}" in " ".join(text.split()), (command, action.dest)


def test_count_refuses_an_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = write(tmp_path / "t.json", [HumanMessage("hi")])
    assert main(["count", str(file), "--model", "nosuchmodel"]) == 2
    assert "no tokenizer is known for model 'nosuchmodel'" in one_error_line(capsys)
    for model in ("gpt-4o", "gpt-4", "gpt-4.1-mini", "o3-mini"):
        assert main(["count", str(file), "--model", model]) == 0, model


def test_replay_plot_checks_matplotlib_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "t.json", recording(2))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    assert main(["replay", str(source), "--plot", str(tmp_path / "p.png")]) == 2
    assert "--plot needs matplotlib" in one_error_line(capsys)
    assert not Path(".langgraph_ctx").exists()  # nothing was replayed


def test_out_folders_must_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "t.json", recording(2))
    out = tmp_path / "missing" / "c.json"
    assert main(["compact", str(source), "--window", "3000", "--out", str(out)]) == 2
    assert f"folder {out.parent} does not exist" in one_error_line(capsys)
    assert not out.parent.exists()
    restored = tmp_path / "missing" / "m.json"
    assert main(["restore", "m1", "--thread", "t", "--out", str(restored)]) == 2
    assert "does not exist" in one_error_line(capsys)


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compact", "x.json", "--window", "100"], "--out"),
        (["replay", "x.json", "--window", "abc"], "whole number"),
        (["replay", "x.json", "--window", "0"], ">= 1"),
        (["inspect", "--thread", "t"], "--db"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_usage_errors_are_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert needle in one_error_line(capsys)


def test_runs_as_a_subprocess(tmp_path: Path) -> None:
    file = write(tmp_path / "t.json", [SystemMessage("Be brief."), HumanMessage("hi")])
    done = subprocess.run(
        [sys.executable, "-m", "langgraph_ctx_tools.cli", "count", str(file)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("15 tokens for gpt-4o")


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["count", "compact", "replay"])
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such transcript file"),
        ("not json at all", "is not JSON"),
        ('{"type": "human"}', "not a message list"),
        ('[{"type": "nonsense", "data": {}}]', "not a LangChain message list"),
        ('[{"no": "type"}]', "not a LangChain message list"),
    ],
)
def test_bad_transcripts_get_one_line(
    command: str,
    content: str | None,
    needle: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    file = tmp_path / "bad.json"
    if content is not None:
        file.write_text(content, encoding="utf-8")
    argv = [command, str(file)]
    if command == "compact":
        argv += ["--window", "1000", "--out", str(tmp_path / "out.json")]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"langgraph-ctx {command}: ")
    assert needle in line


def test_binary_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    assert main(["count", str(tmp_path / "bin.json")]) == 2
    assert "not a UTF-8 text file" in one_error_line(capsys)


# --- count ------------------------------------------------------------------------------------


def test_count_is_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = recording(3)
    assert main(["count", str(write(tmp_path / "t.json", messages))]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{count_tokens(messages):,} tokens for gpt-4o (o200k_base)")
    assert f"{len(messages)} messages" in line


def test_count_with_tools_and_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = [SystemMessage("Be brief."), HumanMessage("What is the weather in Paris?")]
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    (tmp_path / "tools.json").write_text(json.dumps([tool]), encoding="utf-8")
    argv = ["count", str(write(tmp_path / "t.json", messages)), "--model", "gpt-4"]
    assert main([*argv, "--tools", str(tmp_path / "tools.json")]) == 0
    expected = count_tokens(messages, model="gpt-4", tools=[tool])
    out = capsys.readouterr().out
    assert out.startswith(f"{expected:,} tokens for gpt-4 (cl100k_base)")
    assert "tool schemas" in out


def test_count_rejects_bad_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tools.json").write_text("[42]", encoding="utf-8")
    file = write(tmp_path / "t.json", [HumanMessage("hi")])
    assert main(["count", str(file), "--tools", str(tmp_path / "tools.json")]) == 2
    assert "does not hold tool schemas" in one_error_line(capsys)


# --- compact and restore ------------------------------------------------------------------------


def test_compact_fits_and_everything_restores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = recording(6)
    source = write(tmp_path / "t.json", messages)
    out = tmp_path / "out" / "compacted.json"
    out.parent.mkdir()
    assert main(["compact", str(source), "--window", "3000", "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"wrote {out}: {len(messages)} messages")
    assert "(limit 3,000)" in line
    compacted = load_transcript(out)
    assert count_tokens(compacted) <= 3000 < count_tokens(messages)
    # Whatever was archived one by one (pruned or compacted outputs) restores byte for byte.
    restored = 0
    for message in messages:
        target = tmp_path / "restored.json"
        code = main(["restore", message.id or "", "--thread", "compact", "--out", str(target)])
        if code == 0:
            restored += 1
            assert target.read_bytes() == encode_message(message)
        else:
            assert code == 1
            assert "ArchiveEntryNotFoundError" in capsys.readouterr().err
    assert restored, "a 3,000-token window should prune or compact something"


def test_compact_with_strategies_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "strategies.json"
    config.write_text(json.dumps([{"type": "sliding_window"}]), encoding="utf-8")
    source = write(tmp_path / "t.json", recording(4))
    argv = ["compact", str(source), "--window", "3000", "--out", str(tmp_path / "o.json")]
    assert main([*argv, "--strategies", str(config)]) == 0
    edits = capsys.readouterr().out.split(";")[1].split(", ")
    assert not any(e.startswith(" compact") or e.startswith("compact") for e in edits)


@pytest.mark.parametrize(
    ("strategies", "needle"),
    [
        ('[{"type": "nope"}]', "unknown strategy type 'nope'"),
        ('{"type": "compaction", "min_chars": -1}', "must be >= 0"),
        ("[not json", "not valid JSON"),
        ("no-such-file.json", "neither JSON nor an existing file"),
    ],
)
def test_bad_strategies_are_usage_errors(
    strategies: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "t.json", recording(2))
    argv = ["compact", str(source), "--window", "3000", "--out", str(tmp_path / "o.json")]
    assert main([*argv, "--strategies", strategies]) == 2
    assert needle in one_error_line(capsys)


def test_compact_impossible_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "t.json", recording(2))
    out = tmp_path / "o.json"
    assert main(["compact", str(source), "--window", "50", "--out", str(out)]) == 1
    line = one_error_line(capsys)
    assert "ContextWindowExceededError" in line
    assert "limit is 50" in line
    assert not out.exists()


def test_restore_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["restore", "m1", "--thread", "t", "--archive", str(tmp_path / "nope")]) == 2
    assert "no archive directory" in one_error_line(capsys)
    # A thread the folder holds nothing of: a usage error listing the threads there.
    (tmp_path / "arch").mkdir()
    assert main(["restore", "m1", "--thread", "t", "--archive", str(tmp_path / "arch")]) == 2
    assert one_error_line(capsys).endswith("arch; threads there: none")
    source = write(tmp_path / "t.json", recording(6))
    argv = ["compact", str(source), "--window", "3000", "--out", "o.json", "--archive", "arch"]
    assert main([*argv, "--thread", "t"]) == 0
    capsys.readouterr()
    # The thread is there: an entry it lacks, or a reference of another thread, is exit 1.
    assert main(["restore", "m1", "--thread", "t", "--archive", str(tmp_path / "arch")]) == 1
    assert "ArchiveEntryNotFoundError" in one_error_line(capsys)
    ref = "lgctx:other:message:" + "0" * 64
    assert main(["restore", ref, "--thread", "t", "--archive", str(tmp_path / "arch")]) == 1
    assert "ArchiveAccessError" in one_error_line(capsys)


# --- replay -----------------------------------------------------------------------------------


def test_split_turns_follows_the_agent_loop() -> None:
    msgs: list[BaseMessage] = [
        SystemMessage("s"),
        HumanMessage("q1"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1"),
        AIMessage("a1"),
        AIMessage("a2"),  # two answers in a row: the second is a turn of its own
        HumanMessage("q2"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c2"}]),
        ToolMessage("r2", tool_call_id="c2"),  # the recording ends after a tool result
        HumanMessage("never answered"),
    ]
    turns = split_turns(msgs)
    assert [([m.content for m in inputs], n) for inputs, n in turns] == [
        (["s", "q1"], 2),
        ([], 1),
        (["q2"], 1),
    ]


def test_replay_tools_answer_with_the_recorded_output() -> None:
    msgs = recording(2)
    tools = {t.name: t for t in replay_tools(msgs)}
    first = next(m for m in msgs if isinstance(m, ToolMessage))
    call = next(
        tc for m in msgs if isinstance(m, AIMessage) for tc in m.tool_calls
        if tc["id"] == first.tool_call_id
    )  # fmt: skip
    result = tools[call["name"]].invoke({**call, "type": "tool_call"})
    assert result == first
    unknown = {**call, "id": "never-recorded", "type": "tool_call"}
    assert "no output was recorded" in tools[call["name"]].invoke(unknown).content


def test_scripted_model_reports_exact_prompt_tokens() -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    model = replay_model([AIMessage("hello", id="a1")])
    tools = replay_tools(recording(1))
    bound = model.bind_tools(tools)
    prompt = [SystemMessage("Be brief."), HumanMessage("hi")]
    reply = bound.invoke(prompt)
    assert reply.content == "hello"
    schemas = [convert_to_openai_tool(t) for t in tools]  # what a provider would receive
    assert "tool_call_id" not in json.dumps(schemas)  # injected, never shown to the model
    assert reply.usage_metadata["input_tokens"] == count_tokens(prompt, tools=schemas)
    assert "no more AI turns" in bound.invoke(prompt).content


def test_replay_runs_the_recording_through_the_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = recording(6)
    source = write(tmp_path / "run.json", messages)
    plot = tmp_path / "plot.png"
    assert main(["replay", str(source), "--window", "3000", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    for label in ("prompt tokens per call", "edits", "cache-reusable share"):
        assert label in out
    assert "limit 3,000" in out
    assert plot.read_bytes().startswith(b"\x89PNG")
    reports = json.loads((tmp_path / ".langgraph_ctx/replay-run.reports.json").read_text())
    ai = [m for m in messages if isinstance(m, AIMessage)]
    assert len(reports["calls"]) == len(ai)
    assert all(c["tokens"] <= c["limit"] == 3000 for c in reports["calls"])
    decisions = [d for c in reports["calls"] for d in c["report"]["decisions"]]
    kinds = {d["kind"] for d in decisions if d["message_ids"]}  # decisions that touched some
    assert kinds & {"compact", "prune", "shrink"}
    # The thread holds the recording: every recorded message, same content, same ids.
    data = inspect_thread(
        Path(".langgraph_ctx/replay.sqlite"), "replay-run", Path(".langgraph_ctx/archive")
    )
    replayed = {m.id: m for m in data["full"]}
    assert set(replayed) == {m.id for m in messages}
    for original in messages:
        assert replayed[original.id].content == original.content


def test_replay_thread_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "run.json", recording(2))
    assert main(["replay", str(source)]) == 0  # default thread: reset on every run
    assert main(["replay", str(source)]) == 0
    assert "was reset" in capsys.readouterr().err
    assert main(["replay", str(source), "--thread", "mine"]) == 0
    capsys.readouterr()
    assert main(["replay", str(source), "--thread", "mine"]) == 2
    assert "already exists" in one_error_line(capsys)


def test_replay_reports_where_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "run.json", recording(2))
    db, reports = tmp_path / "x" / "r.sqlite", tmp_path / "y" / "r.json"
    argv = ["replay", str(source), "--db", str(db), "--report-json", str(reports)]
    assert main([*argv, "--archive", str(tmp_path / "a"), "--reserved", "500"]) == 0
    assert db.is_file()
    assert json.loads(reports.read_text())["reserved"] == 500
    assert str(reports) in capsys.readouterr().out


def test_replay_impossible_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "run.json", recording(2))
    assert main(["replay", str(source), "--window", "200"]) == 1
    line = one_error_line(capsys)
    assert "ContextWindowExceededError" in line


def test_replay_needs_ai_turns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "run.json", [HumanMessage("hi")])
    assert main(["replay", str(source)]) == 2
    assert "no AI messages" in one_error_line(capsys)


def test_replay_summarizer_must_be_usable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "run.json", recording(2))
    assert main(["replay", str(source), "--summarizer", "nosuchprovider:model-x"]) == 2
    assert "cannot use model 'nosuchprovider:model-x'" in one_error_line(capsys)


# --- inspect ----------------------------------------------------------------------------------


def test_inspect_a_replayed_thread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "run.json", recording(6))
    assert main(["replay", str(source), "--window", "3000"]) == 0
    capsys.readouterr()
    assert main(["inspect", "--db", ".langgraph_ctx/replay.sqlite", "--thread", "replay-run"]) == 0
    out = capsys.readouterr().out
    for label in ("live messages", "full history", "running summary", "last report"):
        assert label in out
    assert f"{len(recording(6))} messages" in out


def test_inspect_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--db", "missing.sqlite", "--thread", "t"]) == 2
    assert "no checkpoint database" in one_error_line(capsys)
    assert not Path("missing.sqlite").exists()
    source = write(tmp_path / "run.json", recording(1))
    assert main(["replay", str(source)]) == 0
    capsys.readouterr()
    assert main(["inspect", "--db", ".langgraph_ctx/replay.sqlite", "--thread", "nope"]) == 2
    assert "threads there: replay-run" in one_error_line(capsys)
    (tmp_path / "junk.sqlite").write_bytes(b"this is not sqlite" * 100)
    assert main(["inspect", "--db", "junk.sqlite", "--thread", "t"]) == 2
    assert "not a checkpoint database" in one_error_line(capsys)


# --- a real recording -------------------------------------------------------------------------


@pytest.mark.trajectories
def test_replay_a_real_trajectory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The recorded run as the repository stores it: `replay` reads a gzip-compressed file.
    path = TRAJECTORY_DIR / "taubench-gpt4o-airline__task028_trial1.json.gz"
    assert main(["replay", str(path), "--window", "4000", "--plot", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "none lost" in out
    name = "taubench-gpt4o-airline__task028_trial1"
    reports = json.loads(Path(".langgraph_ctx", f"replay-{name}.reports.json").read_text())
    recorded = load_transcript(path)
    assert len(reports["calls"]) == sum(isinstance(m, AIMessage) for m in recorded)
    assert max(c["tokens"] for c in reports["calls"]) <= 4000


def test_replay_plot_marks_each_edit_in_its_kind_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision mark sits in the labelled row of its kind, not at a token-like height."""
    import matplotlib.pyplot as plt

    from langgraph_ctx_tools.cli.runs import _MARKS

    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    source = write(tmp_path / "run.json", recording(6))
    assert main(["replay", str(source), "--window", "3000", "--plot", str(tmp_path / "p.png")]) == 0
    (figure,) = figures
    tokens, edits = figure.axes[:2]
    assert [t.get_text() for t in edits.get_yticklabels()] == list(_MARKS)
    rows = {round(y) for c in edits.collections for _, y in c.get_offsets()}
    assert rows and rows <= set(range(len(_MARKS)))
    assert tokens.get_ylabel() == "prompt tokens" and not tokens.collections  # no marks up there
    plt.close(figure)


def test_inspect_names_what_the_archive_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lost archive hides only what it held: the live history is still counted and shown."""
    source = write(tmp_path / "run.json", recording(6))
    assert main(["replay", str(source), "--window", "2000"]) == 0
    capsys.readouterr()
    shutil.rmtree(".langgraph_ctx/archive")
    assert main(["inspect", "--db", ".langgraph_ctx/replay.sqlite", "--thread", "replay-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "missing what the archive cannot read" in out
    assert "no archive entry" in out
