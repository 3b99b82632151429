"""docs/RELIABILITY.md points at tests: every test it names exists, and every reliability test
is named there, so the page and the suite cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "RELIABILITY.md"


def _defined(path: Path) -> set[str]:
    return set(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), flags=re.M))


def test_every_test_the_reliability_page_names_exists() -> None:
    text = PAGE.read_text()
    named = re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", text)
    assert len(named) > 50, "the page should point at its tests"
    missing = [f"{p}::{n}" for p, n in named if n not in _defined(ROOT / p)]
    assert not missing, f"RELIABILITY.md names tests that do not exist: {missing}"
    everywhere = set().union(*(_defined(p) for p in (ROOT / "tests").rglob("test_*.py")))
    short = set(re.findall(r"`::(test_\w+)", text))
    assert not short - everywhere, f"unknown tests: {sorted(short - everywhere)}"


def test_every_reliability_test_is_on_the_page() -> None:
    text = PAGE.read_text()
    for path in sorted((ROOT / "tests" / "reliability").glob("test_*.py")):
        absent = sorted(n for n in _defined(path) if n not in text)
        assert not absent, f"{path.name}: tests missing from RELIABILITY.md: {absent}"


README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING_RE = re.compile(r"^#{1,6} +(.+?)\s*$")


def _prose(path: Path) -> list[str]:
    """The lines of a page outside its code fences."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lowercased, punctuation dropped, spaces -> -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    for line in _prose(path):
        match = HEADING_RE.match(line)
        if match:
            slug = base = _slug(match.group(1))
            n = 0
            while slug in anchors:  # GitHub numbers repeated headings: x, x-1, x-2
                n += 1
                slug = f"{base}-{n}"
            anchors.add(slug)
    return anchors


def test_the_slugs_are_githubs() -> None:
    assert _slug("1. Invariants under fuzzing") == "1-invariants-under-fuzzing"
    assert _slug("Showing the conversation in a UI") == "showing-the-conversation-in-a-ui"
    assert _slug("The older prebuilt agent: `create_react_agent`") == (
        "the-older-prebuilt-agent-create_react_agent"
    )


def test_every_relative_link_resolves() -> None:
    """Links of the README and the docs pages reach a file, and a heading when they name one."""
    broken, checked = [], 0
    for page in PAGES:
        for target in LINK_RE.findall("\n".join(_prose(page))):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            checked += 1
            name, _, anchor = target.partition("#")
            path = (page.parent / name).resolve() if name else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not path.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and (path.suffix != ".md" or anchor not in _anchors(path)):
                broken.append(f"{where} (no such heading)")
    assert checked > 30, "the pages should link to each other"
    assert not broken, f"links that do not resolve: {broken}"


def test_every_docs_page_is_listed_in_the_readme() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", section))
    pages = {p.relative_to(ROOT).as_posix() for p in PAGES[1:]}
    assert listed == pages


def test_the_readme_reaches_the_configuration_early() -> None:
    lines = README.read_text(encoding="utf-8").split("\n")
    assert len(lines) - 1 <= 300, "README.md: at most 300 lines, the rest goes to docs/"
    assert lines.index("## Configuration") < 250


def test_the_search_example_prints_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/integration.md's `search_history` example: the agent's search finds the line."""
    from tests.test_readme import BLOCK_RE, run_block, section

    monkeypatch.chdir(tmp_path)
    # The search reads entries for at most 1 s (READ_SECONDS), which a machine busy with other
    # work can exceed; this test checks what the example prints, not that bound.
    monkeypatch.setattr("langgraph_ctx.archive.search.READ_SECONDS", 60.0)
    page, text = section("Searching what left the prompt")
    (code,) = BLOCK_RE.findall(text)
    namespace = run_block(code, 0, page)
    printed = capsys.readouterr().out
    shown = text.split("```text\n", 1)[1].split("```", 1)[0]
    # The run's message id and reference are random; everything else is what the page says.
    pattern = re.escape(shown).replace("<id>", "[0-9a-f-]+").replace("<sha256>", "[0-9a-f]{64}")
    assert re.fullmatch(pattern, printed), printed
    # The model called the tool while it was bound (a real model cannot call any other).
    bound = [[t["function"]["name"] for t in tools] for tools in namespace["model"].prompt_tools]
    assert "search_history" not in bound[0] and "search_history" in bound[3], bound
