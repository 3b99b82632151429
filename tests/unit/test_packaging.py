"""The declared bounds and the versions `make test_bounds` installs are one list."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def declared() -> dict[str, Requirement]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[\n(.*?)^\]", text, flags=re.S | re.M)
    assert block, "pyproject.toml has no dependencies list"
    requirements = [Requirement(r) for r in re.findall(r'^\s*"([^"]+)"', block[1], flags=re.M)]
    return {canonicalize_name(r.name): r for r in requirements}


def lowest() -> dict[str, Version]:
    lines = (ROOT / "tests" / "lowest-versions.txt").read_text(encoding="utf-8").splitlines()
    pins = [line.split("==") for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(name): Version(version) for name, version in pins}


def test_lowest_versions_are_the_declared_minimums_under_an_upper_bound() -> None:
    requirements, pins = declared(), lowest()
    assert set(pins) == set(requirements)
    for name, requirement in requirements.items():
        specs = {spec.operator: Version(spec.version) for spec in requirement.specifier}
        assert specs.get(">=") == pins[name], (name, str(requirement), pins[name])
        assert "<" in specs, f"{name} has no upper bound"
