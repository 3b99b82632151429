"""The 45 recorded agent runs of `data/trajectories/`: the one loader tests and benchmarks use.

Each run is a gzip-compressed `messages_to_dict` list (`<name>.json.gz`); `data/trajectories/
README.md` says where each comes from and `LICENSE` holds its source's license. The runs are
part of the repository, so a plain clone has them: a missing or empty folder is an error, not
a reason to skip.

`--runs` picks which of them a benchmark replays (`use_runs`): `all` (the default), or `shared`,
the 19 the project's figures were measured on before issue 53 vendored 26 more (the
manifest's `split`: `shared` for those 19, `train` for the 26), so a figure measured then is
reproduced by its command with `--runs shared`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from langchain_core.messages import BaseMessage, messages_from_dict

__all__ = [
    "RUN_SETS",
    "SUFFIX",
    "TRAJECTORY_DIR",
    "load_trajectories",
    "name_of",
    "read_trajectory",
    "trajectory_files",
    "use_runs",
]

TRAJECTORY_DIR = Path(__file__).resolve().parents[1] / "data" / "trajectories"
"""`data/trajectories` of the repository."""
SUFFIX = ".json.gz"
"""How a run's file name ends; the name before it is the run's name."""

RUN_SETS = ("all", "shared")
"""The sets of runs `--runs` can name: every run, or the manifest's `shared` split."""

_chosen = ["all"]


def use_runs(runs: str) -> None:
    """Replay only the runs of set `runs` (one of `RUN_SETS`) from now on, in this process."""
    if runs not in RUN_SETS:
        msg = f"--runs must be one of {', '.join(RUN_SETS)}, got {runs!r}"
        raise ValueError(msg)
    _chosen[0] = runs


def _in_split(split: str) -> set[str]:
    manifest = json.loads((TRAJECTORY_DIR / "manifest.json").read_text(encoding="utf-8"))
    return {entry["file"].removesuffix(".json") for entry in manifest if entry["split"] == split}


def trajectory_files() -> list[Path]:
    """Every run's file of the chosen set (`use_runs`), sorted by name.

    Raises:
        FileNotFoundError: The folder holds no run (a broken checkout).
    """
    files = sorted(TRAJECTORY_DIR.glob(f"*{SUFFIX}"))
    if files and _chosen[0] == "shared":
        shared = _in_split("shared")
        files = [path for path in files if name_of(path) in shared]
    if not files:
        msg = f"no recorded runs (*{SUFFIX}) in {TRAJECTORY_DIR}: the checkout is incomplete"
        raise FileNotFoundError(msg)
    return files


def name_of(path: Path) -> str:
    """A run's name: its file name without `.json.gz`."""
    return path.name.removesuffix(SUFFIX)


def read_trajectory(path: Path) -> list[BaseMessage]:
    """One run's messages, parsed afresh from its file."""
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return messages_from_dict(json.load(file))


def load_trajectories() -> dict[str, list[BaseMessage]]:
    """Every run by name (sorted), parsed afresh: the caller may change the messages."""
    return {name_of(path): read_trajectory(path) for path in trajectory_files()}
