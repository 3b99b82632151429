"""docs/RELIABILITY.md points at tests: every test it names exists, and every reliability test
is named there, so the page and the suite cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

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
