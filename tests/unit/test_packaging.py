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


# --- the release a user installs ------------------------------------------------------------


def _build(tmp_path: Path, folder: str, paths: tuple[str, ...]) -> tuple[Path, set[str]]:
    """The wheel of the distribution at `folder` ("." or "tools"), built offline from a copy of
    the tracked `paths` under it, and the tracked modules it must hold."""
    import subprocess
    import sys

    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", *(f"{folder}/{p}" for p in paths)],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    source = tmp_path / "src"
    for name in filter(None, tracked):
        if (ROOT / name).is_file():  # a file deleted and not yet committed is not built
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"]
    subprocess.run(
        [*build, "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source / folder)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    name = "langgraph_ctx" if folder == "." else "langgraph_ctx_tools"
    (wheel,) = (tmp_path / "dist").glob(f"{name}-*.whl")
    top = "" if folder == "." else "tools/"
    modules = {
        n.removeprefix(top)
        for n in filter(None, tracked)
        if n.endswith(".py") and (ROOT / n).is_file()
    }
    return wheel, modules


def _metadata(wheel: Path) -> tuple[set[str], str, str]:
    """The wheel's file names, its `entry_points.txt` ("" without one) and its METADATA."""
    import zipfile

    with zipfile.ZipFile(wheel) as opened:
        names = set(opened.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        scripts = f"{info}/entry_points.txt"
        entry = opened.read(scripts).decode() if scripts in names else ""
        return names, entry, opened.read(f"{info}/METADATA").decode()


def test_the_runtime_wheel_holds_the_runtime_alone(tmp_path: Path) -> None:
    """The wheel a deployment installs (README: `pip wheel --no-deps . -w dist`) holds every
    module of `langgraph_ctx` and `py.typed`, and none of the tools: no `langgraph_ctx_tools`,
    no console script, no extra that brings the command line's dependencies; nothing of the
    tests or benchmarks. Built offline from a copy of the tracked files (`make wheel_check`
    builds it the same way, then runs an agent on it alone in a clean venv)."""
    wheel, modules = _build(
        tmp_path, ".", ("pyproject.toml", "README.md", "LICENSE", "langgraph_ctx")
    )
    names, entry_points, metadata = _metadata(wheel)
    assert modules <= names, sorted(modules - names)
    assert "langgraph_ctx/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "notebooks/", "tools/"))]
    assert not [n for n in names if n.startswith("langgraph_ctx_tools")]
    assert entry_points == ""
    assert "Provides-Extra: cli" not in metadata
    # matplotlib comes with the `test` extra only (the notebooks draw); nothing brings rich.
    assert not re.search(r"^Requires-Dist: (rich|matplotlib)\b[^;]*$", metadata, re.M), metadata
    assert not re.search(r"^Requires-Dist: rich\b", metadata, re.M), metadata


def test_the_tools_wheel_holds_the_command_line_and_its_page(tmp_path: Path) -> None:
    """The tools' wheel (`pip wheel --no-deps tools -w dist`) holds every module of
    `langgraph_ctx_tools`, the page template `view` reads and `py.typed`, the `langgraph-ctx`
    command, and depends on the runtime of the same release, rich and matplotlib."""
    wheel, modules = _build(
        tmp_path, "tools", ("pyproject.toml", "README.md", "langgraph_ctx_tools")
    )
    names, entry_points, metadata = _metadata(wheel)
    assert modules <= names, sorted(modules - names)
    assert {"langgraph_ctx_tools/py.typed", "langgraph_ctx_tools/cli/page.html"} <= names
    assert not [n for n in names if n.startswith("langgraph_ctx/")]
    assert "langgraph-ctx = langgraph_ctx_tools.cli:main" in entry_points
    version = re.search(r"^Version: (.+)$", metadata, flags=re.M)
    assert version and version[1] == _version(ROOT / "pyproject.toml")
    requires = set(re.findall(r"^Requires-Dist: (.+)$", metadata, flags=re.M))
    assert {f"langgraph-ctx=={version[1]}", "rich>=13", "matplotlib>=3.8"} <= requires, requires


def _version(pyproject: Path) -> str:
    found = re.search(r'^version = "(.+)"$', pyproject.read_text(encoding="utf-8"), flags=re.M)
    assert found, pyproject
    return found[1]


def test_the_two_distributions_are_one_release() -> None:
    """The tools carry the runtime's version and require exactly that runtime: the command line
    uses the runtime's internal modules, which change with it."""
    version = _version(ROOT / "pyproject.toml")
    tools = ROOT / "tools" / "pyproject.toml"
    assert _version(tools) == version
    assert f'"langgraph-ctx=={version}"' in tools.read_text(encoding="utf-8")


def test_ci_installs_the_wheel_in_a_clean_venv_and_runs_the_demo() -> None:
    """`make wheel_check` (run by .ci/run after the bounds) builds both wheels, installs the
    runtime's alone in a venv of a temporary folder and runs the agent of
    tests/runtime_alone_agent.py there, then installs the tools' wheel and runs `langgraph-ctx
    demo` there, from the wheels."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nwheel_check:", 1)[1].split("\n\n", 1)[0]
    steps = (
        "mktemp -d", "-m venv", "pip wheel", '"$$tmp/src/tools"', 'pip install --quiet "$$wheel"',
        "runtime_alone_agent.py", 'pip install --quiet "$$tools"', 'langgraph-ctx" demo',
    )  # fmt: skip
    for step in steps:
        assert step in recipe, step
    order = [recipe.index(s) for s in steps[4:]]
    assert order == sorted(order)  # the agent runs before the tools are installed
    assert "site-packages" in recipe  # the demo ran from the wheel, not from the clone
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.index("make test_bounds") < ci.index("make wheel_check") < ci.index("git status")


def test_the_readme_installs_from_a_clone_or_a_built_wheel() -> None:
    """No install line the README gives needs a package index the package is not on."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    bash = [b.split("```", 1)[0] for b in text.split("```bash\n")[1:]]
    block = next(b for b in bash if "pip install" in b)  # the install block, wherever it is
    installs = [line.split("#")[0].strip() for line in block.splitlines() if "pip install" in line]
    assert "pip install -e ." in installs
    assert "pip install -e . -e tools" in installs
    assert 'pip install "$(ls dist/langgraph_ctx-*.whl)"' in installs
    assert "pip install dist/*.whl" in installs
    assert "pip wheel --no-deps . -w dist" in block
    assert "pip wheel --no-deps . tools -w dist" in block
    assert not [i for i in installs if "[cli" in i or "[plot" in i], installs
    assert not [i for i in installs if re.search(r"pip install \"?langgraph-ctx\b", i)], installs
    assert "not on a package index yet" in text
