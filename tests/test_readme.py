"""The README quickstart runs as written (with a scripted model standing in for the LLM)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_ctx import ContextManager, PromptView
from tests.fakes import ScriptedChatModel, scripted

README = Path(__file__).resolve().parents[1] / "README.md"


def quickstart_code() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return blocks[0]


def test_readme_quickstart_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "README.md").write_text("# A project\n" + "Some text.\n" * 200, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    model = scripted(
        AIMessage(
            "",
            tool_calls=[{"name": "read_file", "args": {"path": "README.md"}, "id": "c1"}],
        ),
        AIMessage("It is a project with some text."),
        profile={"max_input_tokens": 128_000},
    )
    seen: list[str] = []

    def fake_init_chat_model(name: str, **kwargs: Any) -> ScriptedChatModel:
        seen.append(name)
        return model

    monkeypatch.setattr("langchain.chat_models.init_chat_model", fake_init_chat_model)
    namespace: dict[str, Any] = {}
    exec(compile(quickstart_code(), str(README), "exec"), namespace)
    assert seen == ["openai:gpt-4o-mini"]
    printed = capsys.readouterr().out.strip()
    assert int(printed) > 0
    result = namespace["result"]
    assert result["messages"][-1].content == "It is a project with some text."
    report = result["messages"][-1].response_metadata["context_cost"]
    assert report["limit"] == 128_000 - 4_000
    assert report["ok"] is True


def test_readme_user_strategy_runs_as_written() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Strategies", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    memory = namespace["memory"]
    first = memory.manager.strategies[0]
    assert type(first).__name__ == "KeepLastResults" and first.tool == "grep"
    # On a build, the newest two grep results are protected before any strategy edits.
    history: list[Any] = [HumanMessage("find it", id="h")]
    for i in range(4):
        call = {"name": "grep", "args": {"q": str(i)}, "id": f"c{i}"}
        history += [
            AIMessage("", tool_calls=[call], id=f"a{i}"),
            ToolMessage("x" * 50, tool_call_id=f"c{i}", name="grep", id=f"t{i}"),
        ]
    seen: list[set[str]] = []

    class Spy:
        def apply(self, view: PromptView) -> None:
            seen.append(set(view.protected_ids))

    ContextManager(context_window_tokens=32_000, strategies=[first, Spy()]).build(history)
    assert seen == [{"t2", "t3"}]


def test_readme_middleware_order_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using it with other middleware", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    models = {
        "openai:gpt-4o": scripted(AIMessage("Hello."), profile={"max_input_tokens": 128_000}),
        "openai:gpt-4o-mini": scripted(profile={"max_input_tokens": 16_000}),
    }
    monkeypatch.setattr(
        "langchain.chat_models.init_chat_model", lambda name, **kwargs: models[name]
    )
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    memory, agent = namespace["memory"], namespace["agent"]
    assert memory.window_for(models["openai:gpt-4o-mini"]) == 16_000
    result = agent.invoke({"messages": [HumanMessage("hi")]})
    assert result["messages"][-1].content == "Hello."
    # Last in the list: the request it built carried TodoListMiddleware's system prompt.
    [prompt] = models["openai:gpt-4o"].prompts
    assert "write_todos" in str(prompt[0].content)
