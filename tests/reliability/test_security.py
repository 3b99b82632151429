"""Security: one thread never reads another's archive, references never escape the archive root,
archive files are owner-only, and a redaction hook keeps a planted secret out of everything a
summary is made from and out of every insurance dump.

The graph tests run real `create_agent` graphs on a real checkpointer; only the chat models are
scripted.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextManager, ContextMemory, Summarizer
from langgraph_ctx.archive import NAMESPACE_ROOT, Archive, ArchiveRef, DirectoryBackend
from langgraph_ctx.archive.recall import make_recall_tool
from langgraph_ctx.errors import ArchiveAccessError, ArchiveError, ConfigError
from langgraph_ctx.messages import text_of
from langgraph_ctx.prompt.report import REPORT_KEY
from tests.conftest import make_conversation, make_strategies, summary_first_strategies
from tests.fakes import ScriptedChatModel
from tests.integration._agents import Script, check_prompts, drive
from tests.integration._agents import _without_report as without_report

SECRET = "sk-live-PLANTED-7f3Kq9xW"
"""A credential planted in user input, tool-call arguments and tool outputs."""


def redact(text: str) -> str:
    return text.replace(SECRET, "[REDACTED]")


def thread(**extra: str) -> RunnableConfig:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:12]}", **extra}}


def recording_summarizer_model() -> ScriptedChatModel:
    """A summarizer model that records every prompt and answers a well-formed summary."""
    return ScriptedChatModel(
        messages=(
            f"<completed>\n- step {n}\n</completed>\n<remaining>\n- continue\n</remaining>\n"
            "<current_state>\n- working\n</current_state>\n<notes>\n- none\n</notes>"
            for n in itertools.count(1)
        )
    )


def planted_script(turns: int = 8) -> Script:
    """A generated coding-agent run with the secret in every user turn, in tool-call arguments
    and in every tool output."""
    planted: list[BaseMessage] = []
    for m in make_conversation(turns, parallel=2, long_output=2_500, error_every=7, seed=5):
        if isinstance(m, HumanMessage):
            m = m.model_copy(update={"content": f"{text_of(m)}\nMy token is {SECRET}."})
        elif isinstance(m, ToolMessage):
            m = m.model_copy(update={"content": f"export API_KEY={SECRET}\n{text_of(m)}"})
        elif isinstance(m, AIMessage) and m.tool_calls:
            calls = [{**tc, "args": {**tc["args"], "token": SECRET}} for tc in m.tool_calls]
            m = m.model_copy(update={"tool_calls": calls})
        planted.append(m)
    return Script.from_messages(planted)


def dump_entries(store: InMemoryStore) -> list[bytes]:
    """The raw bytes of every insurance dump (`messages` entries) in the store."""
    entries: list[bytes] = []
    for namespace in store.list_namespaces(prefix=(NAMESPACE_ROOT,)):
        if namespace[-1] != "messages":
            continue
        for item in store.search(namespace, limit=10_000):
            entries.append(json.dumps(item.value).encode())
    return entries


# --- the redaction hook ----------------------------------------------------------------------


@pytest.mark.parametrize("summarizer", ["model", "fallback"])
@pytest.mark.parametrize("remove_summarized", [False, True])
@pytest.mark.parametrize("writer", ["auto_compact", "rebuild"])
def test_a_planted_secret_reaches_neither_the_summarizer_nor_the_dump(
    summarizer: str, remove_summarized: bool, writer: str
) -> None:
    """Each dump writer in turn: the summary's dump (auto_compact, a hint threshold the run
    never passes) and the after-turn rebuild's (a low threshold); with `remove_summarized`
    also the removal span's."""
    script = planted_script()
    store = InMemoryStore()
    model = recording_summarizer_model()
    memory = ContextMemory(
        context_window_tokens=5_000,
        strategies=summary_first_strategies(),  # a summary and its dump are the subject
        archive=store,
        summarizer=model if summarizer == "model" else None,
        redact=redact,
        remove_summarized=remove_summarized,
        hint_threshold=0.5 if writer == "rebuild" else 0.8,
    )
    agent_model = script.model(usage_counter=memory.manager.token_counter)
    agent = create_agent(
        agent_model,
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config = thread()
    seen = drive(agent, script.inputs, config)
    check_prompts(agent_model, memory)

    ledger = agent.get_state(config).values["context_ledger"]
    summary = ledger["summary"]
    assert summary["dump_refs"], "no summary was written: the test proves nothing"
    # The dump writer under test ran.
    kinds = {d.kind for r in memory.get_reports(agent, config) for d in r.decisions}
    kinds |= {
        d["kind"]
        for m in seen.messages.values()
        for d in m.response_metadata.get(REPORT_KEY, {}).get("decisions", [])
    }
    assert writer in kinds, kinds
    assert SECRET not in summary["text"]
    assert "[REDACTED]" in "".join(e.decode() for e in dump_entries(store))
    if summarizer == "model":
        assert model.prompts, "the summarizer model was never asked"
        for prompt in model.prompts:
            assert all(SECRET not in text_of(m) for m in prompt)
    for entry in dump_entries(store):
        assert SECRET.encode() not in entry
    for ref in summary["dump_refs"]:
        for m in memory.archive_for(config).read(ref):
            assert SECRET not in json.dumps(m.model_dump())

    # Nothing else is lost: every message is still in the full history, in order, byte for
    # byte; the ones that only the dumps hold come back redacted (that is what redaction is for).
    history = {m.id: m for m in memory.get_full_history(agent, config)}
    assert [i for i in history if i in seen.messages] == seen.order
    live = {m.id for m in agent.get_state(config).values["messages"]}
    for mid in seen.order:
        original = seen.messages[mid]
        if mid not in live:
            original = memory.manager.summarizer.redact_messages([original])[0]
        assert without_report(history[mid]) == without_report(original), mid
    if remove_summarized:
        assert set(seen.order) - live, "no message left the live state: the test proves nothing"


def test_the_manager_redaction_hook_and_the_summarizers_are_one_setting() -> None:
    assert ContextManager(context_window_tokens=1_000, redact=redact).summarizer.redact is redact
    own = Summarizer(redact=redact)
    assert ContextManager(context_window_tokens=1_000, summarizer=own).summarizer is own
    assert (
        ContextManager(context_window_tokens=1_000, summarizer=own, redact=redact).summarizer.redact
        is redact
    )
    with pytest.raises(ConfigError, match="redact= is given twice"):
        ContextManager(context_window_tokens=1_000, summarizer=own, redact=str.upper)


def test_a_summarizer_with_its_own_hook_also_redacts_the_dump() -> None:
    store = InMemoryStore()
    archive = Archive.from_config(store, thread())
    cm = ContextManager(
        context_window_tokens=2_000,
        archive=archive,
        strategies=make_strategies(summarize=True),
        summarizer=Summarizer(redact=redact),
    )
    history = make_conversation(6, parallel=2, long_output=1_500, seed=2)
    history = [
        m.model_copy(update={"content": f"{text_of(m)} {SECRET}"})
        if isinstance(m, HumanMessage)
        else m
        for m in history
    ]
    result = cm.build(history)
    assert "summarize" in result.report.kinds() or "auto_compact" in result.report.kinds()
    assert result.state["summary"]["dump_refs"]
    assert all(SECRET.encode() not in e for e in dump_entries(store))
    assert SECRET not in result.state["summary"]["text"]


def _plant(message: BaseMessage, where: str) -> BaseMessage:
    """`message` with the secret in one of the fields that are neither content nor call args."""
    if where == "invalid_tool_calls" and isinstance(message, AIMessage):
        bad = {"name": "shell", "args": f'{{"cmd": "curl -H {SECRET}', "id": "bad_1", "error": None}
        return message.model_copy(update={"invalid_tool_calls": [bad]})
    if where == "artifact" and isinstance(message, ToolMessage):
        return message.model_copy(update={"artifact": {"env": {"API_KEY": SECRET}}})
    if where == "additional_kwargs" and isinstance(message, AIMessage):
        # DeepSeek and other reasoning models return their thinking here.
        reasoning = {"reasoning_content": f"The user's key is {SECRET}, use it."}
        return message.model_copy(update={"additional_kwargs": reasoning})
    if where == "response_metadata" and isinstance(message, AIMessage):
        return message.model_copy(update={"response_metadata": {"echo": [SECRET, 1]}})
    return message


PLACES = ["invalid_tool_calls", "artifact", "additional_kwargs", "response_metadata"]


@pytest.mark.parametrize("where", PLACES)
def test_a_secret_outside_content_and_call_args_is_redacted_too(where: str) -> None:
    """Every string a message carries goes through the hook: malformed call arguments, tool
    artifacts, provider extras (reasoning text) and response metadata reach the summarizer and
    the insurance dump redacted, and nothing else changes."""
    store = InMemoryStore()
    cm = ContextManager(
        context_window_tokens=2_000,
        archive=Archive.from_config(store, thread()),
        strategies=make_strategies(summarize=True),
        redact=redact,
    )
    history = [_plant(m, where) for m in make_conversation(6, long_output=1_500, seed=2)]
    assert any(SECRET in json.dumps(m.model_dump()) for m in history)
    result = cm.build(history)
    assert result.state["summary"]["dump_refs"], "no dump was written: the test proves nothing"
    entries = dump_entries(store)
    assert "[REDACTED]" in "".join(e.decode() for e in entries)
    assert all(SECRET.encode() not in e for e in entries)

    redacted = cm.summarizer.redact_messages(history)
    assert all(SECRET not in json.dumps(m.model_dump()) for m in redacted)
    # Only the secret changed: types, ids and pairing are the same.
    assert [(m.type, m.id, getattr(m, "tool_call_id", None)) for m in redacted] == [
        (m.type, m.id, getattr(m, "tool_call_id", None)) for m in history
    ]


# --- another thread's or user's references ---------------------------------------------------


def first_dump_ref(agent: Any, config: RunnableConfig) -> str:
    return str(agent.get_state(config).values["context_ledger"]["summary"]["dump_refs"][0])


@pytest.mark.parametrize("scope", ["thread", "user"])
async def test_recall_and_restore_refuse_another_threads_references(scope: str) -> None:
    script = Script.from_messages(make_conversation(4, parallel=2, long_output=4_000, seed=1))
    # The references under test are a summary's dumps: the summary-first list writes them.
    memory = ContextMemory(context_window_tokens=6_000, strategies=summary_first_strategies())
    agent = create_agent(
        script.model(),
        script.tools(),
        system_prompt=script.system,
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    owner = thread(user_id="alice")
    drive(agent, script.inputs, owner)
    ref = first_dump_ref(agent, owner)
    assert memory.archive_for(owner).read(ref)  # the owner reads it
    planted = HumanMessage(SECRET, id="planted")
    memory.archive_for(owner).put_message(planted)  # indexed by id in the owner's archive
    assert memory.restore("planted", owner) == planted

    if scope == "thread":
        intruder = thread(user_id="alice")
    else:  # the same thread id under another user
        intruder = {"configurable": {**owner["configurable"], "user_id": "mallory"}}
    with pytest.raises(ArchiveAccessError, match="belongs to"):
        memory.restore(ref, intruder)
    with pytest.raises(ArchiveAccessError, match="belongs to"):
        await memory.arestore(ref, intruder)
    with pytest.raises(ArchiveError):  # ids are looked up in the caller's own index only
        memory.restore("planted", intruder)

    # The recall tool reads the archive of the thread that calls it.
    tool = make_recall_tool(memory.archive_for(intruder))
    call = {"name": "recall", "args": {"ref": ref}, "id": "c1", "type": "tool_call"}
    answer = tool.invoke(call)
    assert answer.status == "error" and "belongs to" in text_of(answer)
    assert SECRET not in text_of(answer)
    answer = await tool.ainvoke(call)
    assert answer.status == "error"
    own = make_recall_tool(memory.archive_for(owner)).invoke(call)
    assert own.status == "success"


def test_a_forged_reference_for_another_scope_is_refused(tmp_path: Path) -> None:
    backend = DirectoryBackend(tmp_path / "archive")
    alice = Archive(backend, thread_id="t1", user_id="alice")
    ref = alice.put_text(SECRET)
    parsed = ArchiveRef.parse(ref)
    for thread_id, user_id in [("t2", "alice"), ("t1", "bob"), ("t1", None)]:
        other = Archive(backend, thread_id=thread_id, user_id=user_id)
        with pytest.raises(ArchiveAccessError):
            other.read(ref)
        # Forging the owner's scope into the reference does not help either: the scope checked
        # is the archive's own, never the reference's.
        forged = str(
            ArchiveRef(thread=other._thread, kind="text", digest=parsed.digest, user=other._user)
        )
        with pytest.raises(ArchiveError):
            other.read(forged)
    assert alice.read(ref) == SECRET


# --- directory archives -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "thread_id",
    ["../escape", "../../etc/passwd", "/abs/path", "a/../../b", "..", ".", "~root", "nul\x00byte"],
)
def test_hostile_thread_ids_stay_inside_the_root(tmp_path: Path, thread_id: str) -> None:
    root = tmp_path / "archive"
    archive = Archive(DirectoryBackend(root), thread_id=thread_id, user_id="../u")
    ref = archive.put_text("hello")
    assert archive.read(ref) == "hello"
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(p.resolve().is_relative_to(root.resolve()) for p in files)


@pytest.mark.parametrize(
    "namespace",
    [
        (NAMESPACE_ROOT, "..", "text"),
        (NAMESPACE_ROOT, "/etc", "text"),
        (NAMESPACE_ROOT, "t", "..", ".."),
        ("..", "..", "x"),
        (NAMESPACE_ROOT, "a/b", "text"),
    ],
)
def test_directory_backend_refuses_paths_out_of_the_root(
    tmp_path: Path, namespace: tuple[str, ...]
) -> None:
    backend = DirectoryBackend(tmp_path / "archive")
    with pytest.raises(ArchiveAccessError, match="refusing"):
        backend.put(namespace, "k", b"data")
    with pytest.raises(ArchiveAccessError, match="refusing"):
        backend.get(namespace, "k")
    assert not (tmp_path / "x").exists()


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "archive"
    archive = Archive(DirectoryBackend(root), thread_id="t1")
    archive.put_text("first")  # creates the thread's folders
    thread_dir = root / NAMESPACE_ROOT / "t1"
    (thread_dir / "text").rename(thread_dir / "text-old")
    (thread_dir / "text").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ArchiveAccessError, match="outside the archive root"):
        archive.put_text(SECRET)
    assert list(outside.iterdir()) == []


def test_archive_files_and_folders_are_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o000)  # the most permissive umask: the modes must not depend on it
    try:
        root = tmp_path / "archive"
        memory = ContextMemory(context_window_tokens=6_000, archive=root)
        script = Script.from_messages(make_conversation(4, parallel=2, long_output=4_000, seed=1))
        agent = create_agent(
            script.model(),
            script.tools(),
            system_prompt=script.system,
            middleware=[memory.middleware()],
            checkpointer=InMemorySaver(),
        )
        drive(agent, script.inputs, thread())
    finally:
        os.umask(old)
    files = [p for p in root.rglob("*") if p.is_file()]
    folders = [p for p in root.rglob("*") if p.is_dir()]
    assert files, "nothing was archived: the test proves nothing"
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    for p in folders:
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
    assert not [p for p in root.rglob(".tmp-*")], "no temporary file is left behind"


# --- one manager, many threads ------------------------------------------------------------------


def test_a_shared_manager_never_shows_one_thread_another_threads_message() -> None:
    words = lambda owner: " ".join(f"{owner}-{i}" for i in range(1_500))  # noqa: E731
    histories = {
        owner: [
            HumanMessage("look at the logs", id="m0"),
            AIMessage("", id="m1", tool_calls=[{"name": "logs", "args": {}, "id": call}]),
            ToolMessage(
                words(owner), tool_call_id=call, name="logs", id="m3", artifact={"owner": owner}
            ),
            AIMessage("checked", id="m4"),
            HumanMessage("and now?", id="m5"),
            AIMessage("done", id="m6"),
            HumanMessage("thanks", id="m7"),
        ]
        for owner, call in (("alice", "call_alice"), ("bobby", "call_bobby"))
    }
    cm = ContextManager(context_window_tokens=1_000, strategies=make_strategies(protect_turns=1))
    for owner, call in (("alice", "call_alice"), ("bobby", "call_bobby")):
        result = cm.build(histories[owner])
        shown = next(m for m in result.messages if isinstance(m, ToolMessage))
        assert result.state["pruned"], "the long output was pruned in both threads"
        assert shown.tool_call_id == call and shown.artifact == {"owner": owner}, owner
