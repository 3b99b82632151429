"""The archive and the recall tool over InMemoryStore and a directory (Postgres: integration/)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langgraph.store.memory import InMemoryStore

from benchmarks.trajectories import name_of, read_trajectory, trajectory_files
from langgraph_ctx.archive import (
    Archive,
    ArchiveBackend,
    ArchiveRef,
    DirectoryBackend,
    StoreBackend,
    encode_message,
    encode_messages,
    is_archive_ref,
)
from langgraph_ctx.archive.recall import make_recall_tool, render_recall
from langgraph_ctx.errors import (
    ArchiveAccessError,
    ArchiveCorruptError,
    ArchiveEntryNotFoundError,
    ArchiveError,
    ConfigError,
)
from langgraph_ctx.messages import ensure_ids
from tests.conftest import call, drive

trajectory_params = [pytest.param(p, id=name_of(p)) for p in trajectory_files()]


@pytest.fixture(params=["memory", "directory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> ArchiveBackend:
    if request.param == "memory":
        return StoreBackend(InMemoryStore())
    return DirectoryBackend(tmp_path / "archive")


def tool_output(text: str, *, call_id: str = "call-1", msg_id: str | None = "tm-1") -> ToolMessage:
    return ToolMessage(text, tool_call_id=call_id, name="bash", id=msg_id)


def tamper(backend: ArchiveBackend, namespace: tuple[str, ...], key: str) -> None:
    """Change one byte of a stored entry behind the archive's back."""
    if isinstance(backend, DirectoryBackend):
        path = backend.root.joinpath(*namespace, key)
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        path.write_bytes(bytes(raw))
    else:
        assert isinstance(backend, StoreBackend)
        data = backend.get(namespace, key)
        assert data is not None
        backend.put(namespace, key, data.replace(b"o", b"0", 1))  # consistent value, wrong key


# --- round trips on real trajectories ------------------------------------------------------


@pytest.mark.trajectories
@pytest.mark.parametrize("path", trajectory_params)
async def test_trajectory_round_trip(backend: ArchiveBackend, mode: str, path: Path) -> None:
    original = read_trajectory(path)
    messages = ensure_ids(original)
    archive = Archive(backend, thread_id=f"traj-{name_of(path)[-40:]}")
    refs = [await drive(archive.plan_put_message(m), mode=mode) for m in messages]
    for msg, ref in zip(messages, refs, strict=True):
        assert msg.id is not None
        by_ref = await drive(archive.plan_restore(ref), mode=mode)
        by_id = await drive(archive.plan_restore(msg.id), mode=mode)
        assert by_ref == msg == by_id
        assert type(by_ref) is type(msg)
        assert encode_message(by_ref) == encode_message(msg) == encode_message(by_id)
    dump = await drive(archive.plan_put_messages(original), mode=mode)
    restored = await drive(archive.plan_read(dump), mode=mode)
    assert restored == original
    assert encode_messages(restored) == encode_messages(original)


# --- the archive contract over each backend ------------------------------------------------


async def test_every_kind_round_trips(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    msgs: list[BaseMessage] = [
        SystemMessage("sys"),
        HumanMessage([{"type": "text", "text": "héllo ✓"}]),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "ls"}, "id": "c1"}]),
        tool_output("NUL\x00 and \ud800 survive\n" * 3),
    ]
    for m in msgs:
        ref = await drive(archive.plan_put_message(m), mode=mode)
        assert ref.startswith("lgctx:t1:message:")
        assert await drive(archive.plan_restore(ref), mode=mode) == m
    text = "plain text\x00 with NUL, é and a lone \udc80"
    ref = await drive(archive.plan_put_text(text), mode=mode)
    assert ArchiveRef.parse(ref).kind == "text"
    assert await drive(archive.plan_read(ref), mode=mode) == text
    assert await drive(archive.plan_read(ref), mode=mode) == text
    dump = await drive(archive.plan_put_messages(msgs), mode=mode)
    assert await drive(archive.plan_read(dump), mode=mode) == msgs


async def test_double_write_is_idempotent(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    msg = tool_output("same output")
    first = await drive(archive.plan_put_message(msg), mode=mode)
    second = await drive(archive.plan_put_message(msg.model_copy()), mode=mode)
    assert first == second
    assert await drive(archive.plan_restore(first), mode=mode) == msg
    if isinstance(backend, DirectoryBackend):
        folder = backend.root / "langgraph_ctx" / "t1" / "message"
        assert [p.name for p in folder.iterdir()] == [ArchiveRef.parse(first).digest]


async def test_missing_entry(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    ref = f"lgctx:t1:message:{'a' * 64}"
    with pytest.raises(ArchiveEntryNotFoundError, match="no archive entry for lgctx:t1:message"):
        await drive(archive.plan_restore(ref), mode=mode)
    with pytest.raises(ArchiveEntryNotFoundError, match="neither an archive reference"):
        await drive(archive.plan_restore("unknown-message-id"), mode=mode)
    assert await drive(archive.plan_lookup("unknown-message-id"), mode=mode) is None


async def test_corrupt_entry(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    ref = await drive(archive.plan_put_message(tool_output("important output " * 20)), mode=mode)
    tamper(backend, ("langgraph_ctx", "t1", "message"), ArchiveRef.parse(ref).digest)
    with pytest.raises(ArchiveCorruptError, match="corrupt"):
        await drive(archive.plan_restore(ref), mode=mode)
    with pytest.raises(ArchiveCorruptError):
        await drive(archive.plan_restore("tm-1"), mode=mode)


async def test_other_thread_and_user_refused(backend: ArchiveBackend, mode: str) -> None:
    mine = Archive(backend, thread_id="t1")
    theirs = Archive(backend, thread_id="t2")
    other_user = Archive(backend, thread_id="t1", user_id="bob")
    ref = await drive(mine.plan_put_message(tool_output("secret")), mode=mode)
    for archive in (theirs, other_user):
        with pytest.raises(ArchiveAccessError, match="belongs to another thread"):
            await drive(archive.plan_restore(ref), mode=mode)
        # the message id is unknown in the other thread's index, not looked up in ours
        with pytest.raises(ArchiveEntryNotFoundError):
            await drive(archive.plan_restore("tm-1"), mode=mode)
    user_ref = await drive(other_user.plan_put_text("bob's"), mode=mode)
    assert user_ref.startswith("lgctx:bob/t1:text:")
    with pytest.raises(ArchiveAccessError):
        await drive(mine.plan_read(user_ref), mode=mode)
    with pytest.raises(ArchiveAccessError):
        await drive(mine.plan_index_message("m", user_ref), mode=mode)


async def test_wrong_kind_and_malformed_refs(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    ref = await drive(archive.plan_put_text("text"), mode=mode)
    with pytest.raises(ArchiveError, match="points at a 'text' entry"):
        await drive(archive.plan_restore(ref), mode=mode)
    digest = "0" * 64
    bad = [
        "lgctx:t1:message:abc",
        f"lgctx:../../etc:message:{digest}",
        f"lgctx:t1:index:{digest}",
        f"lgctx:t1/../t2:message:{digest}",
        f"lgctx:/etc/passwd:text:{digest}",
        f"lgctx:t1:message:{digest}/../../x",
    ]
    for text in bad:
        with pytest.raises(ArchiveError, match="A reference looks like"):
            await drive(archive.plan_restore(text), mode=mode)


async def test_unsafe_thread_ids_are_hashed(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="../../etc/passwd", user_id="a.b@example.com")
    ref = await drive(archive.plan_put_text("x"), mode=mode)
    parsed = ArchiveRef.parse(ref)
    assert parsed.thread.startswith("~") and parsed.user and parsed.user.startswith("~")
    assert await drive(archive.plan_read(ref), mode=mode) == "x"
    # a thread can not borrow the hashed label of another thread as its own id
    with pytest.raises(ArchiveAccessError):
        Archive(backend, thread_id=parsed.thread, user_id=parsed.user).read(ref)
    if isinstance(backend, DirectoryBackend):
        assert all(p.resolve().is_relative_to(backend.root) for p in backend.root.rglob("*"))


# --- pure pieces -------------------------------------------------------------------------


def test_ref_format_and_parse() -> None:
    digest = "f" * 64
    ref = ArchiveRef(thread="t1", kind="message", digest=digest)
    assert str(ref) == f"lgctx:t1:message:{digest}"
    assert ArchiveRef.parse(str(ref)) == ref
    user_ref = ArchiveRef(thread="t1", kind="messages", digest=digest, user="u1")
    assert ArchiveRef.parse(str(user_ref)) == user_ref
    assert is_archive_ref(str(ref)) and not is_archive_ref("msg-1")


def test_store_value_layout() -> None:
    store = InMemoryStore()
    archive = Archive(store, thread_id="t1")
    ref = archive.put_text("hello")
    digest = ArchiveRef.parse(ref).digest
    item = store.get(("langgraph_ctx", "t1", "text"), digest)
    assert item is not None
    assert item.value == {"encoding": "utf-8", "data": "hello", "sha256": digest, "size": 5}
    nul = ArchiveRef.parse(archive.put_text("a\x00b")).digest
    nul_item = store.get(("langgraph_ctx", "t1", "text"), nul)
    assert nul_item is not None and nul_item.value["encoding"] == "base64"


def test_store_value_changed_in_place_is_corrupt() -> None:
    store = InMemoryStore()
    archive = Archive(store, thread_id="t1")
    ref = archive.put_text("hello")
    ns, key = ("langgraph_ctx", "t1", "text"), ArchiveRef.parse(ref).digest
    item = store.get(ns, key)
    assert item is not None
    store.put(ns, key, {**item.value, "data": "hellO"})
    with pytest.raises(ArchiveCorruptError, match="recorded sha256"):
        archive.read(ref)
    store.put(ns, key, {"something": "else"})
    with pytest.raises(ArchiveCorruptError, match="not an archive entry"):
        archive.read(ref)


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="thread_id must be a non-empty string"):
        Archive(InMemoryStore(), thread_id="")
    with pytest.raises(ConfigError, match="ArchiveBackend or a langgraph BaseStore"):
        Archive({}, thread_id="t")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"configurable\.thread_id"):
        Archive.from_config(InMemoryStore(), {"configurable": {}})
    archive = Archive.from_config(
        InMemoryStore(), {"configurable": {"thread_id": "t9", "user_id": "u"}}
    )
    assert (archive.thread_id, archive.user_id) == ("t9", "u")
    with pytest.raises(ConfigError, match="max_chars"):
        make_recall_tool(archive, max_chars=0)


# --- the directory backend ---------------------------------------------------------------


def test_directory_permissions_and_atomic_write(tmp_path: Path) -> None:
    backend = DirectoryBackend(tmp_path / "root")
    backend.put(("a", "b"), "key", b"data")
    for directory in (tmp_path / "root", tmp_path / "root" / "a", tmp_path / "root" / "a" / "b"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    file = tmp_path / "root" / "a" / "b" / "key"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    backend.put(("a", "b"), "key", b"new data")
    assert backend.get(("a", "b"), "key") == b"new data"
    assert sorted(p.name for p in file.parent.iterdir()) == ["key"]  # no temp files left


@pytest.mark.parametrize(
    ("namespace", "key"),
    [
        (("..",), "x"),
        (("a",), ".."),
        (("a",), "../x"),
        (("a/b",), "x"),
        (("/etc",), "passwd"),
        (("a",), ".hidden"),
        (("a",), ""),
        ((), "a\x00b"),
    ],
)
def test_directory_rejects_path_traversal(
    tmp_path: Path, namespace: tuple[str, ...], key: str
) -> None:
    backend = DirectoryBackend(tmp_path)
    with pytest.raises(ArchiveAccessError, match="refusing archive path"):
        backend.put(namespace, key, b"x")
    with pytest.raises(ArchiveAccessError):
        backend.get(namespace, key)


def test_directory_rejects_symlink_out_of_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "link")
    backend = DirectoryBackend(root)
    with pytest.raises(ArchiveAccessError, match="resolves outside"):
        backend.put(("link",), "x", b"x")
    assert not list(outside.iterdir())


def test_a_relative_root_is_resolved_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)  # restored after the test
    backend = DirectoryBackend("archive")
    assert backend.root == first / "archive"
    backend.put(("t",), "key", b"before the cd")
    os.chdir(second)
    assert backend.get(("t",), "key") == b"before the cd"
    backend.put(("t",), "other", b"after the cd")
    assert (first / "archive" / "t" / "other").read_bytes() == b"after the cd"
    assert not (second / "archive").exists()
    assert DirectoryBackend("~").root == Path.home()  # `~` still means the home directory


# --- the recall tool ---------------------------------------------------------------------

OUTPUT = "".join(f"line {i}\n" for i in range(1, 101))


@pytest.fixture
def recall_setup() -> Iterator[tuple[Archive, str, BaseTool]]:
    archive = Archive(InMemoryStore(), thread_id="t1")
    ref = archive.put_message(tool_output(OUTPUT))
    yield archive, ref, make_recall_tool(archive, max_chars=100)


async def invoke(tool: BaseTool, args: dict[str, Any], mode: str) -> str:
    result = await call(tool, "invoke", args, mode=mode)
    assert isinstance(result, str)
    return result


async def test_recall_whole_output(mode: str) -> None:
    archive = Archive(InMemoryStore(), thread_id="t1")
    ref = archive.put_message(tool_output(OUTPUT))
    tool = make_recall_tool(archive)
    out = await invoke(tool, {"ref": ref}, mode)
    header, body = out.split("\n", 1)
    total = len(OUTPUT)
    assert (
        header
        == f"[{ref}: {total} characters, 100 lines; showing characters 0-{total} (lines 1-100)]"
    )
    assert body == OUTPUT
    by_id = await invoke(tool, {"ref": "tm-1"}, mode)  # by message id
    assert by_id == out.replace(ref, "tm-1", 1)
    assert await invoke(tool, {"ref": f" `{ref}` "}, mode) == out  # quoted by the model


async def test_recall_line_range(recall_setup: tuple[Archive, str, BaseTool], mode: str) -> None:
    _, ref, tool = recall_setup
    out = await invoke(tool, {"ref": ref, "start_line": 10, "end_line": 12}, mode)
    header, body = out.split("\n", 1)
    assert body == "line 10\nline 11\nline 12\n"
    assert "(lines 10-12)" in header and f"{len(OUTPUT)} characters, 100 lines" in header


async def test_recall_char_range(recall_setup: tuple[Archive, str, BaseTool], mode: str) -> None:
    _, ref, tool = recall_setup
    out = await invoke(tool, {"ref": ref, "start_char": 7, "end_char": 14}, mode)
    assert out.split("\n", 1)[1] == OUTPUT[7:14]
    assert "showing characters 7-14" in out


async def test_recall_truncates_with_a_note(
    recall_setup: tuple[Archive, str, BaseTool], mode: str
) -> None:
    _, ref, tool = recall_setup
    out = await invoke(tool, {"ref": ref}, mode)
    lines = out.split("\n")
    assert "\n".join(lines[1:-1]) == OUTPUT[:100]
    assert lines[-1].startswith("[truncated at 100 characters")
    assert f'ref="{ref}", start_char=100' in lines[-1]
    follow = await invoke(tool, {"ref": ref, "start_char": 100}, mode)
    assert follow.split("\n", 1)[1].startswith(OUTPUT[100:200])


async def test_recall_errors_are_tool_text(
    recall_setup: tuple[Archive, str, BaseTool], mode: str
) -> None:
    archive, ref, _ = recall_setup
    other_tool = make_recall_tool(Archive(InMemoryStore(), thread_id="t2"))
    out = await invoke(other_tool, {"ref": ref}, mode)
    assert out.startswith("recall failed: reference lgctx:t1:")
    assert "belongs to another thread" in out
    tool_call = {"type": "tool_call", "id": "c9", "name": "recall", "args": {"ref": "nope"}}
    msg = await call(other_tool, "invoke", tool_call, mode=mode)
    assert isinstance(msg, ToolMessage) and msg.status == "error"
    assert "neither an archive reference" in str(msg.content)
    own = make_recall_tool(archive)
    bad_range = await invoke(own, {"ref": ref, "start_line": 5, "start_char": 1}, mode)
    assert "not both" in bad_range
    beyond = await invoke(own, {"ref": ref, "start_line": 500}, mode)
    assert "the output has 100 lines" in beyond


def test_render_recall_edge_cases() -> None:
    empty = "[r: 0 characters, 0 lines; showing characters 0-0 (nothing)]\n"
    assert render_recall("", ref="r") == empty
    out = render_recall("a\nb", ref="r", start_line=2)
    assert out.endswith("\nb") and "(lines 2-2)" in out
    assert render_recall("abc", ref="r", end_char=99).endswith("\nabc")
