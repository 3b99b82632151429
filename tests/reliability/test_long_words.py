"""Names are scanned in linear time (issue 50, break 6): `frontier` hung on a long word.

`path_names_in` and `names_in` ran their regexes over the text, and each position of a run of
word characters scanned to the run's end before failing: 20 KB took 9 s, a 1 MB one-word
transcript never finished. The scans now find the same names in linear time; the regexes stay
as the definition, and these tests hold the scans to them on the recorded runs and on text
made to hit every branch.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from langgraph_ctx.messages import text_of
from langgraph_ctx_tools.replay import measure

ROOT = Path(__file__).resolve().parents[2]


def by_definition(pattern: str, text: str) -> list[str]:
    regex = measure._NAME_RE if pattern == "names" else measure._PATH_OR_DOTTED_RE
    return [m.group(0) for m in regex.finditer(text)]


def by_scan(pattern: str, text: str) -> list[str]:
    scan = measure._name_matches if pattern == "names" else measure._dotted_matches
    return list(scan(text))


@pytest.mark.trajectories
@pytest.mark.parametrize("pattern", ["names", "paths"])
def test_the_scans_find_the_definitions_names_on_recorded_runs(
    pattern: str, trajectories: dict[str, list[BaseMessage]]
) -> None:
    sample = [trajectories[name] for name in sorted(trajectories)[::4]]  # 12 of the 45 runs
    texts = [text_of(m) for run in sample for m in run]
    calls = [call for run in sample for m in run for call in getattr(m, "tool_calls", [])]
    texts += [str(call.get("args")) for call in calls]
    assert sum(map(len, texts)) > 200_000
    for text in texts:
        assert by_scan(pattern, text) == by_definition(pattern, text)


@pytest.mark.parametrize("pattern", ["names", "paths"])
@pytest.mark.parametrize("alphabet", ["azAZbf09_.-/ é٣x", "aAzZ09_.", "abcdef0123z._", "zZa_.-/1"])
def test_the_scans_find_the_definitions_names_on_every_branch(pattern: str, alphabet: str) -> None:
    """Strings of the characters each branch turns on: long runs, dots, slashes, hex, digits."""
    rng = random.Random(f"{pattern}-{alphabet}")
    for _ in range(1_500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 90)))
        assert by_scan(pattern, text) == by_definition(pattern, text), repr(text)


_LONG_WORDS = textwrap.dedent(
    """
    import time
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph_ctx_tools.replay.measure import NextStepRecall, names_in, path_names_in
    word = "z" * 1_000_000
    started = time.monotonic()
    for text in (word + ".", word + "/", "0123456z" * 32_768, "a.b-" * 65_536):
        names_in(text), path_names_in(text)  # each branch on a long run
    call = {"name": "cat", "args": {}, "id": "c1"}
    run = [HumanMessage("go"), AIMessage("", tool_calls=[call]),
           ToolMessage(word, tool_call_id="c1"), AIMessage(word)]
    NextStepRecall.of(run), NextStepRecall.of(run, names=path_names_in)
    print(round(time.monotonic() - started, 2))
    """
)


def test_a_one_megabyte_word_is_scanned_in_seconds() -> None:
    """Before: 20 KB took 9 s and 1 MB never ended (a subprocess, so a hang is a failure)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LONG_WORDS], capture_output=True, text=True, cwd=ROOT,
            timeout=60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("scanning a 1 MB one-word run for names took over 60 s")
    assert done.returncode == 0, done.stderr[-2000:]
