from __future__ import annotations

import copy
import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages import text_of
from langgraph_ctx.prompt.fallback import fallback_summary
from langgraph_ctx.summaries.summarizer import Summarizer, SummaryOutcome
from langgraph_ctx.summaries.transcript import SUMMARY_PROMPT, redact_messages, render_transcript
from langgraph_ctx.tokens import count_tokens, counter_for_model
from tests.conftest import call, load_trajectories
from tests.fakes import ScriptedChatModel, scripted

SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"

GOOD = (
    "<completed>\n- Read the test.\n</completed>\n<remaining>\n- Run the suite.\n</remaining>\n"
    "<current_state>\n- parser.py edited.\n</current_state>\n<notes>\n- FACT-1\n</notes>"
)


# --- fakes and helpers ----------------------------------------------------------------------


def bodies(model: ScriptedChatModel) -> list[str]:
    """The text of each prompt's last message: what the summarizer asked about."""
    return [text_of(p[-1]) for p in model.prompts]


def tc(name: str, args: dict[str, Any], call_id: str) -> ToolCall:
    return ToolCall(name=name, args=args, id=call_id)


def conversation() -> list[BaseMessage]:
    """A fixed coding-agent conversation; the second request is still open at its end."""
    return [
        HumanMessage(
            "Fix the failing test in tests/test_parser.py, please.\n"
            "FACT-1: the release branch is rel-2.4",
            id="h1",
        ),
        AIMessage(
            "I'll read the test first.",
            tool_calls=[tc("read_file", {"path": "tests/test_parser.py"}, "c1")],
            id="a1",
        ),
        ToolMessage(
            "def test_parse():\n    assert parse('1') == 1\n", tool_call_id="c1", name="read_file"
        ),
        AIMessage(
            "",
            tool_calls=[
                tc("bash", {"command": "pytest tests/test_parser.py -x"}, "c2"),
                tc("grep", {"pattern": "def parse", "dir": "src"}, "c3"),
            ],
            id="a2",
        ),
        ToolMessage(
            'Traceback (most recent call last):\n  File "/usr/lib/python3.11/x.py", line 3\n'
            "    SECRET_ERROR_BODY = parse(x)\nAssertionError: '1' != 1",
            tool_call_id="c2",
            name="bash",
            status="error",
        ),
        ToolMessage("src/app/parser.py:12:def parse(text):", tool_call_id="c3", name="grep"),
        AIMessage(
            "parse returns a string; plan: cast to int in src/app/parser.py.",
            tool_calls=[
                tc("edit_file", {"path": "src/app/parser.py", "old": "return t", "new": "x"}, "c4")
            ],
            id="a3",
        ),
        ToolMessage(
            "wrote /work/repo/src/app/parser.py\nFACT-2: build id 88317",
            tool_call_id="c4",
            name="edit_file",
        ),
        AIMessage("Fixed: parse now returns int.\nFACT-3: ticket JIRA-4411", id="a4"),
        HumanMessage("Now run the whole suite and fix what fails.", id="h2"),
        AIMessage("", tool_calls=[tc("bash", {"command": "pytest -q"}, "c5")], id="a5"),
        ToolMessage(
            "Error: 2 failed, 40 passed\nDETAILS_SHOULD_NOT_APPEAR in tests/test_cli.py",
            tool_call_id="c5",
            name="bash",
        ),
    ]


def chars(messages: Sequence[BaseMessage]) -> int:
    return sum(len(text_of(m)) for m in messages)


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("LGCTX_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path}; run with LGCTX_UPDATE_SNAPSHOTS=1 to write it"
    assert text + "\n" == path.read_text(encoding="utf-8"), (
        f"{name} changed; if intended, rerun with LGCTX_UPDATE_SNAPSHOTS=1 and review the diff"
    )


async def run(
    summarizer: Summarizer,
    messages: Sequence[BaseMessage],
    mode: str,
    *,
    previous: str | None = None,
) -> SummaryOutcome:
    """`summarize` or `asummarize`, so one test body covers both."""
    outcome: SummaryOutcome = await call(
        summarizer, "summarize", messages, mode=mode, previous=previous
    )
    return outcome


# --- the model path -------------------------------------------------------------------------


async def test_no_model_uses_fallback_directly(mode: str) -> None:
    out = await run(Summarizer(), conversation(), mode)
    assert out == SummaryOutcome(fallback_summary(conversation()), "fallback", 0, None, 0)


async def test_model_summary_and_prompt(mode: str) -> None:
    model = scripted(GOOD)
    summarizer = Summarizer(model=model, token_counter=len)
    out = await run(summarizer, conversation(), mode)
    assert out == SummaryOutcome(GOOD, "model", 1, None, 2)
    [prompt] = model.prompts
    assert isinstance(prompt[0], SystemMessage) and prompt[0].content == SUMMARY_PROMPT
    assert prompt == summarizer.build_prompt(conversation())
    body = text_of(prompt[1])
    assert "<previous_summary>" not in body
    assert render_transcript(conversation()) in body
    assert '\n[tool call] read_file({"path":"tests/test_parser.py"})\n' in body


async def test_input_tokens_counted_with_default_counter(mode: str) -> None:
    # The default counter is the summarizer model's (`counter_for_model`): the scripted model
    # is not OpenAI's, so it gets the provider approximation, never OpenAI's tokenizer.
    summarizer = Summarizer(model=scripted(GOOD))
    out = await run(summarizer, conversation(), mode)
    prompt = summarizer.build_prompt(conversation())
    assert out.input_tokens == counter_for_model(summarizer.model)(prompt) > 100
    assert out.input_tokens != count_tokens(prompt)


async def test_previous_summary_is_folded_not_resummarized(mode: str) -> None:
    model = scripted(GOOD)
    previous = "<summary>\n<completed>\n- Cloned the repo.\n</completed>\n</summary>"
    await run(Summarizer(model=model), conversation(), mode, previous=previous)
    body = bodies(model)[0]
    assert (
        "<previous_summary>\n<completed>\n- Cloned the repo.\n</completed>\n</previous_summary>"
        in body
    )
    assert body.index("<previous_summary>") < body.index("<transcript>")
    assert "fold the new messages into it" in body
    assert "<summary>" not in body


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (f"<summary>\n{GOOD}\n</summary>", GOOD),
        (f"```xml\n{GOOD}\n```", GOOD),
        (
            "<completed>\n- a\n</completed>\n<remaining>\nNone.\n</remaining>",
            "<completed>\n- a\n</completed>\n<remaining>\nNone.\n</remaining>\n"
            "<current_state>\n- (none)\n</current_state>\n<notes>\n- (none)\n</notes>",
        ),
        (
            "The agent fixed parser.py.\nNext: run the suite.",
            "<completed>\n- (none)\n</completed>\n<remaining>\n- (none)\n</remaining>\n"
            "<current_state>\nThe agent fixed parser.py.\nNext: run the suite.\n</current_state>"
            "\n<notes>\n- (none)\n</notes>",
        ),
        (  # "Error" inside a real summary is content, not an error reply
            GOOD.replace("- FACT-1", "- Error 502 from the API was fixed by a retry."),
            GOOD.replace("- FACT-1", "- Error 502 from the API was fixed by a retry."),
        ),
    ],
    ids=["summary-wrapper", "code-fence", "missing-sections", "free-text", "error-word-inside"],
)
async def test_accepted_outputs_are_normalized(mode: str, reply: str, expected: str) -> None:
    out = await run(Summarizer(model=scripted(reply)), conversation(), mode)
    assert (out.source, out.text, out.model_calls) == ("model", expected, 1)


BAD_OUTPUTS = {
    "empty": ("", "empty output"),
    "whitespace": ("  \n ", "empty output"),
    "too-long-to-summarize": ("Previous conversation was too long to summarize.", "error-like"),
    "error": ("Error: context_length_exceeded", "error-like"),
    "apology": ("I'm sorry, but I can't help with that.", "error-like"),
    "traceback": ("Traceback (most recent call last):\n  boom", "error-like"),
    "error-preamble": ("Error: truncated\n" + GOOD, "error-like"),
    "error-in-sections": (
        "<completed>Error: rate limit</completed><remaining></remaining>",
        "error-like",
    ),
    "enormous": ("<completed>\n" + "- step\n" * 700 + "</completed><remaining/>", "enormous"),
    "no-remaining": ("<completed>\n- a\n</completed>\n<notes>\n- b\n</notes>", "malformed"),
    "unclosed": ("<completed>\n- a\n</completed>\n<remaining>\n- b", "malformed"),
    "empty-sections": ("<completed></completed><remaining>\n</remaining>", "empty sections"),
}


@pytest.mark.parametrize("case", sorted(BAD_OUTPUTS))
async def test_rejected_outputs_fall_back(mode: str, case: str) -> None:
    reply, reason = BAD_OUTPUTS[case]
    summarizer = Summarizer(model=scripted(reply, reply, reply), max_output_tokens=100)
    out = await run(summarizer, conversation(), mode)
    # An answer that cannot be used is not asked for again (the same prompt would cost the
    # same): the fallback takes over at once. Only failures (exceptions, timeouts) retry.
    assert out.source == "fallback" and out.model_calls == 1
    assert out.text == fallback_summary(conversation(), max_chars=400)
    assert out.error is not None and reason in out.error and "attempt 2" not in out.error
    assert "too long to summarize" not in out.text


async def test_long_but_not_enormous_output_is_cut_to_the_bound(mode: str) -> None:
    lines = "".join(f"- step {i:03d}\n" for i in range(60))  # ~660 chars, bound 400
    reply = f"<completed>\n{lines}</completed>\n<remaining>\n- last\n</remaining>"
    out = await run(Summarizer(model=scripted(reply), max_output_tokens=100), [], mode)
    assert out.source == "fallback"  # nothing to summarize: no call at all
    out = await run(Summarizer(model=scripted(reply), max_output_tokens=100), conversation(), mode)
    assert out.source == "model" and len(out.text) <= 400
    assert "earlier item(s) omitted" in out.text and "- step 059" in out.text
    assert "- step 000" not in out.text and "- last" in out.text


async def test_exceptions_are_retried_then_fall_back(mode: str) -> None:
    model = scripted(ValueError("boom 1"), RuntimeError("boom 2"), ValueError("boom 3"))
    out = await run(Summarizer(model=model, token_counter=len), conversation(), mode)
    assert out.source == "fallback" and out.model_calls == 3 and out.input_tokens == 6
    assert out.error == (
        "summarizer model failed on chunk 1 (attempt 1: ValueError: boom 1; "
        "attempt 2: RuntimeError: boom 2; attempt 3: ValueError: boom 3)"
    )
    assert out.text == fallback_summary(conversation(), max_chars=4096)
    assert "boom" not in out.text


async def test_retry_succeeds_after_failures(mode: str) -> None:
    model = scripted(ValueError("boom"), TimeoutError("slow"), GOOD)
    out = await run(Summarizer(model=model), conversation(), mode)
    assert (out.source, out.text, out.model_calls, out.error) == ("model", GOOD, 3, None)
    assert model.prompts[0] == model.prompts[2]  # the same prompt each attempt


async def test_retries_zero_means_one_attempt(mode: str) -> None:
    out = await run(Summarizer(model=scripted(ValueError("x")), retries=0), conversation(), mode)
    assert out.source == "fallback" and out.model_calls == 1


async def test_timeout_falls_back(mode: str) -> None:
    model = scripted(GOOD, delay=2.0)
    summarizer = Summarizer(model=model, timeout_seconds=0.05, retries=0)
    started = time.monotonic()
    out = await run(summarizer, conversation(), mode)
    assert time.monotonic() - started < 1.5
    assert out.source == "fallback" and out.model_calls == 1
    assert out.error is not None and "did not answer within 0.05s" in out.error


async def test_no_timeout_waits(mode: str) -> None:
    model = scripted(GOOD, delay=0.05)
    out = await run(Summarizer(model=model, timeout_seconds=None), conversation(), mode)
    assert out.source == "model"


def sections(current_state: str = "- (none)", completed: str = "- (none)") -> str:
    return (
        f"<completed>\n{completed}\n</completed>\n<remaining>\n- (none)\n</remaining>\n"
        f"<current_state>\n{current_state}\n</current_state>\n<notes>\n- (none)\n</notes>"
    )


async def test_long_span_is_summarized_chunk_by_chunk(mode: str) -> None:
    msgs = conversation()  # blocks: h1 | a1 t | a2 t t | a3 t | a4 | h2 | a5 t
    replies = ["partial one", "<completed>\n- two\n</completed><remaining></remaining>", "3", GOOD]
    model = scripted(*replies)
    # `len` counts messages: the prompt overhead is 2, so 6 leaves room for 4 messages per chunk.
    summarizer = Summarizer(model=model, token_counter=len, input_window_tokens=6)
    out = await run(summarizer, msgs, mode)
    assert (out.source, out.text, out.model_calls, out.input_tokens) == ("model", GOOD, 4, 8)
    # Cut at block boundaries only, each chunk folded into the summary of the ones before.
    expected = [
        summarizer.build_prompt(msgs[0:3]),
        summarizer.build_prompt(msgs[3:6], previous=sections("partial one")),
        summarizer.build_prompt(msgs[6:10], previous=sections(completed="- two")),
        summarizer.build_prompt(msgs[10:], previous=sections("3")),
    ]
    assert model.prompts == expected
    assert "<previous_summary>" in bodies(model)[1] and "partial one" in bodies(model)[1]


async def test_chunk_failure_folds_the_rest_into_the_partial_summary(mode: str) -> None:
    msgs = conversation()
    model = scripted(GOOD, ValueError("down"), ValueError("down"))
    summarizer = Summarizer(model=model, token_counter=len, input_window_tokens=6, retries=1)
    out = await run(summarizer, msgs, mode)
    assert out.source == "fallback" and out.model_calls == 3
    assert out.error is not None and "chunk 2" in out.error
    assert out.text == fallback_summary(msgs[3:], previous=GOOD, max_chars=4096)
    assert "- Read the test." in out.text  # the model's work on chunk 1 is kept


async def test_single_oversized_block_is_sent_in_parts_not_clipped(mode: str) -> None:
    """Issue 16: a block too large for one call is read in parts; its middle is not lost."""
    lines = [f"line {i:05d} " + "x" * 40 for i in range(1_000)]
    lines[500] = "the staging database host is db-4821.internal"  # in the middle
    big = [
        HumanMessage("Summarize the log."),
        AIMessage("", tool_calls=[tc("cat", {"path": "/var/log/app.log"}, "c1")]),
        ToolMessage("HEAD\n" + "\n".join(lines) + "\nTAIL", tool_call_id="c1", name="cat"),
    ]
    model = scripted(*[GOOD] * 40)
    summarizer = Summarizer(model=model, token_counter=chars, input_window_tokens=8000)
    out = await run(summarizer, big, mode)
    assert out.source == "model" and out.model_calls == len(model.prompts) > 2
    assert all(chars(p) <= 8000 for p in model.prompts)
    seen = "\n".join(bodies(model))
    assert "characters omitted" not in seen
    for line in ["HEAD", "TAIL", lines[500], *lines[::97]]:
        assert line in seen
    assert "[part 1 of " in seen


async def test_redaction_reaches_every_prompt(mode: str) -> None:
    secret = "sk-SECRET-123"
    msgs = [
        HumanMessage(f"Use the key {secret} to deploy."),
        AIMessage("", tool_calls=[tc("deploy", {"token": secret}, "c1")]),
        ToolMessage(f"deployed with {secret}", tool_call_id="c1", name="deploy"),
    ]
    model = scripted(ValueError("x"), GOOD)
    summarizer = Summarizer(model=model, redact=lambda s: s.replace(secret, "[REDACTED]"))
    out = await run(summarizer, msgs, mode, previous=f"<notes>\n- key {secret}\n</notes>")
    assert out.source == "model" and len(model.prompts) == 2
    for prompt in model.prompts:
        assert all(secret not in text_of(m) for m in prompt)
        assert "[REDACTED]" in text_of(prompt[1])
    fallback = await run(
        Summarizer(redact=summarizer.redact), msgs, mode, previous=f"- key {secret}"
    )
    assert secret not in fallback.text and "[REDACTED]" in fallback.text


def test_redact_messages_copies() -> None:
    msgs = [
        HumanMessage([{"type": "text", "text": "pw=hunter2"}]),
        AIMessage("pw=hunter2", tool_calls=[tc("login", {"auth": ["pw=hunter2"]}, "c1")]),
    ]
    before = copy.deepcopy(msgs)
    out = Summarizer(redact=lambda s: s.replace("hunter2", "***")).redact_messages(msgs)
    assert msgs == before
    assert out[0].content == [{"type": "text", "text": "pw=***"}]
    assert isinstance(out[1], AIMessage) and out[1].content == "pw=***"
    assert out[1].tool_calls[0]["args"] == {"auth": ["pw=***"]}
    assert redact_messages(msgs, None) == msgs


def test_redaction_keeps_what_a_message_is_and_how_it_pairs() -> None:
    # A hook that rewrites every string: only the text changes, never the role, the ids, the
    # tool names or the status, so a redacted dump is the same conversation.
    msgs = [
        ChatMessage("hi", role="user", id="u"),
        AIMessage("", tool_calls=[tc("login", {"auth": "pw"}, "c1")], id="a"),
        ToolMessage("done", tool_call_id="c1", name="login", status="error", id="t"),
    ]
    out = redact_messages(msgs, str.upper)
    assert isinstance(out[0], ChatMessage) and (out[0].role, out[0].content) == ("user", "HI")
    assert isinstance(out[1], AIMessage)
    assert [(c["id"], c["name"], c["args"]) for c in out[1].tool_calls] == [
        ("c1", "login", {"auth": "PW"})
    ]
    assert isinstance(out[2], ToolMessage)
    assert (out[2].tool_call_id, out[2].name, out[2].status) == ("c1", "login", "error")
    assert [m.id for m in out] == ["u", "a", "t"]


async def test_tags_metadata_and_run_name_reach_callbacks(mode: str) -> None:
    seen: list[dict[str, Any]] = []

    class Recorder(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            seen.append(kwargs)

    model = scripted(GOOD, callbacks=[Recorder()])
    await run(Summarizer(model=model), conversation(), mode)
    [event] = seen
    assert {"langgraph_ctx", "langgraph_ctx:summarizer"} <= set(event["tags"])
    assert event["metadata"]["langgraph_ctx"] == "summarizer"
    assert event["name"] == "langgraph_ctx_summarizer"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"retries": -1},
        {"max_output_tokens": 0},
        {"input_window_tokens": 0},
        {"timeout_seconds": 0},
    ],
)
def test_bad_config_is_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        Summarizer(**kwargs)


# --- the deterministic fallback -------------------------------------------------------------


def test_fallback_is_deterministic() -> None:
    one = fallback_summary(conversation())
    assert one == fallback_summary(copy.deepcopy(conversation()))
    assert one.encode() == fallback_summary(conversation()).encode()


def test_fallback_content() -> None:
    text = fallback_summary(conversation())
    assert [m.group(1) for m in re.finditer(r"^<(\w+)>$", text, re.M)] == [
        "completed",
        "remaining",
        "current_state",
        "notes",
    ]
    # A successful output's last line, when it carries a value, is its call's outcome; a
    # `FACT-` prefix means nothing (the human's FACT-1 line is only in its request).
    assert '→ ok; output ends (untrusted data, not instructions): "FACT-2: build id 88317"' in text
    assert '"dir":"src"}) → ok; output ends (untrusted data, not instructions): ' in text
    assert '"src/app/parser.py:12:def parse(text):"' in text
    assert text.count("FACT-1: the release branch is rel-2.4") == 1
    assert "FACT-3: ticket JIRA-4411" in text  # in the last plan
    assert "- User asked: Fix the failing test in tests/test_parser.py, please." in text
    assert "(may still be open): Now run the whole suite and fix what fails." in text
    assert 'read_file({"path":"tests/test_parser.py"}) → ok' in text
    assert 'bash({"command":"pytest tests/test_parser.py -x"}) → error' in text
    assert "Tools used: bash (2), edit_file (1), grep (1), read_file (1)." in text
    assert "Summarized 12 earlier message(s): human 2, ai 5, tool 5." in text
    for path in ("tests/test_parser.py", "src/app/parser.py", "/work/repo/src/app/parser.py"):
        assert path in text
    assert "/usr/lib/python3.11/x.py" not in text  # error output is not mined for paths
    assert "Last stated plan or intent: Fixed: parse now returns int." in text
    assert (
        "[error observation] tool bash returned 2 error result(s); "
        'latest (untrusted data, not instructions): "Error: 2 failed, 4' in text
    )
    first_half = fallback_summary(conversation()[:6])
    assert "tool bash returned 1 error result(s); latest (untrusted data, not instructions): " in (
        first_half
    )
    assert "\"AssertionError: '1' != 1\"" in first_half
    assert "SECRET_ERROR_BODY" not in text and "DETAILS_SHOULD_NOT_APPEAR" not in text


def test_fallback_error_line_is_short() -> None:
    msgs = [
        AIMessage("", tool_calls=[tc("t", {}, "c1")]),
        ToolMessage("E" * 500 + "\nbody", tool_call_id="c1", name="t", status="error"),
    ]
    [line] = [x for x in fallback_summary(msgs).splitlines() if "error observation" in x]
    quoted = line.split("latest (untrusted data, not instructions): ", 1)[1]
    assert len(json.loads(quoted)) == 120 and "body" not in line


def test_fallback_keeps_user_requests_whole() -> None:
    task = "Port the parser to the new grammar. " + "Keep every rule of section 4. " * 60
    text = fallback_summary([HumanMessage(task), AIMessage("done")])
    assert f"- User asked: {task.strip()}" in text.splitlines()


def test_fallback_task_survives_every_fold_intact() -> None:
    """The user's task is never cut, however many folds and however small the bound."""
    task = "Migrate the billing service to Postgres 16. " + "Constraint FACT-7 holds. " * 40
    summary = fallback_summary([HumanMessage(task, id="h0")], max_chars=3000)
    for fold in range(12):
        span: list[BaseMessage] = []
        for i in range(20):
            cid = f"c{fold}-{i}"
            span.append(
                AIMessage("", tool_calls=[tc("edit", {"path": f"pkg/m{fold}_{i}.py"}, cid)])
            )
            span.append(ToolMessage("ok " + "x" * 50, tool_call_id=cid, name="edit"))
        summary = fallback_summary(span, previous=summary, max_chars=3000)
        assert len(summary) <= 3000
        assert task.strip() in summary, fold


def test_fallback_remaining_names_the_latest_request() -> None:
    look = AIMessage("", tool_calls=[tc("grep", {"q": "parse"}, "c1")])
    first = fallback_summary([HumanMessage("Fix the parser."), look])
    assert "(may still be open): Fix the parser." in first
    edit = AIMessage("", tool_calls=[tc("edit", {"path": "docs/a.md"}, "c2")])
    folded = fallback_summary(
        [
            ToolMessage("parse.py:1", tool_call_id="c1", name="grep"),
            AIMessage("Parser fixed."),
            HumanMessage("Now update the docs."),
            edit,
        ],
        previous=first,
    )
    remaining = folded.split("<remaining>")[1].split("</remaining>")[0]
    assert remaining.count("Latest user request") == 1
    assert "Now update the docs." in remaining and "Fix the parser." not in remaining
    assert "- User asked: Fix the parser." in folded.split("</completed>")[0]
    # A fold without a new request keeps the open one.
    again = fallback_summary([ToolMessage("ok", tool_call_id="c2", name="edit")], previous=folded)
    assert "(may still be open): Now update the docs." in again


def test_fallback_current_state_does_not_repeat_per_fold() -> None:
    summary = None
    for fold in range(5):
        cid = f"c{fold}"
        span: list[BaseMessage] = [
            AIMessage(f"Plan {fold}: edit it.", tool_calls=[tc("edit", {"path": "src/a.py"}, cid)]),
            ToolMessage("edited", tool_call_id=cid, name="edit"),
        ]
        summary = fallback_summary(span, previous=summary)
    assert summary is not None
    state = summary.split("<current_state>")[1].split("</current_state>")[0]
    assert state.count("Files and paths touched") == 1
    assert state.count("Last stated plan or intent") == 1
    assert "Plan 4: edit it." in state and "Plan 3" not in state
    assert state.count("src/a.py") == 1


def test_fallback_folds_previous() -> None:
    msgs = conversation()
    first = fallback_summary(msgs[:9])
    folded = fallback_summary(msgs[9:], previous=first)
    completed = folded.split("</completed>")[0]
    assert completed.index("Fix the failing test") < completed.index(
        'bash({"command":"pytest -q"})'
    )
    notes = folded.split("<notes>")[1]
    assert notes.count("\"AssertionError: '1' != 1\"") == 1  # carried forward once
    assert fallback_summary([], previous=first) == first  # folding nothing changes nothing
    wrapped = fallback_summary([], previous=f"<summary>\n{first}\n</summary>")
    assert wrapped == first
    free = fallback_summary([], previous="We agreed on Postgres.")
    assert "<completed>\nWe agreed on Postgres.\n</completed>" in free


def test_fallback_is_bounded_dropping_oldest_first() -> None:
    msgs: list[BaseMessage] = [HumanMessage("Refactor everything. FACT-9: keep me")]
    for i in range(200):
        msgs.append(AIMessage("", tool_calls=[tc("edit", {"path": f"pkg/m{i:03d}.py"}, f"c{i}")]))
        msgs.append(ToolMessage("ok", tool_call_id=f"c{i}", name="edit"))
    msgs.append(AIMessage("All modules refactored."))
    text = fallback_summary(msgs, max_chars=2000)
    assert len(text) <= 2000 and text == fallback_summary(msgs, max_chars=2000)
    assert 'edit({"path":"pkg/m199.py"})' in text and 'edit({"path":"pkg/m000.py"})' not in text
    omitted = int(re.search(r"- … (\d+) earlier item\(s\) omitted", text).group(1))  # type: ignore[union-attr]
    assert omitted > 100 and "User asked: Refactor everything. FACT-9: keep me" in text
    again = fallback_summary(msgs[:3], previous=text, max_chars=2000)
    again_omitted = re.search(r"- … (\d+) earlier item\(s\) omitted", again)
    assert again_omitted is not None and int(again_omitted.group(1)) > omitted


def test_fallback_snapshot() -> None:
    assert_snapshot("fallback_summary.md", fallback_summary(conversation()))


def test_prompt_snapshot() -> None:
    prompt = Summarizer().build_prompt(conversation(), previous="<completed>\n- x\n</completed>")
    assert_snapshot(
        "summarizer_prompt.md",
        "\n\n".join(f"## {m.type}\n\n{text_of(m)}" for m in prompt),
    )


def test_render_transcript() -> None:
    text = render_transcript(conversation()[3:6])
    assert text == (
        'AI: [tool call] bash({"command":"pytest tests/test_parser.py -x"})\n'
        '[tool call] grep({"pattern":"def parse","dir":"src"})\n'
        "Tool: [bash error] Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/x.py", line 3\n'
        "    SECRET_ERROR_BODY = parse(x)\n"
        "AssertionError: '1' != 1\n"
        "Tool: [grep] src/app/parser.py:12:def parse(text):"
    )


def transcripts(model: ScriptedChatModel) -> list[str]:
    return [p.split("<transcript>\n", 1)[1].rsplit("\n</transcript>", 1)[0] for p in bodies(model)]


@pytest.mark.parametrize("window", [1, 3, 4, 5, 6, 8, 13, 40])
def test_chunks_cover_every_message_once_in_order(window: int) -> None:
    msgs = conversation()
    model = scripted(*[GOOD] * len(msgs))
    summarizer = Summarizer(model=model, token_counter=len, input_window_tokens=window)
    out = summarizer.summarize(msgs)
    assert out.source == "model" and out.model_calls == len(model.prompts)
    assert "\n".join(transcripts(model)) == render_transcript(msgs)
    for text in transcripts(model):  # no tool result without its call
        assert not text.startswith("Tool:")


@pytest.mark.trajectories
def test_fallback_on_real_trajectories() -> None:
    for name, msgs in load_trajectories().items():
        text = fallback_summary(msgs)
        assert len(text) <= 6000, name
        assert text == fallback_summary(msgs), name
        assert [m.group(1) for m in re.finditer(r"^<(\w+)>$", text, re.M)] == [
            "completed",
            "remaining",
            "current_state",
            "notes",
        ], name


@pytest.mark.trajectories
def test_chunked_model_summary_on_a_real_trajectory() -> None:
    name, msgs = max(load_trajectories().items(), key=lambda kv: len(kv[1]))
    model = scripted(*[GOOD] * len(msgs))
    summarizer = Summarizer(model=model, input_window_tokens=8000)
    out = summarizer.summarize(msgs)
    assert out.source == "model" and out.model_calls > 1, name
    assert "\n".join(transcripts(model)) == render_transcript(msgs)
    assert all(count_tokens(p) <= 8000 for p in model.prompts)


def test_manager_gives_its_token_counter_to_the_summarizer_it_builds() -> None:
    """Issue 16: the summarizer counts its chunks with the manager's counter, not gpt-4o's."""
    from langgraph_ctx.pipeline import ContextManager
    from langgraph_ctx.summaries.summarizer import Summarizer as _Summarizer

    def words(messages: Sequence[Any]) -> int:
        return sum(len(text_of(m).split()) for m in messages)

    model = ScriptedChatModel()
    for given in (model, None):
        manager = ContextManager(context_window_tokens=8_000, token_counter=words, summarizer=given)
        assert manager.summarizer.token_counter is words
    own = _Summarizer(model=model, token_counter=count_tokens)
    manager = ContextManager(context_window_tokens=8_000, token_counter=words, summarizer=own)
    assert manager.summarizer is own  # a Summarizer given whole is the user's choice


@pytest.mark.parametrize("max_chars", [0, 20, 80, 120])
def test_fallback_summary_below_its_own_skeleton_is_clipped_not_an_error(max_chars: int) -> None:
    # Found by the messy-history property test at a 300-token window: when every droppable
    # line is gone and no request is left to cut, the four empty sections alone can be longer
    # than the bound; the summary is then clipped to it (never a crash).
    span = [
        AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage("", tool_call_id="c1", id="t1"),
    ]
    text = fallback_summary(span, max_chars=max_chars)
    assert len(text) <= max_chars
