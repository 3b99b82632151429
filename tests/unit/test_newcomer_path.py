"""The newcomer's path, as tried on a fresh clone (issue 42, item 4): each defect reproduced.

Before the fix: `frontier --db .langgraph_ctx/demo.sqlite` after the demo replayed 4 of the
demo's 27 calls (the summary dumps live in the demo's archive folder, which `frontier` did not
read by default), warned, and still recommended a setting with exit 0; `--system-prompt` with
2,000 characters of text failed with `[Errno 36] File name too long`; `--window 10` printed a
table and exited 0; `frontier README.md` said "not JSON" without saying what it expects; a
folder holding one other JSON file stopped the whole run; `frontier` with no window read the
database first; `restore REF --thread wrong` did not name the reference's thread, and `restore`
printed the message as one JSON line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

from langgraph_ctx.archive import encode_message
from langgraph_ctx.archive.codec import decode_message
from langgraph_ctx_tools.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if not line.startswith("frontier: ")]
    assert len(lines) == 1, err
    return lines[0]


def recording(path: Path, turns: int = 3) -> Path:
    messages = []
    for n in range(turns):
        call = {"name": "read", "args": {"path": f"f{n}.py"}, "id": f"c{n}"}
        messages += [
            HumanMessage(f"read file {n}", id=f"u{n}"),
            AIMessage("", tool_calls=[call], id=f"a{n}"),
            ToolMessage(
                f"line one of f{n}\nline two", tool_call_id=f"c{n}", name="read", id=f"t{n}"
            ),
            AIMessage(f"f{n} read", id=f"b{n}"),
        ]
    path.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    return path


def demo_thread(capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """Run the demo as `make demo` does; its model calls and the references `inspect` lists.

    The figures the README quotes from this run stay within the spread it states.
    """
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    readme_figures_hold(out)
    calls = int(re.search(r"turns / model calls\s*│\s*\d+ / (\d+)", out)[1])  # type: ignore[index]
    assert main(["inspect", "--db", ".langgraph_ctx/demo.sqlite", "--thread", "demo"]) == 0
    refs = re.findall(
        r"lgctx:[\w~-]+:(?:message|messages|text):[0-9a-f]{64}", capsys.readouterr().out
    )
    return calls, refs


def readme_figures_hold(table: str) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    prose = " ".join(readme.split())
    stated = re.search(
        r"a run reads (\d+) calls, none over the limit, (\d+) tool outputs excerpted, (\d+) "
        r"model turns shortened, (\d+) summar(?:y|ies), (\d+)% cache-reusable \(as the sources "
        r"it reads change, the counts move within (\d+)-(\d+) calls, (\d+)-(\d+) outputs, "
        r"(\d+)-(\d+) turns, (\d+)-(\d+) summaries and (\d+)-(\d+)%",
        prose,
    )
    assert stated, "README: the demo paragraph states its figures and their spread"
    n = [int(x) for x in stated.groups()]
    cells = " ".join(table.split())

    def cell(label: str, pattern: str) -> int:
        found = re.search(re.escape(label) + r" │ " + pattern, cells)
        assert found, label
        return int(found[1])

    calls = cell("turns / model calls", r"\d+ / (\d+)")
    outputs = cell("tool outputs excerpted", r"(\d+)")
    turns = cell("model turns shortened", r"(\d+)")
    summaries = cell("summaries", r"(\d+)")
    cached = cell("cache-reusable share", r"(\d+)%")
    assert cell("calls over the limit", r"(\d+)") == 0
    spreads = [(calls, n[5], n[6]), (outputs, n[7], n[8]), (turns, n[9], n[10])]
    spreads += [(summaries, n[11], n[12]), (cached, n[13], n[14])]
    for value, low, high in spreads:
        assert low <= value <= high, (value, low, high)
    for example, (_, low, high) in zip(n[:5], spreads, strict=True):
        assert low <= example <= high  # the example the README prints is inside its spread


def test_frontier_replays_every_call_of_the_demo_from_the_one_default_archive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls, _ = demo_thread(capsys)
    db = ".langgraph_ctx/demo.sqlite"
    assert main(["frontier", "--db", db, "--window", "6000", "--no-neighbours"]) == 0
    printed = capsys.readouterr()
    # One replayed call per AI message of the thread: every call the demo made, read back
    # (before the fix: 4 of 27).
    replayed = int(re.search(r"([\d,]+) model calls", printed.out)[1].replace(",", ""))  # type: ignore[index]
    assert replayed == calls
    assert "unreadable" not in printed.out + printed.err
    assert "recommended: " in printed.out and "recommended: none" not in printed.out

    # Pointed at an archive that does not hold the thread: it says so and recommends nothing.
    Path("empty").mkdir()
    argv = ["frontier", "--db", db, "--window", "6000", "--no-neighbours", "--archive", "empty"]
    assert main(argv) == 1
    printed = capsys.readouterr()
    assert "part of its history is unreadable" in printed.out + printed.err
    assert "recommended: none: 1 thread(s) could not be read whole" in printed.out


def test_restore_reads_as_text_names_the_right_thread_and_keeps_the_exact_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, refs = demo_thread(capsys)
    ref = next(r for r in refs if ":message:" in r)
    assert main(["restore", ref, "--thread", "demo", "--json"]) == 0
    exact = capsys.readouterr().out.rstrip("\n").encode()
    message = decode_message(exact)
    assert encode_message(message) == exact
    assert main(["restore", ref, "--thread", "demo"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith(f"[{message.type}")
    assert f"id={message.id}" in text.splitlines()[0]
    assert not text.startswith("{")
    assert main(["restore", ref, "--thread", "wrong"]) == 2  # a usage error, like inspect's
    assert "no thread 'wrong' in .langgraph_ctx/archive; threads there: demo" in error_line(capsys)


def test_frontier_defects_of_a_first_try(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = recording(tmp_path / "run.json")
    prompt = "You are a careful assistant. " * 70  # about 2,000 characters
    assert len(prompt) > 1_900
    argv = ["frontier", str(run), "--window", "4000", "--no-neighbours"]
    assert main([*argv, "--system-prompt", prompt]) == 0
    capsys.readouterr()

    assert main(["frontier", str(run), "--window", "10", "--no-neighbours"]) == 1
    assert "recommended: none: every setting sent prompts over the budget" in (
        capsys.readouterr().out
    )

    (tmp_path / "README.md").write_text("# not a transcript\n", encoding="utf-8")
    assert main(["frontier", "README.md", "--window", "4000"]) == 2
    assert "expected a message JSON file (the output of" in error_line(capsys)

    # The window is checked before anything is read.
    assert main(["frontier", "--db", "missing.sqlite"]) == 2
    assert "pass --window TOKENS or --model" in error_line(capsys)


def test_a_folder_with_other_json_files_replays_the_threads_it_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    recording(runs / "a.json")
    recording(runs / "b.json", turns=2)
    (runs / "settings.json").write_text('{"theme": "dark"}', encoding="utf-8")
    assert main(["frontier", str(runs), "--window", "4000", "--no-neighbours"]) == 0
    printed = capsys.readouterr()
    assert "frontier: left out " in printed.err and "settings.json" in printed.err
    assert "2 thread(s)" in printed.out
    (runs / "a.json").unlink()
    (runs / "b.json").unlink()
    assert main(["frontier", str(runs), "--window", "4000"]) == 2
    assert "holds no recorded thread" in error_line(capsys)
