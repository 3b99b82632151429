"""The summary conditions: every row of a replay summarizes with the one summarizer (issue 53)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from benchmarks.trajectories import read_trajectory
from benchmarks.workload import generate_workload
from langgraph_ctx import ScriptedChatModel
from langgraph_ctx.messages import text_of
from langgraph_ctx.prompt.fallback import fallback_summary
from langgraph_ctx.summaries.summarizer import Summarizer
from langgraph_ctx_tools.cli import main
from langgraph_ctx_tools.replay import tally
from langgraph_ctx_tools.replay.anchors import gpt4o_counter
from langgraph_ctx_tools.replay.engine import RunNeeds
from langgraph_ctx_tools.replay.pipeline_system import PipelineSystem
from langgraph_ctx_tools.replay.settings import SETTINGS
from langgraph_ctx_tools.replay.summary_models import (
    SUMMARY_CHARS,
    DeterministicSummaryModel,
    ShapeSummaryModel,
    SpanSummaryModel,
    condition_model,
    summarized_span,
)
from langgraph_ctx_tools.replay.tally import ALTERNATIVES, Tally, Terms, replay_row

RUN = (
    Path(__file__).parents[2]
    / "data/trajectories/mini-deepseek-chat__astropy__astropy-14182.json.gz"
)
"""A recorded SWE-bench run (198 messages, 110 kB of text) replayed at a small window."""
WINDOW = 8_000


def _run() -> list[BaseMessage]:
    messages = read_trajectory(RUN)
    for i, message in enumerate(messages):
        message.id = message.id or f"run-{i:04d}"
    return messages


def _conversation() -> list[BaseMessage]:
    call = {"name": "read_file", "args": {"path": "src/app.py"}, "id": "c1"}
    grep = {"name": "grep", "args": {"pattern": "def main"}, "id": "c2"}
    return [
        HumanMessage("Fix the <bug> in src/app.py & report", id="h1"),
        AIMessage("Reading it.", tool_calls=[call, grep], id="a1"),
        ToolMessage(
            "import os\n</message>\nwrote build/app.bin (id 88)",
            tool_call_id="c1",
            name="read_file",
            id="t1",
        ),
        ToolMessage(
            "Error: no such pattern", tool_call_id="c2", name="grep", id="t2", status="error"
        ),
        AIMessage("Done: fixed in src/app.py", id="a2"),
    ]


def _shape(messages: Sequence[BaseMessage]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in messages:
        calls = [(c["name"], c["args"]) for c in getattr(m, "tool_calls", [])]
        out.append((m.type, text_of(m), calls, getattr(m, "name", None) if m.type == "tool" else 0))
    return out


def test_each_systems_prompt_gives_back_the_messages_it_covers() -> None:
    messages = _conversation()
    ours = Summarizer(model=DeterministicSummaryModel()).build_prompt(messages)
    lc = SummarizationMiddleware(model=DeterministicSummaryModel(), trigger=("messages", 2))
    langchain = [HumanMessage(lc._format_summary_prompt(cast(Any, messages)))]
    langmem = [*messages, HumanMessage("Create a summary of the conversation above:")]
    for prompt in (ours, langchain, langmem):
        covered, previous = summarized_span(prompt)
        assert previous is None
        assert _shape(covered) == _shape(messages)
        # The summary is the deterministic summary of the messages, not of the instructions.
        text = DeterministicSummaryModel().invoke(prompt).text
        assert text == fallback_summary(messages, max_chars=SUMMARY_CHARS)
        assert "wrote build/app.bin (id 88)" in text and "Context Extraction" not in text


def test_a_summary_it_wrote_is_folded_in_not_summarized() -> None:
    messages = _conversation()
    model = DeterministicSummaryModel()
    first = model.invoke(
        [*messages[:4], HumanMessage("Create a summary of the conversation above:")]
    )
    later = [
        HumanMessage(f"Here is a summary of the conversation to date:\n\n{first.text}"),
        messages[4],
    ]
    lc = SummarizationMiddleware(model=model, trigger=("messages", 2))
    covered, previous = summarized_span(
        [HumanMessage(lc._format_summary_prompt(cast(Any, later)))], [first.text]
    )
    assert previous == first.text and _shape(covered) == _shape(messages[4:])
    langmem = [
        messages[4],
        HumanMessage(f"This is summary of the conversation so far: {first.text}"),
    ]
    assert summarized_span(langmem, [first.text]) == ([messages[4]], first.text)


def test_the_shape_keeps_no_line_and_adds_up_over_folds() -> None:
    messages = _conversation()
    model = ShapeSummaryModel()
    first = model.invoke([*messages[:4], HumanMessage("summarize")]).text
    second = model.invoke([messages[4], HumanMessage(f"so far: {first}")]).text
    assert "Summarized 5 earlier message(s): human 1, ai 2, tool 2." in second
    assert "grep (1), read_file (1)" in second
    assert "Task (its first line): Fix the <bug> in src/app.py & report" in second
    for line in ("wrote build/app.bin", "no such pattern", "Reading it", "Done: fixed"):
        assert line not in second


class _Spy(BaseChatModel):
    """A named model (not a stand-in): every call recorded, answered as the deterministic one."""

    _inputs: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _inner: DeterministicSummaryModel = PrivateAttr(default_factory=DeterministicSummaryModel)

    @property
    def _llm_type(self) -> str:
        return "spy"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        self._inputs.append(list(messages))
        reply = AIMessage(self._inner.reply_text(messages))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _rows() -> list[Tally]:
    return [Tally(SETTINGS[0]), *(Tally(None, alternative=a) for a in ALTERNATIVES)]


def test_a_named_model_writes_every_rows_summaries() -> None:
    messages, spy = _run(), _Spy(profile={"max_input_tokens": WINDOW})
    terms = Terms(WINDOW, 0, gpt4o_counter(), spy)
    needs = RunNeeds.of(messages)
    seen: dict[str, int] = {}
    for row in _rows():
        before = len(spy._inputs)
        replay_row(row, messages, terms, needs=needs)
        seen[row.label] = len(spy._inputs) - before
        assert row.summarizer_calls == seen[row.label]  # each row metered apart
    assert seen.pop("alt: trim_messages, tool-safe") == 0
    assert all(calls > 0 for calls in seen.values()), seen


@pytest.mark.parametrize("condition", ["same", "shape"])
def test_every_row_summarizes_with_the_conditions_model(
    condition: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = _run()
    made: dict[str, list[SpanSummaryModel]] = {}
    row = ""

    def recorded(name: str, limit: int) -> SpanSummaryModel:
        model = condition_model(name, limit)
        made.setdefault(row, []).append(model)
        return model

    monkeypatch.setattr(tally, "condition_model", recorded)
    sources: list[str] = []  # every summary of ours, as each call left it
    observe = PipelineSystem.observe

    def observed(system: PipelineSystem) -> None:
        sources.append(((system.ledger or {}).get("summary") or {}).get("source", "none"))
        observe(system)

    monkeypatch.setattr(PipelineSystem, "observe", observed)
    terms = Terms(WINDOW, 0, gpt4o_counter(), summaries=condition)
    rows = _rows()
    for tally_row in rows:
        row = tally_row.label
        replay_row(tally_row, messages, terms, needs=RunNeeds.of(messages))
    kind = DeterministicSummaryModel if condition == "same" else ShapeSummaryModel
    assert set(made) == {t.label for t in _rows()}  # every row, given one model each
    summarizing = {label: m for label, (m,) in made.items() if m.calls}
    assert set(summarizing) == {t.label for t in _rows()} - {"alt: trim_messages, tool-safe"}
    assert all(type(m) is kind for m in summarizing.values())
    # Our summaries are the model's: none rejected for the built-in fallback.
    assert "model" in sources and set(sources) <= {"none", "model"}
    assert all(t.summary_fallbacks == 0 for t in rows)
    outputs = {
        line.strip()
        for m in messages
        if isinstance(m, ToolMessage)
        for line in text_of(m).splitlines()
        if len(line.strip()) >= 20
    }
    replies = [text_of(r) for m in summarizing.values() for r in m._replies]
    kept = [line for line in outputs if any(line in reply for reply in replies)]
    if condition == "shape":
        assert kept == []
        assert all("earlier message(s)" in reply for reply in replies)
    else:
        assert kept  # the deterministic summary carries outcome lines, for every row alike
        assert not any("SESSION INTENT" in reply for reply in replies)


def _runs(folder: Path) -> Path:
    folder.mkdir()
    run = generate_workload(steps=14, seed=1)
    (folder / "run.json").write_text(json.dumps(messages_to_dict(run.messages)), encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("option", "title"), [([], "same summary"), (["--summaries", "shape"], "keeps no line")]
)
def test_the_table_and_the_rows_name_the_condition(
    option: list[str], title: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.json"
    argv = ["frontier", str(_runs(tmp_path / "runs")), "--window", "6000", "--json", str(out)]
    assert main([*argv, "--no-neighbours", *option]) == 0
    assert title in " ".join(capsys.readouterr().out.split())
    rows = json.loads(out.read_text())
    assert {r["summaries"] for r in rows} == {"shape" if option else "same"}


def test_the_condition_and_a_named_model_do_not_mix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["frontier", str(_runs(tmp_path / "runs")), "--window", "6000"]
    assert main([*argv, "--summaries", "shape", "--summarizer", "openai:gpt-4o-mini"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--summaries shape and --summarizer" in err
    with pytest.raises(ValueError, match="summary condition"):
        Terms(WINDOW, 0, len, summaries="best")


def test_system_prompts_are_not_summarized() -> None:
    covered, _ = summarized_span([SystemMessage("be brief"), *_conversation(), HumanMessage("go")])
    assert _shape(covered) == _shape(_conversation())


def test_a_summary_our_validation_rejects_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import langgraph_ctx_tools.cli.playback as playback

    model = ScriptedChatModel(messages=iter([]), fallback="I'm sorry, I hit a rate limit.")
    monkeypatch.setattr(playback, "init_model", lambda spec: model)
    out = tmp_path / "rows.json"
    argv = ["frontier", str(_runs(tmp_path / "runs")), "--window", "6000", "--json", str(out)]
    assert main([*argv, "--no-neighbours", "--summarizer", "fake:sorry"]) == 0
    (ours,) = [r for r in json.loads(out.read_text()) if not r["alternative"]]
    assert ours["summary_fallbacks"] > 0 and ours["summaries"] == "model"
    captured = capsys.readouterr()
    printed = " ".join((captured.out + captured.err).split())
    assert "written by our deterministic fallback after our validation rejected" in printed
    assert "(summarizer model failed on chunk 1 (attempt 1: error-like output" in printed
