"""What a newcomer's first commands print (issue 51, break 7): `restore` of a wrong thread, the
edits `inspect` lists, tables piped to a file or another program.

Each test runs the real command (`main(argv)`) on a real recorded thread: a replay into a SQLite
checkpoint file and a directory archive, read back as a user would.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)

from langgraph_ctx_tools.cli import main


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default paths (.langgraph_ctx/) land in the test's own folder."""
    monkeypatch.chdir(tmp_path)


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def _agent_run(turns: int = 8) -> list[BaseMessage]:
    """A coding agent that thinks aloud: long model turns, each calling a tool."""
    messages: list[BaseMessage] = [SystemMessage("You explore a repository.", id="sys")]
    messages.append(HumanMessage("Find where the tokens are counted.", id="h1"))
    for n in range(1, turns + 1):
        thinking = "\n".join(f"step {n}.{k}: reading module_{n} for counters" for k in range(30))
        call = {"name": "read_file", "args": {"path": f"module_{n}.py"}, "id": f"c{n}"}
        messages.append(AIMessage(thinking, tool_calls=[call], id=f"ai{n}"))
        body = "\n".join(f"def counter_{n}_{k}(x): return x + {k}" for k in range(6))
        messages.append(ToolMessage(body, tool_call_id=f"c{n}", name="read_file", id=f"t{n}"))
    messages.append(AIMessage("The tokens are counted in module_3.py.", id="final"))
    return messages


def _replayed(window: int = 3_000) -> None:
    """The run replayed into .langgraph_ctx/replay.sqlite, thread `replay-run`."""
    source = Path("run.json")
    source.write_text(json.dumps(messages_to_dict(_agent_run())), encoding="utf-8")
    assert main(["replay", str(source), "--window", str(window)]) == 0


# --- restore: a thread the archive does not hold ---------------------------------------------


def test_restore_of_an_unknown_thread_lists_the_threads_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`restore REF --thread nosuch` is a usage error (exit 2) listing the archive's threads,
    as `inspect`, `view` and `frontier` do for a database's threads; it was exit 1 with a long
    `ArchiveEntryNotFoundError:` line."""
    _replayed()
    capsys.readouterr()
    assert main(["restore", "ai1", "--thread", "nosuch"]) == 2
    line = _one_error_line(capsys)
    assert line == (
        "langgraph-ctx restore: no thread 'nosuch' in .langgraph_ctx/archive; "
        "threads there: replay-run"
    )
    # A reference of the thread that is there, under a wrong --thread: the same line.
    assert main(["restore", "lgctx:replay-run:message:" + "0" * 64, "--thread", "x"]) == 2
    assert "threads there: replay-run" in _one_error_line(capsys)
    # An archive folder that holds no thread yet says so.
    Path("empty").mkdir()
    assert main(["restore", "t1", "--thread", "t", "--archive", "empty"]) == 2
    assert _one_error_line(capsys).endswith("no thread 't' in empty; threads there: none")
    # The thread that is there still restores, and a missing entry of it is still exit 1.
    assert main(["restore", "ai1", "--thread", "replay-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"]["id"] == "ai1"
    assert main(["restore", "nope", "--thread", "replay-run"]) == 1
    assert "ArchiveEntryNotFoundError" in _one_error_line(capsys)


# --- inspect: what an edit says follows what was found ----------------------------------------


def _edit_row(out: str, edit: str) -> list[str]:
    (row,) = [line for line in out.splitlines() if line.startswith(f"│ {edit} ")]
    return [cell.strip() for cell in row.strip("│").split("│")]


def test_inspect_says_archived_only_beside_the_references_it_found(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`inspect`'s "model turns shortened" row said "archived whole" beside 0 references: a
    shortened turn's decision names no reference, and none was looked up. Now each is found
    by its message id, and an edit whose references are not in the archive read says that."""
    _replayed()
    capsys.readouterr()
    db = ".langgraph_ctx/replay.sqlite"
    assert main(["inspect", "--db", db, "--thread", "replay-run"]) == 0
    edit, happened, _, messages, _, refs = _edit_row(capsys.readouterr().out, "model turns")
    assert edit == "model turns shortened" and int(messages) > 0
    assert happened.startswith("archived whole;") and refs == messages
    # Every reference listed restores (the shortened turn's original, whole).
    assert main(["restore", "ai1", "--thread", "replay-run", "--json"]) == 0
    assert "step 1.29" in json.loads(capsys.readouterr().out)["data"]["content"]
    # Pointed at another archive folder, nothing of the turns is found: not "archived whole".
    Path("elsewhere").mkdir()
    argv = ["inspect", "--db", db, "--thread", "replay-run", "--archive", "elsewhere"]
    assert main(argv) == 0
    _, happened, _, _, _, refs = _edit_row(capsys.readouterr().out, "model turns")
    assert refs == "0" and "archived" not in happened
    assert "no reference found in the archive read" in happened


# --- piped output: nothing cut ---------------------------------------------------------------


def test_piped_tables_cut_no_label_and_fold_only_free_text(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped (stdout not a terminal), tables were cut at 110 columns: setting names wrapped
    over 2-5 lines and "alt: LC SummarizationMid..." cut. Now every label and figure is whole
    on its row; only long free text folds, at `FOLD_WIDTH`."""
    from langgraph_ctx_tools.cli.output import Output

    setting = "turns settle after the next, from 400 chars, args 200 (stop 31), and more"
    out = Output()
    header = ["setting", "eff. cost", "vs defaults", "recall", "one search", "over budget"]
    out.grid("frontier", header, [[setting, "550.8k", "1.281x", "85.4%", "96.3%", "0"]])
    label = "a label as long as any row label of a command, never wrapped"
    free = " ".join(f"word{n}" for n in range(80))
    out.table("demo", [(label, free)], {"explored": "/a/" + "deep/" * 40 + "folder"})
    out.text("the agent's last answer", free)
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    (row,) = [line for line in lines if setting in line]  # whole, on one line
    assert "1.281x" in row and "LC SummarizationMid" not in printed
    assert any(label in line for line in lines)
    assert "deep/" * 10 in printed.replace("│", "").replace("\n", "").replace(" ", "")
    # Free text folds: no line of the table or the panel is wider than the fold.
    widest = max(len(line) for line in lines if "word" in line)
    assert widest <= 110, widest  # output.FOLD_WIDTH
    assert re.search(r"word79", printed)
    # On a terminal, tables still fit its width (as before).
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    terminal = Output()
    terminal.grid("frontier", header, [[setting, "550.8k", "1.281x", "85.4%", "96.3%", "0"]])
    shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # a terminal's styles
    assert max(len(line) for line in shown.splitlines()) <= 80


def test_inspect_piped_shows_each_edit_on_one_row(capsys: pytest.CaptureFixture[str]) -> None:
    """The grid of `inspect` piped: an edit's name and what it did read on one row each."""
    _replayed()
    capsys.readouterr()
    assert main(["inspect", "--db", ".langgraph_ctx/replay.sqlite", "--thread", "replay-run"]) == 0
    out = capsys.readouterr().out
    row = _edit_row(out, "model turns")
    assert row[1].endswith("the prompt keeps their first and last lines and their calls")
