"""`langgraph-ctx frontier`: settings compared on recorded threads (issue 36, item 1)."""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

from benchmarks.workload import generate_workload
from langgraph_ctx import ContextMemory, ScriptedChatModel
from langgraph_ctx_tools.cli import main
from langgraph_ctx_tools.cli.inputs import load_setting
from langgraph_ctx_tools.replay.settings import SETTINGS, apply_code
from langgraph_ctx_tools.replay.tally import ALTERNATIVES, pareto_front

REQUIRED = {"setting", "cost", "recall", "over_budget", "invalid"}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def write_runs(folder: Path, seeds: tuple[int, ...] = (1, 2), steps: int = 14) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        run = generate_workload(steps=steps, seed=seed)
        text = json.dumps(messages_to_dict(run.messages))
        (folder / f"run{seed}.json").write_text(text, encoding="utf-8")
    return folder


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0, err
    assert "Traceback" not in err
    assert captured.out == ""
    return err


def last_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


# --- message files --------------------------------------------------------------------------


def test_every_setting_on_a_folder_of_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = write_runs(tmp_path / "runs")
    out, plot = tmp_path / "rows.json", tmp_path / "frontier.png"
    argv = ["frontier", str(runs), "--window", "8000", "--reserved", "1000"]
    assert main([*argv, "--json", str(out), "--plot", str(plot)]) == 0
    captured = capsys.readouterr()
    table = captured.out
    assert "2 thread(s)" in table and "window 8,000" in table
    every = json.loads(out.read_text())
    rows = [r for r in every if not r["alternative"]]
    assert [r["setting"] for r in rows] == [s.label for s in SETTINGS]
    alternatives = {r["setting"]: r for r in every if r["alternative"]}
    assert set(alternatives) == {a.label for a in ALTERNATIVES}
    for row in alternatives.values():  # replayed under the same measures, never recommended
        assert row["calls"] == rows[0]["calls"] and not row["recommended"], row
        assert row["missing"] is None and row["cost"] > 0 and row["apply"] is None
    # Trimming and LangChain's middleware do not say what left the prompt: no share is shown.
    assert alternatives["alt: trim_messages, tool-safe"]["restorable"] is None
    assert alternatives["alt: LC SummarizationMiddleware"]["restorable"] is None
    for row in rows:
        assert set(row) >= REQUIRED
        assert row["recall"] is None or 0 <= row["recall"] <= 1
        assert row["cost"] > 0 and row["over_budget"] == 0 and row["invalid"] == 0
        assert row["restorable"] == 1.0, row["setting"]  # nothing lost, under every setting
    (defaults,) = [r for r in rows if r["defaults"]]
    assert "default" in defaults["setting"] and defaults["cost_ratio"] == 1.0
    assert defaults["recall"] > 0
    assert plot.stat().st_size > 10_000
    # The recommendation: the last line. A change only when it buys something (a point of
    # recall within the defaults' cost, the default --max-cost 1.0, or 2% less cost at no
    # less recall); of those the best recall, ties to the cheaper; none: keep the defaults.
    last = table.strip().splitlines()[-1]
    (best,) = [r for r in rows if r["recommended"]]
    buying = [r for r in rows if not r["defaults"] and _buys(r, defaults, max_cost=1.0)]
    if buying:
        top = max(r["recall"] for r in buying)
        assert best["recall"] == top
        assert best["cost"] == min(r["cost"] for r in buying if r["recall"] == top)
        assert last.startswith(f"recommended: {best['setting']}: cost ")
        assert "(it gains at least +1 point of recall or 2% of cost" in last
    else:
        assert best["defaults"]
        assert last.startswith("recommended: keep the defaults: cost ")
        assert table.strip().splitlines()[-2].startswith("runner-up: ")
    assert "apply it: ContextMemory(context_window_tokens=8000, reserved_output_tokens=1000" in last
    n = len(SETTINGS) + len(ALTERNATIVES)
    assert f"frontier: setting {n}/{n} done" in captured.err  # progress on stderr


def _buys(row: dict[str, Any], defaults: dict[str, Any], max_cost: float) -> bool:
    """`buys_something`, on the `--json` rows (recall from its exact counts)."""
    recall, base = (r["recall_hits"] / r["recall_total"] for r in (row, defaults))
    fits = row["over_budget"] == 0 and row["invalid"] == 0 and not row["alternative"]
    more = recall >= base + 0.01 - 1e-12 and row["cost"] <= max_cost * defaults["cost"] + 0.1
    cheaper = recall >= base - 1e-12 and row["cost"] <= 0.98 * defaults["cost"] + 0.1
    return fits and (more or cheaper)


def test_the_same_input_gives_the_same_rows(tmp_path: Path) -> None:
    runs = write_runs(tmp_path / "runs", seeds=(3,))
    for name in ("a.json", "b.json"):
        # deepagents' own row moves by a few tokens between runs (its offloads are named by
        # a uuid and stamped with the clock): ours are compared.
        argv = ["frontier", str(runs / "run3.json"), "--window", "6000", "--no-neighbours"]
        argv.append("--no-alternatives")
        assert main([*argv, "--json", name]) == 0
    assert Path("a.json").read_text() == Path("b.json").read_text()


def test_a_setting_of_ones_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = write_runs(tmp_path / "runs", seeds=(1,))
    plain = tmp_path / "window-only.json"
    plain.write_text(json.dumps([{"type": "sliding_window", "summarize": False}]))
    rich = tmp_path / "tuned.json"
    config = {
        "label": "tuned",
        "strategies": [{"type": "drop_memory"}, {"type": "sliding_window"}],
        "budget": {"target": 0.3},
    }
    rich.write_text(json.dumps(config))
    argv = ["frontier", str(runs), "--window", "8000", "--no-neighbours", "--json", "rows.json"]
    assert main([*argv, "--setting", str(plain), "--setting", str(rich)]) == 0
    every = json.loads(Path("rows.json").read_text())
    rows = {r["setting"]: r for r in every if not r["alternative"]}
    assert set(rows) == {"defaults", "setting window-only.json", "tuned"}
    assert rows["tuned"]["budget"] == {"target": 0.3}
    assert rows["tuned"]["strategies"] == [{"type": "drop_memory"}, {"type": "sliding_window"}]
    assert f"strategies_from_config(Path({str(rich)!r}).read_text())" in rows["tuned"]["apply"]
    assert "budget=ContextBudget(context_window_tokens=8000, target=0.3)" in rows["tuned"]["apply"]
    assert rows["setting window-only.json"]["cost"] != rows["defaults"]["cost"]
    assert last_line(capsys).startswith("recommended: ")


def test_apply_code_runs() -> None:
    """The recommendation's code builds the setting it names."""
    from dataclasses import replace

    from langgraph_ctx import ContextBudget, strategies_from_config
    from langgraph_ctx.strategies import (
        Compaction,
        ShortenTurns,
        SlidingWindow,
        default_strategies,
    )

    names = {
        "ContextMemory": ContextMemory,
        "ContextBudget": ContextBudget,
        "replace": replace,
        "default_strategies": default_strategies,
        "strategies_from_config": strategies_from_config,
        "Compaction": Compaction,
        "ShortenTurns": ShortenTurns,
        "SlidingWindow": SlidingWindow,
    }
    for setting in SETTINGS:
        code = apply_code(setting, window=8000, reserved=500, model=None).split(" (the")[0]
        memory = eval(code, names)
        built = memory.manager.strategies
        assert [type(s) for s in built] == [type(s) for s in setting.strategy_list()], code
        assert built == setting.strategy_list(), code
        assert memory.manager.budget == setting.budget_for(8000, 500), code
        options = {"summary_placement": "after_task", **setting.manager_options()}
        assert memory.manager.summary_placement == options["summary_placement"], code


def test_model_profile_gives_the_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = write_runs(tmp_path / "runs", seeds=(1,), steps=4)
    argv = ["frontier", str(runs), "--model", "openai:gpt-4o-mini", "--no-neighbours"]
    assert main(argv) == 0  # no key and no network: the provider package's profile table
    out = " ".join(capsys.readouterr().out.split())
    assert "window 128,000" in out and "openai:gpt-4o-mini's counter" in out
    assert "ContextMemory(model=model) (the defaults" in out


def test_a_real_summarizer_is_counted_and_priced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import langgraph_ctx_tools.cli.playback as playback

    summary = "<completed>read the code</completed><remaining>fix</remaining>"
    model = ScriptedChatModel(messages=[], fallback=summary)
    monkeypatch.setattr(playback, "init_model", lambda spec: model)
    runs = write_runs(tmp_path / "runs", seeds=(1,))
    argv = ["frontier", str(runs), "--window", "6000", "--no-neighbours", "--json", "r.json"]
    assert main([*argv, "--summarizer", "fake:summarizer"]) == 0
    rows = json.loads(Path("r.json").read_text())
    (row,) = [r for r in rows if not r["alternative"]]
    assert row["summarizer_calls"] > 0 and row["summarizer_tokens"] > 0
    # The alternatives that summarize get the same model, metered the same way.
    (lc,) = [r for r in rows if "SummarizationMiddleware" in r["setting"]]
    assert lc["summarizer_calls"] > 0 and lc["summarizer_tokens"] > 0
    assert row["cost"] > row["tokens"] - row["reusable_tokens"] + 0.1 * row["reusable_tokens"]


def test_cache_price_prices_the_reusable_tokens(tmp_path: Path) -> None:
    runs = write_runs(tmp_path / "runs", seeds=(1,), steps=8)
    base = ["frontier", str(runs), "--window", "6000", "--no-neighbours"]
    assert main([*base, "--json", "a.json", "--cache-price", "0.5"]) == 0
    (row, *_) = json.loads(Path("a.json").read_text())
    expected = (row["tokens"] - row["reusable_tokens"] + 0.5 * row["reusable_tokens"]) + row[
        "summarizer_tokens"
    ]
    assert row["cost"] == pytest.approx(expected, abs=0.1)


# --- a checkpoint database ------------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    n = int(path.rsplit("_", 1)[1].split(".")[0])
    lines = [f"def handler_{n}_{k}(request): return dispatch_table_{n}[{k}]" for k in range(60)]
    return "\n".join(lines)


def record(db: Path, threads: dict[str, int]) -> None:
    """Threads of a real create_agent run with ContextMemory, on a SQLite checkpointer.

    Message ids are drawn from a seeded generator: an id is part of the prompt (placeholders
    and shortened turns name it), and random ones move the prompt's size by a few tokens a
    message, enough to change whether a summary lands in a short run.
    """
    seeded = random.Random(7)

    def seeded_uuid4() -> uuid.UUID:
        return uuid.UUID(int=seeded.getrandbits(128), version=4)

    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        with mock.patch("uuid.uuid4", seeded_uuid4):
            saver = SqliteSaver(conn)
            for thread, reads in threads.items():
                script: list[Any] = []
                for n in range(reads):
                    path = f"src/mod_{n}.py"
                    call = {"name": "read_file", "args": {"path": path}, "id": f"c{n}"}
                    said = f"handler_{n - 1}_3 calls dispatch_table_{n - 1}" if n else ""
                    script.append(AIMessage(said, tool_calls=[call], id=f"{thread}-a{n}"))
                done = f"Done: handler_{reads - 1}_7 is the culprit."
                script.append(AIMessage(done, id=f"{thread}-done"))
                model = ScriptedChatModel(messages=script, profile={"max_input_tokens": 1_500})
                memory = ContextMemory(model=model, reserved_output_tokens=300)
                agent = create_agent(
                    model, [read_file], middleware=[memory.middleware()], checkpointer=saver
                )
                config: Any = {"configurable": {"thread_id": thread}}
                task = HumanMessage("Find the broken handler.", id=f"{thread}-task")
                agent.invoke({"messages": [task]}, config)
    finally:
        conn.close()


def test_every_thread_of_a_sqlite_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "agent.sqlite"
    record(db, {"alpha": 18, "beta": 3})
    with SqliteSaver.from_conn_string(str(db)) as saver:
        live = saver.get_tuple({"configurable": {"thread_id": "alpha"}})
        assert live is not None
        assert len(live.checkpoint["channel_values"]["messages"]) < 38  # some were removed
    before = db.read_bytes()
    argv = ["frontier", "--db", str(db), "--window", "3000", "--reserved", "300"]
    assert main([*argv, "--no-neighbours", "--json", "rows.json"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # Every model call of both threads (19 + 4), those whose messages ContextMemory removed
    # from live state included: the full history is read back from the database's archive.
    assert "2 thread(s), 23 model calls" in out
    (row, *_) = json.loads(Path("rows.json").read_text())
    assert row["calls"] == 23 and row["recall"] is not None and row["recall"] > 0
    assert db.read_bytes() == before  # read-only
    assert main([*argv, "--no-neighbours", "--thread", "beta"]) == 0
    assert "1 thread(s), 4 model calls" in " ".join(capsys.readouterr().out.split())


# --- bad input: one line, exit 2, nothing written -------------------------------------------


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    runs = write_runs(tmp_path / "runs", seeds=(1,), steps=3)
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.json").write_text('{"title": "not messages"}')
    (tmp_path / "broken.json").write_text('[{"type": "nonsense", "data": {}}]')
    no_threads = tmp_path / "empty.sqlite"
    with SqliteSaver.from_conn_string(str(no_threads)) as saver:
        saver.setup()
    (tmp_path / "junk.sqlite").write_bytes(b"this is not sqlite" * 100)
    (tmp_path / "bad-setting.json").write_text('[{"type": "no_such_strategy"}]')
    window = ["--window", "8000"]
    return {
        "not messages": ([str(tmp_path / "notes.json"), *window], "not a message list"),
        "not LangChain messages": (
            [str(tmp_path / "broken.json"), *window],
            "not a LangChain message list",
        ),
        "missing file": ([str(tmp_path / "nope.json"), *window], "no such transcript file"),
        "empty folder": ([str(tmp_path / "empty"), *window], "holds no .json or .json.gz file"),
        "no threads": (["--db", str(no_threads), *window], "holds no thread"),
        "no database": (["--db", str(tmp_path / "none.sqlite"), *window], "no checkpoint database"),
        "not a database": (["--db", str(tmp_path / "junk.sqlite"), *window], "not a checkpoint"),
        "window below the system prompt": (
            [str(runs), "--window", "60"],
            "too small for the system prompt",
        ),
        "reserve eats the window": (
            [str(runs), "--window", "4000", "--reserved", "4000"],
            "too small for the system prompt",
        ),
        "no window": ([str(runs)], "pass --window TOKENS or --model"),
        "no input": (window, "pass message JSON files"),
        "thread without db": ([str(runs), "--thread", "t", *window], "pass --db PATH too"),
        "bad setting": (
            [str(runs), *window, "--setting", str(tmp_path / "bad-setting.json")],
            "unknown strategy type 'no_such_strategy'",
        ),
        "bad cache price": ([str(runs), *window, "--cache-price", "2"], "between 0 and 1"),
        "unknown model": ([str(runs), "--model", "nosuchprovider:x"], "cannot use model"),
    }  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        "not messages",
        "not LangChain messages",
        "missing file",
        "empty folder",
        "no threads",
        "no database",
        "not a database",
        "window below the system prompt",
        "reserve eats the window",
        "no window",
        "no input",
        "thread without db",
        "bad setting",
        "bad cache price",
        "unknown model",
    ],
)
def test_bad_input_gets_one_line_and_writes_nothing(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, needle = _bad_inputs(tmp_path)[case]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    out, plot = tmp_path / "rows.json", tmp_path / "plot.png"
    code = main(["frontier", *argv, "--json", str(out), "--plot", str(plot)])
    assert code == 2
    line = one_error_line(capsys)
    assert line.startswith("langgraph-ctx frontier: ") and needle in line, line
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == stamps


def test_an_unknown_thread_names_the_threads_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "agent.sqlite"
    record(db, {"alpha": 1})
    assert main(["frontier", "--db", str(db), "--thread", "nope", "--window", "3000"]) == 2
    assert "no thread 'nope'" in (line := one_error_line(capsys)) and "alpha" in line


def test_output_folders_must_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = write_runs(tmp_path / "runs", seeds=(1,), steps=3)
    assert main(["frontier", str(runs), "--window", "8000", "--json", "no/rows.json"]) == 2
    assert "folder no does not exist" in one_error_line(capsys)


def test_help_states_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frontier", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in ("usage: langgraph-ctx frontier", "(default: 0.1)", "(default: 0)", "--setting"):
        assert needle in text


def test_load_setting_reads_a_plain_list(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"type": "sliding_window", "summarize": false}')
    setting = load_setting(path)
    assert setting.label == "setting s.json" and not setting.is_defaults
    assert setting.strategy_list()[0].summarize is False


def test_max_cost_caps_what_the_recommendation_may_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--max-cost` is the most the pick may cost, times the defaults': a loose cap picks the
    best recall of all; the line says what a point of recall costs over the defaults."""
    runs = write_runs(tmp_path / "runs")
    out = tmp_path / "rows.json"
    argv = ["frontier", str(runs), "--window", "8000", "--reserved", "1000", "--json", str(out)]
    assert main([*argv, "--max-cost", "100"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    rows = json.loads(out.read_text())
    (best,) = [r for r in rows if r["recommended"]]
    (defaults,) = [r for r in rows if r["defaults"]]
    buying = [r for r in rows if not r["defaults"] and _buys(r, defaults, max_cost=100)]
    assert best["recall"] == max(r["recall"] for r in [defaults, *buying])
    if best["recall"] > defaults["recall"]:
        assert "(it gains at least +1 point of recall" in last
        assert "within 100x the defaults' cost); " in last  # what the point costs, or less
    assert main([*argv, "--max-cost", "0"]) == 2
    assert "expected a ratio over 0" in capsys.readouterr().err


def test_the_pareto_front_is_what_nothing_beats() -> None:
    """The plot labels the front only: cheaper or better than every other point, equal points
    once; the rest are numbered in a legend."""
    points = [(1.0, 50.0), (1.0, 50.0), (2.0, 60.0), (3.0, 55.0), (0.5, 40.0), (2.0, 60.0)]
    assert pareto_front(points) == [4, 0, 2]
    assert pareto_front([]) == []
    assert pareto_front([(1.0, 1.0)]) == [0]


def test_an_alternative_not_installed_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "deepagents" else found(name)
    )
    runs = write_runs(tmp_path / "runs", seeds=(1,), steps=6)
    argv = ["frontier", str(runs), "--window", "6000", "--no-neighbours", "--json", "r.json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "alt: deepagents: not installed: pip install deepagents" in captured.err
    assert "not installed" in captured.out  # its row in the table
    (row,) = [r for r in json.loads(Path("r.json").read_text()) if "deepagents" in r["setting"]]
    assert row["missing"] == "not installed: pip install deepagents" and row["calls"] == 0
