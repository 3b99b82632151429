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


def test_the_wheel_holds_the_package_its_data_and_the_command(tmp_path: Path) -> None:
    """The wheel a clone builds (README: `pip wheel --no-deps . -w dist`) holds every module,
    the page template `view` reads and `py.typed`, the `langgraph-ctx` command and the `cli`
    extra; nothing of the tests or benchmarks. Built offline from a copy of the tracked files
    (`make wheel_check` builds it the same way, then installs it and runs the demo)."""
    import subprocess
    import sys
    import zipfile

    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", "pyproject.toml", "README.md", "LICENSE", "langgraph_ctx"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    source = tmp_path / "src"
    for name in filter(None, tracked):
        if (ROOT / name).is_file():  # a file deleted and not yet committed is not built
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"]
    subprocess.run(
        [*build, "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("langgraph_ctx-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {n for n in filter(None, tracked) if n.endswith(".py") and (ROOT / n).is_file()}
    assert modules <= names, sorted(modules - names)
    assert {"langgraph_ctx/py.typed", "langgraph_ctx/cli/view_page.html"} <= names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "notebooks/"))]
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as opened:
        scripts = opened.read(f"{info}/entry_points.txt").decode()
        metadata = opened.read(f"{info}/METADATA").decode()
    assert "langgraph-ctx = langgraph_ctx.cli:main" in scripts
    assert "Provides-Extra: cli" in metadata
    assert re.search(r"Requires-Dist: rich>=13; extra == \"cli\"", metadata), metadata


def test_ci_installs_the_wheel_in_a_clean_venv_and_runs_the_demo() -> None:
    """`make wheel_check` (run by .ci/run after the bounds) installs the wheel with `[cli]` in
    a venv of a temporary folder and runs `langgraph-ctx demo` there, from the wheel."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nwheel_check:", 1)[1].split("\n\n", 1)[0]
    for step in ("mktemp -d", "-m venv", "pip wheel", '"$$wheel[cli]"', 'langgraph-ctx" demo'):
        assert step in recipe, step
    assert "site-packages" in recipe  # the demo ran from the wheel, not from the clone
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.index("make test_bounds") < ci.index("make wheel_check") < ci.index("git status")


def test_the_readme_installs_from_a_clone_or_a_built_wheel() -> None:
    """No install line the README gives needs a package index the package is not on."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    bash = [b.split("```", 1)[0] for b in text.split("```bash\n")[1:]]
    block = next(b for b in bash if "pip install" in b)  # the install block, wherever it is
    installs = [line.split("#")[0].strip() for line in block.splitlines() if "pip install" in line]
    assert 'pip install -e ".[cli]"' in installs
    assert 'pip install "$(ls dist/langgraph_ctx-*.whl)[cli]"' in installs
    assert "pip wheel --no-deps . -w dist" in block
    assert not [i for i in installs if re.search(r"pip install \"?langgraph-ctx\b", i)], installs
    assert "not on a package index yet" in text
