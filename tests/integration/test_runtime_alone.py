"""The runtime installs and runs an agent alone: none of the tools a person runs (issue 54).

The `langgraph-ctx` wheel is built from the tracked files of the runtime, installed without its
dependencies in a new venv, and given them through a `.pth` file naming this venv's
site-packages as a plain path entry: the packages there are importable, but the editable
installs' own `.pth` files there are not run, so neither this clone's `langgraph_ctx` nor the
tools (`langgraph_ctx_tools`) are. Offline: no index is asked. `make wheel_check` runs the same
agent in a clean venv with the dependencies from the index.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "tests" / "runtime_alone_agent.py"

pytestmark = pytest.mark.slow


def _runtime_wheel(tmp_path: Path) -> Path:
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", "pyproject.toml", "README.md", "LICENSE", "langgraph_ctx"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    source = tmp_path / "src"
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"]
    subprocess.run(
        [*build, "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("langgraph_ctx-*.whl")
    return wheel


def test_the_runtime_wheel_alone_runs_an_agent_through_the_middleware(tmp_path: Path) -> None:
    wheel = _runtime_wheel(tmp_path)
    # Nothing of this clone on the path: only the venv, its wheel and the dependencies.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, env=env,
    ).stdout.strip()  # fmt: skip
    # A plain path entry: the dependencies, without running the .pth files beside them.
    (Path(own) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # --force-reinstall: a `langgraph-ctx` of the same version seen through the path entry (this
    # venv's editable install) must not stand in for the wheel.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", "--force-reinstall", str(wheel)],
        check=True, capture_output=True, timeout=120, env=env,
    )  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    (run / "agent.py").write_bytes(AGENT.read_bytes())
    done = subprocess.run(
        [str(python), "agent.py"], cwd=run, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr + done.stdout
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"runtime alone: {2 * 3} model calls through ContextMiddleware, from ")
    assert first.split(" from ", 1)[1].startswith(str(env_dir)), first
