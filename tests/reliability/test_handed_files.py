"""Files a user is handed are data, not code (issue 39): one test per attack.

Each attack was first run against the code before the fix: a crafted checkpoint created a
directory through `inspect` and `frontier`; `inspect` on a foreign SQLite file added tables
and switched it to WAL; `search_text` followed links out of the explored folder and walked a
folder with two `..` links exponentially; `^(a+)+$` hung a worker; a gzip bomb filled the
memory; JSON nested 100,000 deep raised a `RecursionError` traceback; `recall` echoed a 1 MB
reference back into state. Every command runs through `langgraph_ctx_tools.cli.main`, as a user
runs it; the checkpoints come from real LangGraph graphs on a real `SqliteSaver`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langchain_core.tools import tool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.archive import Archive
from langgraph_ctx.archive.recall import make_recall_tool
from langgraph_ctx.errors import UntrustedCheckpointError
from langgraph_ctx.graph.serde import StrictSerializer
from langgraph_ctx_tools.cli import inputs as cli_inputs
from langgraph_ctx_tools.cli import main
from langgraph_ctx_tools.cli.folder_tools import make_tools
from tests.fakes import ScriptedChatModel

EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_PYDANTIC_V2 = 5


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line on stderr (`frontier`'s progress lines aside), no traceback."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if not line.startswith("frontier: ")]
    assert len(lines) == 1, err
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_state(folder: Path) -> dict[str, str]:
    """Every file under `folder` with its hash: what a read-only command must leave alone."""
    return {str(p.relative_to(folder)): digest(p) for p in sorted(folder.rglob("*")) if p.is_file()}


@tool
def lookup(city: str) -> str:
    """Weather of a city."""
    return f"{city}: sunny, 21 C"


def run_agent(saver: Any, thread: str, city: str = "Lyon") -> None:
    """A real `create_agent` run with `ContextMemory` on `saver`: one tool call, one answer."""
    call = {"name": "lookup", "args": {"city": city}, "id": "c1"}
    model = ScriptedChatModel(
        messages=[AIMessage("", tool_calls=[call]), AIMessage(f"Sunny in {city}.")]
    )
    memory = ContextMemory(context_window_tokens=8_000, archive=InMemoryStore())
    agent = create_agent(model, [lookup], middleware=[memory.middleware()], checkpointer=saver)
    agent.invoke(
        {"messages": [HumanMessage(f"Weather in {city}?", id="h1")]},
        {"configurable": {"thread_id": thread}},
    )


def record_agent_thread(db: Path, thread: str = "t1") -> None:
    """`run_agent` on a SQLite checkpointer file."""
    with SqliteSaver.from_conn_string(str(db)) as saver:
        run_agent(saver, thread)


def evil_ext(target: Path) -> ormsgpack.Ext:
    """An extension value naming `os.mkdir(target)`: LangGraph's default reader calls it."""
    return ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(("os", "mkdir", str(target))))


def plant(db: Path, thread: str, value: Any) -> None:
    """Rewrite the newest checkpoint of `thread` so its messages hold `value` as well."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread,),
        ).fetchone()
        checkpoint_id, kind, blob = row
        assert kind == "msgpack"
        data = ormsgpack.unpackb(blob, ext_hook=lambda code, raw: ormsgpack.Ext(code, raw))
        data["channel_values"]["messages"].append(value)
        conn.execute(
            "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (ormsgpack.packb(data), thread, checkpoint_id),
        )


# --- 1. a crafted checkpoint -------------------------------------------------------------------


def test_a_crafted_checkpoint_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "evil.sqlite"
    record_agent_thread(db)
    target = tmp_path / "created-by-the-file"
    plant(db, "t1", evil_ext(target))

    # The attack is real: LangGraph's permissive reader calls os.mkdir.
    with sqlite3.connect(db) as conn:
        blob = conn.execute(
            "SELECT checkpoint FROM checkpoints ORDER BY checkpoint_id DESC"
        ).fetchone()
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", blob[0]))
    assert target.is_dir()
    target.rmdir()

    for argv in (
        ["inspect", "--db", str(db), "--thread", "t1"],
        ["frontier", "--db", str(db), "--window", "4000"],
    ):
        assert main(argv) == 2
        err = one_error_line(capsys)
        assert "os.mkdir" in err and "not a type a LangGraph agent's state holds" in err
        assert not target.exists()


def test_a_nested_type_inside_a_message_is_refused(tmp_path: Path) -> None:
    # A message's own fields can carry an extension value: the first pass looks inside.
    inner = evil_ext(tmp_path / "nested")
    message = ormsgpack.Ext(
        EXT_PYDANTIC_V2,
        ormsgpack.packb(
            ("langchain_core.messages.human", "HumanMessage", {"content": inner}, "model_validate")
        ),
    )
    with pytest.raises(UntrustedCheckpointError, match=r"os\.mkdir"):
        StrictSerializer().loads_typed(("msgpack", ormsgpack.packb({"messages": [message]})))
    assert not (tmp_path / "nested").exists()


@pytest.mark.parametrize(
    ("kind", "payload", "named"),
    [
        ("pickle", b"cos\nsystem\n(S'true'\ntR.", "pickle"),
        (
            "json",
            json.dumps({"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]}).encode(),
            "secret OPENAI_API_KEY",
        ),
        (
            "json",
            json.dumps(
                {"lc": 1, "type": "constructor", "id": ["langchain", "llms", "openai", "OpenAI"]}
            ).encode(),
            "langchain.llms.openai.OpenAI",
        ),
    ],
)
def test_pickle_secrets_and_other_constructors_are_refused(
    kind: str, payload: bytes, named: str
) -> None:
    with pytest.raises(UntrustedCheckpointError, match=named):
        StrictSerializer().loads_typed((kind, payload))


def test_an_agents_own_checkpoints_read_the_same(tmp_path: Path) -> None:
    """What a `create_agent` run with `ContextMemory` writes reads back equal, strictly."""
    db = tmp_path / "run.sqlite"
    record_agent_thread(db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT type, checkpoint FROM checkpoints").fetchall()
        rows += conn.execute("SELECT type, value FROM writes").fetchall()
    assert len(rows) > 5
    default = JsonPlusSerializer()
    for kind, blob in rows:
        assert StrictSerializer().loads_typed((kind, blob)) == default.loads_typed((kind, blob))
    legacy = json.dumps(messages_to_dict([HumanMessage("hi"), AIMessage("hello")])).encode()
    assert StrictSerializer().loads_typed(("json", legacy)) == default.loads_typed(("json", legacy))


# --- 2. read-only means read-only --------------------------------------------------------------


def foreign_database(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada'), ('grace')")
    return path


def test_commands_taking_db_leave_the_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = foreign_database(tmp_path / "app.sqlite")
    checkpoints = tmp_path / "run.sqlite"
    record_agent_thread(checkpoints)
    transcript = tmp_path / "conversation.json"
    transcript.write_text(
        json.dumps(
            messages_to_dict(
                [
                    HumanMessage("hi", id="u1"),
                    AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}], id="a1"),
                    ToolMessage("a.py", tool_call_id="c1", name="ls", id="t1"),
                    AIMessage("done", id="a2"),
                ]
            )
        ),
        encoding="utf-8",
    )
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.py").write_text("print('hi')\n", encoding="utf-8")
    before = folder_state(tmp_path)

    reads = [
        (["inspect", "--db", str(foreign), "--thread", "t1"], 2),
        (["frontier", "--db", str(foreign), "--window", "4000"], 2),
        (["inspect", "--db", str(checkpoints), "--thread", "t1"], 0),
        (["frontier", "--db", str(checkpoints), "--window", "4000", "--no-neighbours"], 0),
    ]
    writes = [  # record into a file that is not theirs: refused before anything is written
        (["demo", str(tmp_path / "tree"), "--db", str(foreign)], 2),
        (["replay", str(transcript), "--db", str(foreign)], 2),
    ]
    for argv, code in reads + writes:
        assert main(argv) == code, argv
        out = capsys.readouterr()
        if code == 2:
            assert "not a checkpoint database" in out.err or "something else" in out.err
        assert folder_state(tmp_path) == before, argv  # no byte changed, no -wal/-shm left


def test_a_database_a_writer_holds_open_is_read_without_writing(tmp_path: Path) -> None:
    """With a -wal file present, the committed pages in it are read (mode=ro), nothing written."""
    db = tmp_path / "live.sqlite"
    record_agent_thread(db, "t1")
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE checkpoints SET metadata = metadata")  # committed, left in the -wal
    writer.commit()
    assert (tmp_path / "live.sqlite-wal").exists()
    main_file = digest(db)
    assert main(["inspect", "--db", str(db), "--thread", "t1"]) == 0
    assert digest(db) == main_file
    writer.close()


# --- 3. the demo's tools stay in their folder --------------------------------------------------


def tool_text(tools: list[Any], name: str, **args: Any) -> tuple[str, str]:
    tool = next(t for t in tools if t.name == name)
    result = tool.invoke({"type": "tool_call", "id": "c1", "name": name, "args": args})
    return str(result.content), str(result.status)


def test_search_text_stays_inside_and_walks_each_folder_once(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("password = hunter2\n", encoding="utf-8")
    root = tmp_path / "explored"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "code.py").write_text("password = None  # set at runtime\n", encoding="utf-8")
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    # Two links to the folder's own parent: before, the walk grew exponentially through them.
    (root / "pkg" / "up1").symlink_to("..", target_is_directory=True)
    (root / "pkg" / "up2").symlink_to("..", target_is_directory=True)
    tools = make_tools(root)

    text, status = tool_text(tools, "search_text", pattern="password")
    assert status == "success"
    assert "hunter2" not in text
    assert text.splitlines()[0] == "1 matches for /password/ under ."
    assert "pkg/code.py:1: password = None" in text
    assert "(2 link(s) leading out of the folder skipped)" in text
    assert "walked once" in text

    listing, _ = tool_text(tools, "list_dir", path=".")
    assert "leak.txt" not in listing and "elsewhere" not in listing
    assert "(2 link(s) leading out of the folder not shown)" in listing
    for path in ("leak.txt", "elsewhere/secret.txt", "../outside/secret.txt"):
        text, status = tool_text(tools, "read_file", path=path)
        assert status == "error" and "outside the folder" in text


def test_a_catastrophic_pattern_gets_an_error_not_a_hung_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import langgraph_ctx_tools.cli.folder_tools as demo

    monkeypatch.setattr(demo, "SEARCH_SECONDS", 0.3)
    (tmp_path / "a.txt").write_text("a" * 100_000 + "b\n", encoding="utf-8")
    tools = make_tools(tmp_path)
    text, status = tool_text(tools, "search_text", pattern="^(a+)+$")
    assert status == "error"
    assert "ran out of time" in text and "nested repetition" in text
    for pattern, says in (("", "empty"), ("(", "not a valid"), ("x" * 5_000, "5,000 characters")):
        text, status = tool_text(tools, "search_text", pattern=pattern)
        assert status == "error" and says in text
        assert len(text) < 400


def test_tool_answers_are_capped(tmp_path: Path) -> None:
    (tmp_path / "minified.js").write_text("x" * 1_000_000 + "\n", encoding="utf-8")
    crowd = tmp_path / "crowd"
    crowd.mkdir()
    for n in range(600):
        (crowd / f"f{n:03}.txt").write_text("match\n", encoding="utf-8")
    tools = make_tools(tmp_path)
    text, status = tool_text(tools, "read_file", path="minified.js")
    assert status == "success" and len(text) < 2_200
    listing, _ = tool_text(tools, "list_dir", path="crowd")
    assert len(listing.splitlines()) == 1 + 500 + 1  # the folder, 500 entries, the note
    assert "(100 more entries not shown; list a sub-folder)" in listing
    found, _ = tool_text(tools, "search_text", pattern="match", path="crowd")
    assert found.splitlines()[0] == "600 matches for /match/ under crowd (first 40 shown)"
    assert len(found.splitlines()) == 41


# --- 4. inputs without bounds ------------------------------------------------------------------


def test_a_gzip_bomb_is_refused_at_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        fh.write(b"[")
        for _ in range(48):
            fh.write(b" " * (1 << 20))
        fh.write(b"]")
    assert bomb.stat().st_size < 200_000  # 48 MB of JSON in under 200 kB
    out = tmp_path / "out.json"
    for argv in (
        ["count", str(bomb), "--max-input-mb", "16"],
        ["frontier", str(bomb), "--window", "4000", "--max-input-mb", "16"],
        ["compact", str(bomb), "--window", "4000", "--out", str(out), "--max-input-mb", "16"],
    ):
        assert main(argv) == 2, argv
        err = one_error_line(capsys)
        assert "over 16 MB decompressed, the cap on one input" in err
        assert "--max-input-mb" in err
    assert not out.exists()
    assert cli_inputs.DEFAULT_MAX_INPUT_MB == 512  # the default cap a 1.5 GB bomb meets


def test_a_file_larger_than_the_free_memory_is_refused_before_parsing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps(["x" * 1_000_000]), encoding="utf-8")
    monkeypatch.setattr(cli_inputs, "_available_bytes", lambda: 4 << 20)
    assert main(["count", str(big)]) == 2
    assert "of memory are free" in one_error_line(capsys)


@pytest.mark.parametrize("depth", [100_000, 70])
def test_deep_json_is_one_line_and_exit_2(
    depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * depth + "]" * depth, encoding="utf-8")
    for argv in (["count", str(deep)], ["frontier", str(deep), "--window", "4000"]):
        assert main(argv) == 2
        assert "deeper than 64 levels" in one_error_line(capsys)
    strategies = tmp_path / "strategies.json"
    strategies.write_text("[" * depth + "]" * depth, encoding="utf-8")
    assert main(["count", str(deep)]) == 2
    capsys.readouterr()


def test_recall_does_not_echo_a_huge_reference() -> None:
    tool = make_recall_tool(Archive(InMemoryStore(), thread_id="t"))
    for ref in ("lgctx:t:message:" + "a" * 1_000_000, "x" * 1_000_000):
        result = tool.invoke(
            {"type": "tool_call", "id": "c1", "name": "recall", "args": {"ref": ref}}
        )
        assert result.status == "error"
        assert len(result.content) < 1_000
        assert result.artifact is None


def test_a_long_replay_says_how_far_it_got(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import langgraph_ctx_tools.cli.frontier_run as frontier_run

    monkeypatch.setattr(frontier_run, "PROGRESS_SECONDS", 0.0)
    run = sorted(Path(__file__).resolve().parents[2].glob("data/trajectories/*.json.gz"))[0]
    assert main(["frontier", str(run), "--window", "16000", "--no-neighbours"]) == 0
    err = capsys.readouterr().err
    assert "model calls; finding the names each next step uses" in err
    assert "frontier: replayed 1 of" in err and "frontier: replayed" in err.splitlines()[-2]


def record_postgres_thread(conninfo: str, thread: str) -> None:
    """`run_agent` on a `PostgresSaver` of the database `conninfo` names."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
        run_agent(saver, thread, "Oslo")


def typed_uri(conninfo: str) -> str:
    """The `postgresql://` URI of a connection string, as a user types it to a command."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(conninfo)
    return (
        f"postgresql://{parts.get('user', 'postgres')}@{parts.get('host', '127.0.0.1')}:"
        f"{parts.get('port', 5432)}/{parts['dbname']}"
    )


def checkpoint_rows(conn: Any) -> tuple[Any, ...]:
    """Rows of each checkpoint table: a command that only reads leaves them as they are."""
    return tuple(
        conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
    )


@pytest.mark.postgres
def test_a_postgres_database_is_read_strictly_and_only_read(
    postgres_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`frontier --db postgresql://...`: a real agent's thread reads; a planted blob is refused."""
    import psycopg

    thread = f"handed-{tmp_path.name}"
    record_postgres_thread(postgres_uri, thread)
    argv = ["frontier", "--db", typed_uri(postgres_uri), "--thread", thread, "--window", "4000"]
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        before = checkpoint_rows(conn)
        assert main([*argv, "--no-neighbours"]) == 0
        capsys.readouterr()
        assert checkpoint_rows(conn) == before
        target = tmp_path / "created-by-postgres"
        conn.execute(
            "UPDATE checkpoint_blobs SET type = 'msgpack', blob = %s "
            "WHERE thread_id = %s AND channel = 'messages'",
            (ormsgpack.packb([evil_ext(target)]), thread),
        )
    assert main(argv) == 2
    assert "os.mkdir" in one_error_line(capsys)
    assert not target.exists()


# --- 3. a bad value in a handed file: one line, exit 2 (issue 50) ------------------------------


def edit_checkpoints(db: Path, change: Any, thread: str = "t1") -> None:
    """Apply `change` to each decoded checkpoint of `thread` whose state holds a ledger."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = ?", (thread,)
        ).fetchall()
        for checkpoint_id, blob in rows:
            data = ormsgpack.unpackb(blob, ext_hook=lambda code, raw: ormsgpack.Ext(code, raw))
            if not data["channel_values"].get("context_ledger"):
                continue
            change(data)
            conn.execute(
                "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
                (ormsgpack.packb(data), thread, checkpoint_id),
            )


def edit_ledgers(db: Path, change: Any, thread: str = "t1") -> None:
    """Apply `change` to the ledger of every checkpoint of `thread` that has one."""
    edit_checkpoints(db, lambda data: change(data["channel_values"]["context_ledger"]), thread)


def read_thread_commands(db: Path) -> list[list[str]]:
    return [
        ["inspect", "--db", str(db), "--thread", "t1"],
        ["view", "--db", str(db), "--thread", "t1", "--html", "page.html"],
    ]


BAD_REPORTS = {
    "tokens-a-string": ("tokens", "1200", "tokens must be a whole number >= 0, got str '1200'"),
    "tokens-inf": ("tokens", float("inf"), "tokens must be a whole number >= 0, got float inf"),
    "limit-nan": ("limit", float("nan"), "limit must be a whole number >= 0, got float nan"),
    "limit-a-word": ("limit", "lots", "limit must be a whole number >= 0, got str 'lots'"),
    "ratio-a-string": ("calibration_ratio", "1.2", "calibration_ratio must be a finite number"),
    "ratio-inf": ("calibration_ratio", float("inf"), "calibration_ratio must be a finite number"),
    "ratio-nan": ("calibration_ratio", float("nan"), "calibration_ratio must be a finite number"),
    "decisions-a-string": ("decisions", "prune", "decisions must be a list, got str 'prune'"),
    "decisions-of-numbers": ("decisions", [1], "decisions[0] must be a dict, got int 1"),
}


@pytest.mark.parametrize(("field", "value", "said"), BAD_REPORTS.values(), ids=BAD_REPORTS.keys())
def test_a_report_field_of_the_wrong_kind_is_one_line_and_exit_2(
    field: str, value: Any, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "run.sqlite"
    record_agent_thread(db)
    edit_ledgers(db, lambda ledger: ledger["last_report"].__setitem__(field, value))
    for argv in read_thread_commands(db):
        assert main(argv) == 2, argv
        line = one_error_line(capsys)
        assert said in line and "not a report langgraph-ctx wrote" in line, line
    assert not (tmp_path / "page.html").exists()


BAD_CHECKPOINTS = {
    "tag-null": ("null", None, "holds NoneType None instead of its values"),
    "tag-bytes": ("bytes", None, "holds bytes b"),
    "message-bytes": (None, [b"\x00raw"], "holds a message bytes b'\\x00raw', not a message"),
    "message-null": (None, [None], "holds a message NoneType None, not a message"),
    "messages-a-number": (None, 5, "holds messages int 5, not a list"),
}


@pytest.mark.parametrize(("tag", "messages", "said"), BAD_CHECKPOINTS.values(), ids=BAD_CHECKPOINTS)
def test_a_checkpoint_of_the_wrong_shape_is_one_line_and_exit_2(
    tag: str | None,
    messages: Any,
    said: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A type tag the serializer reads as `None` or bytes, a message list that is not one."""
    db = tmp_path / "run.sqlite"
    record_agent_thread(db)
    if tag is not None:
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE checkpoints SET type = ?", (tag,))
    else:

        def plant_messages(data: dict[str, Any]) -> None:
            values = data["channel_values"]
            values["messages"] = (
                messages if not isinstance(messages, list) else [*values["messages"], *messages]
            )

        edit_checkpoints(db, plant_messages)
    frontier = ["frontier", "--db", str(db), "--window", "4000", "--no-neighbours"]
    for argv in [*read_thread_commands(db), frontier]:
        assert main(argv) == 2, argv
        line = one_error_line(capsys)
        assert said in line and "it was not written by a LangGraph agent" in line, line


def test_a_damaged_ledger_part_is_shown_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`inspect` reads a ledger as the pipeline does: a part of the wrong shape is left out."""
    db = tmp_path / "run.sqlite"
    record_agent_thread(db)

    def damage(ledger: dict[str, Any]) -> None:
        ledger["compacted"] = {"t1": "not an entry"}
        ledger["summary"] = ["not", "a", "summary"]
        ledger["entities"] = {"values": {"raw": b"\x00bytes"}}

    edit_ledgers(db, damage)
    assert main(["inspect", "--db", str(db), "--thread", "t1"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    assert "note: damaged ledger, shown without that part: ledger['summary']" in out.err
    assert "b'\\\\x00bytes'" in out.out  # a value JSON has no form for, shown as Python does


def archive_of_a_replay(tmp_path: Path) -> tuple[Path, Path]:
    """A real replay's database and archive folder: 12 long tool outputs, most compacted."""
    messages: list[Any] = [HumanMessage("list it", id="u1")]
    for n in range(12):
        call = {"name": "ls", "args": {}, "id": f"c{n}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{n}"))
        messages.append(ToolMessage("a.py\n" * 400, tool_call_id=f"c{n}", name="ls", id=f"t{n}"))
    messages.append(AIMessage("done", id="z"))
    recording = tmp_path / "run.json"
    recording.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    db, archive = tmp_path / "run.sqlite", tmp_path / "arch"
    argv = ["replay", str(recording), "--window", "3000", "--thread", "r1"]
    assert main([*argv, "--db", str(db), "--archive", str(archive)]) == 0
    return db, archive


@pytest.mark.parametrize("kind", ["index", "message"])
def test_deep_json_in_an_archive_folder_is_one_line(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry nested 100,000 deep stored under its own sha256 (so it passes the hash check)."""
    db, archive = archive_of_a_replay(tmp_path)
    capsys.readouterr()
    deep = b"[" * 100_000 + b"]" * 100_000
    folder = archive / "langgraph_ctx" / "r1" / kind
    for entry in folder.iterdir():
        entry.write_bytes(deep)
    address = hashlib.sha256(deep).hexdigest()
    (archive / "langgraph_ctx" / "r1" / "message" / address).write_bytes(deep)

    ref = f"lgctx:r1:message:{address}" if kind == "message" else "t0"
    assert main(["restore", ref, "--thread", "r1", "--archive", str(archive)]) == 2
    line = one_error_line(capsys)
    assert "ArchiveCorruptError" not in line and "is not valid JSON" in line, line
    # The commands that read a whole thread show the rest and name what they cannot read.
    thread = ["--db", str(db), "--thread", "r1", "--archive", str(archive)]
    for argv in (["inspect", *thread], ["view", *thread, "--html", str(tmp_path / "p.html")]):
        assert main(argv) == 0, argv
        assert "Traceback" not in capsys.readouterr().err


def test_a_thread_id_with_a_slash_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay --thread a/b`: the default reports file is named after the id, made a file name."""
    messages = [HumanMessage("hi", id="u1"), AIMessage("hello", id="a1")]
    recording = tmp_path / "run.json"
    recording.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    db = tmp_path / "run.sqlite"
    assert main(["replay", str(recording), "--db", str(db), "--thread", "a/b"]) == 0
    assert (tmp_path / "a-b.reports.json").is_file()
    assert "Traceback" not in capsys.readouterr().err
    assert main(["inspect", "--db", str(db), "--thread", "a/b"]) == 0
