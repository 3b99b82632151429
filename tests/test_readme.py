"""The README quickstart runs as written (with a scripted model standing in for the LLM)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

README = Path(__file__).resolve().parents[1] / "README.md"


class ToolCallingFake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self


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
    replies = iter(
        [
            AIMessage(
                "",
                tool_calls=[{"name": "read_file", "args": {"path": "README.md"}, "id": "c1"}],
            ),
            AIMessage("It is a project with some text."),
        ]
    )
    model = ToolCallingFake(messages=replies, profile={"max_input_tokens": 128_000})
    seen: list[str] = []

    def fake_init_chat_model(name: str, **kwargs: Any) -> ToolCallingFake:
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
