"""What the commands print carries nothing a terminal acts on, and no password (issue 50).

Before the fix `inspect` printed a crafted ledger's window id and summary with raw OSC 0 (the
window title), OSC 52 (a clipboard write) and CSI 2J (clear screen), and read rich markup
from the file (`[link=https://evil.example/]` became a hyperlink); `frontier` printed thread
ids from the database as they were; a PostgreSQL password was echoed in errors. Every command
runs through `langgraph_ctx_tools.cli.main`, on checkpoints of a real `create_agent` run on a real
`SqliteSaver` file, edited the way an attacker would.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

from langgraph_ctx_tools.cli import main
from tests.reliability.test_handed_files import (
    edit_ledgers,
    one_error_line,
    record_agent_thread,
)

TITLE = "\x1b]0;pwned-title\x07"
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
CLEAR = "\x1b[2J\x1b[H"
LINK = "[link=https://evil.example/]click[/link]"
HOSTILE = f"{TITLE}{CLIPBOARD}{CLEAR}{LINK} \u202egnp.exe\r\x9b31m\x85"
"""Every way a string from a file tried to act on the terminal, in one value."""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)


def hostile_ledger(ledger: dict[str, Any]) -> None:
    ledger["window"] = {"start_id": HOSTILE}
    ledger["summary"] = {"text": f"summary {HOSTILE}\nsecond line", "source": HOSTILE}
    ledger["entities"] = {"values": {HOSTILE: HOSTILE}}
    ledger["last_report"]["error"] = HOSTILE


def assert_inert(text: str) -> None:
    """No byte a terminal acts on: no ESC, BEL, CR, C1 code or bidi override."""
    acting = [c for c in text if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t"]
    assert not acting, sorted({hex(ord(c)) for c in acting})


def test_a_crafted_ledger_reaches_the_terminal_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "crafted.sqlite"
    record_agent_thread(db)
    edit_ledgers(db, hostile_ledger)

    assert main(["inspect", "--db", str(db), "--thread", "t1"]) == 0
    out = capsys.readouterr()
    assert_inert(out.out + out.err)
    # What was there stays visible, as escapes and as the markup's own characters.
    assert "\\u001b]0;pwned-title\\u0007" in out.out
    assert "\\u001b]52;c;" in out.out and "\\u001b[2J" in out.out
    assert "\\u202egnp.exe\\u000d\\u009b31m\\u0085" in out.out
    assert LINK in out.out.replace("\n", "") or "[link=https://evil.example/]" in out.out
    assert "second line" in out.out  # a block of text keeps its lines


def test_on_a_colour_terminal_only_colours_are_emitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With rich writing escape codes (a terminal), data adds none: no OSC, no hyperlink."""
    db = tmp_path / "crafted.sqlite"
    record_agent_thread(db)
    edit_ledgers(db, hostile_ledger)
    monkeypatch.setenv("FORCE_COLOR", "1")

    assert main(["inspect", "--db", str(db), "--thread", "t1"]) == 0
    out = capsys.readouterr().out
    styles = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colours and bold: SGR only
    assert "\x1b" in out  # the colours are there: rich did write to a terminal
    assert_inert(styles.sub("", out))
    assert "\x1b]8;" not in out  # no hyperlink
    assert "evil.example" in styles.sub("", out)  # shown as the text it is


def hostile_thread(db: Path) -> None:
    record_agent_thread(db, f"t{TITLE}{CLEAR}{LINK}")


@pytest.mark.parametrize(
    "argv",
    [
        ["frontier", "--window", "4000", "--thread", "nope"],
        ["inspect", "--thread", "nope"],
        ["view", "--thread", "nope", "--html", "page.html"],
    ],
    ids=["frontier", "inspect", "view"],
)
def test_thread_ids_from_a_database_are_printed_inert(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "threads.sqlite"
    hostile_thread(db)
    assert main([*argv, "--db", str(db)]) == 2
    line = one_error_line(capsys)
    assert_inert(line)
    assert "threads there: t\\u001b]0;pwned-title\\u0007\\u001b[2J" in line


def runs_folder(tmp_path: Path) -> Path:
    """A folder holding one small recorded thread, for `frontier`."""
    runs = tmp_path / "runs"
    runs.mkdir()
    thread = [HumanMessage("hi", id="u1"), AIMessage("hello", id="a1"), AIMessage("more", id="a2")]
    (runs / "good.json").write_text(json.dumps(messages_to_dict(thread)), encoding="utf-8")
    return runs


def frontier_alone(runs: Path) -> list[str]:
    """`frontier` on `runs` with the defaults alone (no neighbours, no alternatives)."""
    return ["frontier", str(runs), "--window", "4000", "--no-neighbours", "--no-alternatives"]


def test_a_hostile_file_name_in_a_folder_is_printed_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`frontier` on a folder names the JSON files it leaves out: the name is data too."""
    runs = runs_folder(tmp_path)
    (runs / f"x{TITLE}{CLEAR}.json").write_text('{"not": "a thread"}', encoding="utf-8")
    argv = frontier_alone(runs)
    assert main(argv) in (0, 1)
    captured = capsys.readouterr()
    assert_inert(captured.out + captured.err)
    assert "left out" in captured.err and "x\\u001b]0;pwned-title" in captured.err


def test_restore_prints_an_archived_message_inert_and_json_stays_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool's output archived by a real replay: `restore` escapes what a terminal runs."""
    messages = [HumanMessage("list it", id="u1")]
    for n in range(12):
        call = {"name": "ls", "args": {}, "id": f"c{n}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{n}"))
        output = f"{HOSTILE}\tcolumn\n" + "a.py\n" * 300
        messages.append(ToolMessage(output, tool_call_id=f"c{n}", name="ls", id=f"t{n}"))
    messages.append(AIMessage("done", id="z"))
    recording = tmp_path / "run.json"
    recording.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    argv = ["replay", str(recording), "--window", "3000", "--thread", "r1"]
    assert main([*argv, "--db", "run.sqlite", "--archive", "arch"]) == 0
    capsys.readouterr()

    assert main(["restore", "t0", "--thread", "r1", "--archive", "arch"]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert "\\u001b]52;c;" in out and "\tcolumn\n" in out
    assert main(["restore", "t0", "--thread", "r1", "--archive", "arch", "--json"]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert json.loads(out)["data"]["content"] == messages[2].content  # the same record


# --- passwords ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        (
            "postgresql://user:s3cret@db.example:5432/app",
            "postgresql://user:***@db.example:5432/app",
        ),
        ("no thread 'x' in postgres://u:p%40ss@h/db; threads", "in postgres://u:***@h/db; threads"),
        ("host=h user=u password=s3cret dbname=d", "host=h user=u password=*** dbname=d"),
        ("postgresql://user@h/db?password=s3cret&x=1", "postgresql://user@h/db?password=***&x=1"),
        ("postgresql://user@h/db", "postgresql://user@h/db"),
    ],
)
def test_a_password_is_masked_wherever_a_uri_is_shown(shown: str, expected: str) -> None:
    from langgraph_ctx_tools.cli.output import inert, masked

    assert expected in masked(shown)
    assert "s3cret" not in inert(shown) and "p%40ss" not in inert(shown)


def test_an_error_naming_a_database_never_prints_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every line the commands print goes through the one helper: errors too."""
    from langgraph_ctx_tools.cli.handlers import fail

    assert fail("langgraph-ctx frontier: no thread 'nope' in postgresql://u:s3cret@h/db", 2) == 2
    line = one_error_line(capsys)
    assert "s3cret" not in line and "postgresql://u:***@h/db" in line


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["frontier", "view", "inspect"])
def test_a_thread_missing_from_postgres_is_named_without_the_password(
    command: str, postgres_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from tests.reliability.test_handed_files import record_postgres_thread

    record_postgres_thread(postgres_uri, "known")
    parts = conninfo_to_dict(postgres_uri)
    password = str(parts.get("password") or "pw-not-needed")
    uri = (
        f"postgresql://{parts.get('user', 'postgres')}:{password}@{parts.get('host', '127.0.0.1')}"
        f":{parts.get('port', 5432)}/{parts['dbname']}"
    )
    extra = {"frontier": ["--window", "4000"], "view": ["--html", "page.html"]}.get(command, [])
    assert main([command, "--db", uri, "--thread", "nope", *extra]) == 2
    line = one_error_line(capsys)
    assert password not in line and ":***@" in line


# --- the one helper ------------------------------------------------------------------------------


def test_every_control_and_bidi_character_is_escaped_and_text_is_left_alone() -> None:
    from langgraph_ctx_tools.cli.output import inert, visible_controls

    acting = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\n\t"]
    acting += ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029", "\ud800"]
    acting += [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
    for char in acting:
        shown = inert(f"a{char}b")
        assert shown == f"a\\u{ord(char):04x}b", (hex(ord(char)), shown)
    assert inert("line\nnext\ttab") == "line\\u000anext\\u0009tab"
    assert visible_controls("line\nnext\ttab", keep_lines=True) == "line\nnext\ttab"
    plain = "naïve 日本語 emoji 🙂 [bold]not markup[/bold] :smile: 100%"
    assert inert(plain) == plain


def test_output_never_reads_markup_or_emoji_from_data(capsys: pytest.CaptureFixture[str]) -> None:
    from langgraph_ctx_tools.cli.output import Output

    out = Output()
    out.table(f"title {LINK}", [(f"key {HOSTILE}", f"[red]value[/red] :smile: {HOSTILE}")], {})
    out.grid(f"grid {LINK}", [f"head{TITLE}"], [[f"[bold]cell[/bold]{CLEAR}"]])
    out.text(f"panel {LINK}{TITLE}", f"body {HOSTILE}")
    out.lines(f"line {HOSTILE}")
    out.note(f"note {HOSTILE}")
    captured = capsys.readouterr()
    assert_inert(captured.out + captured.err)
    text = captured.out.replace("\n", "")
    for literal in ("[red]value[/red]", ":smile:", "[bold]cell[/bold]", "[link=https://evil."):
        assert literal in text, literal


def test_a_setting_label_from_a_file_reaches_the_terminal_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`frontier --setting FILE` names the file's setting in its progress lines and table."""
    runs = runs_folder(tmp_path)
    setting = tmp_path / "mine.json"
    setting.write_text(
        json.dumps({"label": f"mine {HOSTILE}", "strategies": [{"type": "prune_tool_outputs"}]}),
        encoding="utf-8",
    )
    argv = frontier_alone(runs)
    assert main([*argv, "--setting", str(setting)]) in (0, 1)
    captured = capsys.readouterr()
    assert_inert(captured.out + captured.err)
    assert "done: mine \\u001b]0;pwned-title" in captured.err
