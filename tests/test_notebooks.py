"""The notebooks run top to bottom offline, and are committed as `notebooks/_build.py` writes them.

Each notebook is executed in a kernel of the interpreter running the tests (ipykernel's
`python3` spec launches `sys.executable`), with a temporary working directory, so a run
writes nothing into the repository. Any cell error fails the test.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = {"quickstart", "strategies", "persistence", "frontier"}


def _build_script() -> dict[str, Any]:
    # run_path compiles without writing a __pycache__ into the repository
    return runpy.run_path(str(NOTEBOOK_DIR / "_build.py"))


def test_every_notebook_is_here() -> None:
    assert {p.stem for p in NOTEBOOKS} == EXPECTED


def test_notebooks_are_built_from_the_script_and_committed_executed() -> None:
    script = _build_script()
    built = script["build"]()
    assert set(built) == set(NOTEBOOKS)
    for path, text in built.items():
        committed = path.read_text(encoding="utf-8")
        assert script["without_outputs"](committed) == text, (
            f"run python notebooks/_build.py: {path}"
        )
        # Committed executed, top to bottom in one run, so a repository browser shows outputs.
        executed = nbformat.reads(committed, as_version=4)
        counts = [c.execution_count for c in executed.cells if c.cell_type == "code"]
        assert counts == list(range(1, len(counts) + 1)), path.name
        if "plt.show()" in text:
            images = [o for c in executed.cells for o in c.get("outputs", [])
                      if "image/png" in o.get("data", {})]  # fmt: skip
            assert images, f"{path.name} draws a plot but none is committed"
        nb = nbformat.reads(text, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert nb.cells[0].cell_type == "markdown", "the first cell states the point"
        assert any("assert " in c.source for c in code), "a cell proves the point"
        assert not any("asyncio.run" in c.source for c in code)
        for cell in code:  # %pip cells stay commented out
            assert all(
                not line.lstrip().startswith(("%pip", "!pip")) for line in cell.source.splitlines()
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    probe = new_code_cell("import sys\nprint(sys.prefix)")
    nb.cells.insert(0, probe)
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    kernel_prefix = "".join(o.get("text", "") for o in probe.outputs).strip()
    assert kernel_prefix == sys.prefix, "the notebook ran in another interpreter"
