"""`langgraph-ctx view`: the page's data (pure), what it reads from a real thread, the command.

The page itself runs in a real browser in tests/integration/test_view_browser.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, messages_to_dict

from langgraph_ctx.pipeline import ContextManager
from langgraph_ctx.tokens.exact import get_counter
from langgraph_ctx_tools.cli import main
from langgraph_ctx_tools.cli.demo import SYSTEM_PROMPT, run_demo
from langgraph_ctx_tools.cli.folder_tools import make_tools
from langgraph_ctx_tools.cli.page import prompt_parts, thread_from_db, thread_from_file, write_page
from langgraph_ctx_tools.cli.page_data import KINDS, page_data
from tests.conftest import make_conversation
from tests.unit import test_demo

tree = test_demo.tree  # the demo's small project (a fixture)

KIND = [key for key, _ in KINDS]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def part(kind: str, tokens: int, mid: str | None, *lines: str, ref: str | None = None) -> Any:
    return {"kind": kind, "id": mid, "tokens": tokens, "lines": list(lines), "ref": ref}


def test_page_data_sums_each_kind_and_names_the_rest_of_the_recorded_total() -> None:
    thread = {
        "title": "t",
        "messages": [
            {"id": "h1", "type": "human", "name": "", "text": "hi", "ref": None},
            {"id": "t1", "type": "tool", "name": "read", "text": "long output", "ref": "r1"},
        ],
        "calls": [
            {
                "report": {"tokens": 100, "limit": 200, "trigger": 180, "decisions": []},
                "parts": [
                    part("system", 10, None, "sys"),
                    part("message", 20, "h1", "[human]", "hi"),
                ],
                "tools": 30,
            },
            {
                "report": {
                    "tokens": 90,
                    "limit": 200,
                    "trigger": 180,
                    "decisions": [
                        {
                            "kind": "compact",
                            "tokens_before": 120,
                            "tokens_after": 90,
                            "message_ids": ["t1"],
                            "detail": {},
                        },
                        {
                            "kind": "prune",
                            "tokens_before": 90,
                            "tokens_after": 90,
                            "message_ids": [],
                            "detail": {},
                        },
                    ],
                },
                "parts": [
                    part("system", 10, None, "sys"),
                    part("message", 20, "h1", "[human]", "hi"),
                    part("excerpt", 25, "t1", "[tool]", "long…", ref="r1"),
                ],
                "tools": 30,
            },
        ],
        "entries": {"r1": ["[tool]", "long output"], "gone": None},
    }
    page = page_data(thread)
    first, second = page["calls"]
    assert first[:3] == [100, 200, 180]
    sums = dict(zip(KIND, second[3], strict=True))
    assert sums["excerpt"] == 25 and sums["tools"] == 30
    assert sums["outside"] == 90 - 10 - 20 - 25 - 30
    assert sum(second[3]) == 90  # the parts make up the recorded total, no more, no less
    assert first[4][:2] == second[4][:2]  # a part shown the same way twice is one item
    strings = page["strings"]
    assert strings.count("hi") == 1  # the message's text and the part's line are one string
    [(word, line, named)] = second[5]  # the empty pruning attempt is no edit
    assert strings[word] == "excerpted" and named == [1]
    assert strings[line].startswith("1 tool output excerpted, 120 -> 90 tokens")
    assert [strings[i] for i in page["entries"]["r1"]] == ["[tool]", "long output"]
    assert page["entries"]["gone"] is None
    item = page["items"][second[4][2]]
    assert item[0] == KIND.index("excerpt") and strings[item[4]] == "r1" and item[2] == 1


def test_parts_of_each_built_prompt_add_up_to_its_report_exactly(tmp_path: Path) -> None:
    messages = make_conversation(30, long_output=3_000)
    source = tmp_path / "thread.json"
    source.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    thread = thread_from_file(source, window=8_000)
    kinds = set()
    for call in thread["calls"]:
        parts = call["parts"]
        kinds |= {p["kind"] for p in parts}
        assert sum(p["tokens"] for p in parts) == call["report"]["tokens"]
        assert all(p["ref"] for p in parts if p["kind"] in ("excerpt", "shortened"))
    assert {"system", "message", "excerpt", "summary"} <= kinds
    # The same counter, message by message, as the pipeline's own report.
    counter = get_counter("gpt-4o")
    built = ContextManager(context_window_tokens=8_000).build(messages[:5])
    parts = prompt_parts(built.messages, built.state, counter)
    assert sum(p["tokens"] for p in parts) == built.report.tokens


def test_each_part_is_what_the_renderer_tagged_it(tmp_path: Path) -> None:
    """The kind of a part is the tag on the message the prompt shows, not a ledger lookup."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_ctx.archive import Archive, StoreBackend

    counter = get_counter("gpt-4o")
    messages = make_conversation(30, long_output=3_000)
    archive = Archive(StoreBackend(InMemoryStore()), thread_id="t")  # excerpts are archived
    manager, ledger = ContextManager(context_window_tokens=8_000, archive=archive), None
    for end in range(2, len(messages)):  # call by call, as an agent builds
        first = manager.build(messages[:end], state=ledger)
        ledger = first.state
        if first.state["compacted"]:
            break
    assert first.state["compacted"], "the 8,000-token window excerpts outputs"
    # The prompt fed back as history, its ledger gone: the excerpts are still the renderer's
    # (tagged `compacted`), though no ledger entry names them any more.
    again = ContextManager(context_window_tokens=100_000, strategies=[]).build(first.messages)
    assert not again.state["compacted"]
    parts = prompt_parts(again.messages, again.state, counter)
    excerpts = [p["id"] for p in parts if p["kind"] == "excerpt"]
    assert excerpts == [p["id"] for p in prompt_parts(first.messages, first.state, counter)
                        if p["kind"] == "excerpt"]  # fmt: skip
    assert all(p["ref"] is None for p in parts if p["kind"] == "excerpt")  # no entry: no ref
    assert sum(p["tokens"] for p in parts) == again.report.tokens


def test_a_compression_hint_is_the_summary_inside_the_system_prompt() -> None:
    """The hint the system prompt carries is the summary part; the rest of it the system's."""
    from langchain_core.messages import SystemMessage

    from langgraph_ctx.summaries.rebuild import render_hint

    counter = get_counter("gpt-4o")
    hint = render_hint("<completed>\n- read the files\n</completed>", 7)
    state = {"hint": {"text": hint, "cleared_ids": [], "dump_ref": "dump-1", "prompt_tokens": 1}}
    history = [SystemMessage("You explore a folder."), *make_conversation(3)[1:]]
    built = ContextManager(context_window_tokens=100_000, strategies=[]).build(
        history, state=state, memory=["the user likes short answers"]
    )
    system, carried, *rest = prompt_parts(built.messages, built.state, counter)
    assert (system["kind"], carried["kind"]) == ("system", "summary")
    assert carried["id"] == system["id"] == built.messages[0].id and carried["ref"] == "dump-1"
    assert carried["lines"] == [hint]
    # The hint costs what the system message costs beyond itself without it.
    shown = str(built.messages[0].content)
    assert hint in shown and "the user likes short answers" in shown
    without = built.messages[0].model_copy(update={"content": shown.replace("\n\n" + hint, "")})
    assert carried["tokens"] == counter([built.messages[0]]) - counter([without])
    assert sum(p["tokens"] for p in [system, carried, *rest]) == built.report.tokens


def test_a_demo_thread_read_back_call_by_call(tree: Path) -> None:
    result = run_demo(root=tree, window=3_000)
    assert result.log.calls and result.log.error is None
    db, archive = ".langgraph_ctx/demo.sqlite", Path(".langgraph_ctx/archive")
    thread = thread_from_db(
        db, "demo", archive, system_prompt=SYSTEM_PROMPT, tools=make_tools(tree)
    )
    # One bar per model call the run made, with the report the pipeline recorded for it.
    assert [c["report"]["tokens"] for c in thread["calls"]] == [s.tokens for s in result.log.calls]
    page = page_data(thread)
    for call in page["calls"]:
        sums = dict(zip(KIND, call[3], strict=True))
        # With the demo's own system prompt and tools, the counted parts are the whole total.
        assert sums["outside"] == 0 and sum(call[3]) == call[0]
    kinds = {KIND[i] for call in page["calls"] for i, n in enumerate(call[3]) if n}
    assert {"system", "summary", "quoted", "excerpt", "shortened", "message", "tools"} <= kinds
    # Every excerpt's original is the archive's entry, restorable.
    refs = {page["strings"][it[4]] for it in page["items"] if KIND[it[0]] == "excerpt"}
    assert refs and all(page["entries"][ref] for ref in refs)
    # Without them, the rest of each total is named, not spread over the parts.
    bare = page_data(thread_from_db(db, "demo", archive))
    assert all(dict(zip(KIND, c[3], strict=True))["outside"] > 0 for c in bare["calls"])
    assert [c[0] for c in bare["calls"]] == [c[0] for c in page["calls"]]


def unpack(html: str) -> dict[str, Any]:
    found = re.search(r'id="data">([A-Za-z0-9+/=]+)</script>', html)
    assert found, "the page embeds its data"
    return json.loads(gzip.decompress(base64.b64decode(found[1])))


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    page = write_page({"strings": ["</script><b>"], "calls": []}, tmp_path / "p.html")
    html = page.read_text(encoding="utf-8")
    assert unpack(html)["strings"] == ["</script><b>"]
    assert "</script><b>" not in html  # the data cannot close the script element
    assert not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing fetched
    assert "default-src 'none'" in html


def test_view_of_a_message_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = make_conversation(25, long_output=2_000)
    source = tmp_path / "thread.json"
    source.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    out = tmp_path / "thread.html"
    assert main(["view", str(source), "--window", "4000", "--html", str(out)]) == 0
    calls = sum(isinstance(m, AIMessage) for m in messages[1:])
    assert f"{calls} model calls" in capsys.readouterr().out
    data = unpack(out.read_text(encoding="utf-8"))
    assert len(data["calls"]) == calls == len(thread_from_file(source, window=4_000)["calls"])
    assert all(sum(c[3]) == c[0] <= 4_000 for c in data["calls"])
    assert data["window"] == 4_000  # a replayed file's window is known: the page draws it


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["view", "--html", "o.html"], "pass a message file or --db"),
        (["view", "--db", "x.sqlite", "--html", "o.html"], "--db needs --thread"),
        (["view", "--db", "x.sqlite", "--thread", "t", "--html", "o.html"], "no checkpoint"),
        (["view", "--db", "x.sqlite", "--thread", "t", "--html", "no/o.html"], "does not exist"),
        (["view", "missing.json", "--html", "o.html"], "no such"),
    ],
)
def test_view_errors_are_one_line(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1


def test_view_names_the_threads_of_a_database(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_demo(root=tree, window=3_000)
    db = ".langgraph_ctx/demo.sqlite"
    assert main(["view", "--db", db, "--thread", "nope", "--html", "o.html"]) == 2
    assert "threads there: demo" in capsys.readouterr().err


def test_demo_writes_its_page(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tree), "--window", "3000"]) == 0
    assert ".langgraph_ctx/demo.html" in capsys.readouterr().out
    data = unpack(Path(".langgraph_ctx/demo.html").read_text(encoding="utf-8"))
    reports = json.loads(Path(".langgraph_ctx/demo.reports.json").read_text())
    assert [c[0] for c in data["calls"]] == [c["tokens"] for c in reports["calls"]]
    assert data["window"] == 3_000  # the demo knows its model's window


def test_a_database_thread_shows_the_window_only_when_told(tree: Path) -> None:
    """A report records the budget, not the window: `--window` names it for the page."""
    run_demo(root=tree, window=3_000)
    db = ".langgraph_ctx/demo.sqlite"
    assert main(["view", "--db", db, "--thread", "demo", "--html", "a.html"]) == 0
    assert unpack(Path("a.html").read_text(encoding="utf-8"))["window"] is None
    argv = ["view", "--db", db, "--thread", "demo", "--window", "3500", "--html", "b.html"]
    assert main(argv) == 0
    data = unpack(Path("b.html").read_text(encoding="utf-8"))
    assert data["window"] == 3_500 and all(c[1] <= 3_500 for c in data["calls"])


def test_a_rebuild_after_a_turn_is_an_edit_of_the_turns_last_call(tree: Path) -> None:
    result = run_demo(root=tree, window=3_500)  # a turn ends over the hint threshold
    assert result.log.events, "a finished turn over the hint threshold rebuilds"
    thread = thread_from_db(".langgraph_ctx/demo.sqlite", "demo", Path(".langgraph_ctx/archive"))
    page = page_data(thread)
    words = [page["strings"][edit[0]] for call in page["calls"] for edit in call[5]]
    assert "cleared by a rebuild" in words
    after = [event["after_call"] for event in result.log.events if event["kind"] == "rebuild"]
    for n in after:
        assert "cleared by a rebuild" in [page["strings"][e[0]] for e in page["calls"][n - 1][5]]
