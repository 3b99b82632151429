"""`langgraph-ctx frontier` on the repository's own runs (issue 51, items 1 and 3).

Each test failed on the code before the fix: a folder of `.json.gz` runs beside a
`manifest.json` exited 2 ("holds no recorded thread"); the defaults were "recommended" over a
setting at 0.997x their cost showing the same recall, and a setting with +1 point at 1.002x
printed as "1.00x" beside them, so the table could not say why it lost; the plot's key was
text under the axes that the points could cover, and its labels overlapped.
"""

from __future__ import annotations

import argparse
import gzip
import json
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import messages_to_dict

from benchmarks.workload import generate_workload
from langgraph_ctx_tools.cli import main
from langgraph_ctx_tools.cli.frontier_plot import plot_frontier
from langgraph_ctx_tools.cli.frontier_run import _cells, _recommendation, rows_of
from langgraph_ctx_tools.replay.settings import Setting
from langgraph_ctx_tools.replay.tally import Tally, Terms, recommend, runner_up


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


# --- the folder of recorded runs -------------------------------------------------------------


def test_a_folder_of_gzipped_runs_beside_a_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `data/trajectories` ships: `.json.gz` runs, a `manifest.json`, a README, a LICENSE."""
    runs = tmp_path / "trajectories"
    runs.mkdir()
    for seed in (1, 2):
        text = json.dumps(messages_to_dict(generate_workload(steps=6, seed=seed).messages))
        (runs / f"run{seed}.json.gz").write_bytes(gzip.compress(text.encode()))
    (runs / "manifest.json").write_text(json.dumps([{"file": "run1.json", "split": "shared"}]))
    (runs / "README.md").write_text("# runs\n")
    (runs / "LICENSE").write_text("MIT\n")
    argv = ["frontier", str(runs), "--window", "6000", "--no-neighbours", "--no-alternatives"]
    assert main([*argv, "--json", "rows.json"]) == 0
    captured = capsys.readouterr()
    assert "2 thread(s)" in captured.out
    notes = [line for line in captured.err.splitlines() if "left out" in line]
    assert len(notes) == 1 and "manifest.json: not a recorded thread" in notes[0], captured.err
    (row,) = json.loads(Path("rows.json").read_text())
    assert row["calls"] > 0


def test_a_folder_with_no_run_says_what_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("nothing here\n")
    assert main(["frontier", str(folder), "--window", "6000"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no .json or .json.gz file" in err, err


# --- the recommendation: a change only when it buys something ---------------------------------


def _row(label: str, cost: int, hits: int, **changes: Any) -> Tally:
    setting = Setting(label) if label == "defaults" else Setting(label, strategies=changes)
    # Nothing cache-reusable: the effective cost is the prompt tokens.
    return Tally(setting, calls=10, tokens=cost, recall_hits=hits, recall_total=1000)


def _line(tallies: list[Tally], max_cost: float = 1.0) -> tuple[Tally | None, str]:
    terms = Terms(8000, 0, len)
    best = recommend(tallies, terms.cache_price, max_cost)
    args = argparse.Namespace(max_cost=max_cost, model=None)
    return best, _recommendation(best, tallies, terms, args)


def test_a_change_that_buys_nothing_keeps_the_defaults() -> None:
    """The issue's case: same recall at 0.997x, and +1 point at 1.002x under a 1.00x cap."""
    defaults = _row("defaults", 1_000_000, 800)
    same_for_less = _row("read_chars 300", 997_000, 800, SlidingWindow={"read_chars": 300})
    point_for_more = _row("quote more", 1_002_000, 810, SlidingWindow={"quote_share": 0.3})
    tallies = [defaults, same_for_less, point_for_more]
    best, text = _line(tallies)
    assert best is defaults
    assert runner_up(tallies, defaults, 0.1, 1.0) is point_for_more
    runner, last = text.splitlines()
    assert runner == (
        "runner-up: quote more: +1.00 points of recall at 1.002x the defaults' cost; not "
        "recommended: over --max-cost 1x (raise it to pick it)"
    )
    assert last.startswith("recommended: keep the defaults: cost 1.00M, next-step recall 80.0%")
    assert "apply it: ContextMemory(context_window_tokens=8000)" in last
    # The table separates the rows the line names.
    rows = rows_of(tallies, best, Terms(8000, 0, len), None)
    assert [_cells(r)[2] for r in rows] == ["1.000x", "0.997x", "1.002x"]
    # With the cap raised, the point is bought.
    best, text = _line(tallies, max_cost=1.01)
    assert best is point_for_more and text.startswith("recommended: quote more: cost 1.00M")


def test_the_least_gains_are_what_is_recommended() -> None:
    defaults = _row("defaults", 1_000_000, 800)
    half_point = _row("half a point", 990_000, 805, SlidingWindow={"quote_share": 0.2})
    best, text = _line([defaults, half_point])
    assert best is defaults and "not recommended: under the least gain" in text
    point = _row("a point", 1_000_000, 810, SlidingWindow={"quote_share": 0.3})
    assert _line([defaults, half_point, point])[0] is point
    cheaper = _row("2% cheaper", 980_000, 800, SlidingWindow={"read_chars": None})
    best, text = _line([defaults, half_point, cheaper])
    assert best is cheaper and "-0.00" not in text  # no recall lost: +0.00 points
    worse = _row("cheaper, less", 500_000, 799, SlidingWindow={"summarize": False})
    best, text = _line([defaults, worse])
    assert best is defaults
    assert text.startswith("runner-up: none: every other setting shows less recall")
    best, text = _line([defaults])  # --no-neighbours: nothing else to compare
    assert best is defaults and "runner-up" not in text
    assert "no other setting of ours was replayed (drop --no-neighbours" in text
    # Defaults that overflow qualify for nothing: the best recall that fits is picked.
    overflowing = _row("defaults", 1_000_000, 900)
    overflowing.over_budget = 3
    assert _line([overflowing, worse])[0] is worse


# --- the plot ---------------------------------------------------------------------------------


def _plot_row(name: str, cost: float, recall: float, **flags: bool) -> dict[str, Any]:
    return {
        "setting": name,
        "cost": cost,
        "recall": recall,
        "over_budget": 0,
        "invalid": 0,
        "alternative": flags.get("alternative", False),
        "defaults": flags.get("defaults", False),
        "recommended": flags.get("recommended", False),
    }


def test_the_plot_names_each_point_beside_it_without_overlap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fourteen settings crowded near the defaults, two at one place: no label covers another,
    the defaults are drawn over every other point and the key is a legend beside the axes."""
    import matplotlib.pyplot as plt

    figures: list[Any] = []
    close = plt.close
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    rows = [_plot_row("defaults", 1250e3, 0.834, defaults=True, recommended=True)]
    rows += [
        _plot_row(f"setting {n} with a long name", 1250e3 + 9e3 * (n % 5), 0.80 + 0.004 * n)
        for n in range(14)
    ]
    rows += [_plot_row("same place as defaults", 1250e3, 0.834)]
    rows += [_plot_row("alt: trim_messages", 4620e3, 0.705, alternative=True)]
    plot_frontier(rows, tmp_path / "plot.png", "a title")
    (figure,) = figures
    renderer = figure.canvas.get_renderer()
    main, zoom = figure.axes  # the settings within 10% of the defaults' cost, zoomed
    for ax in (main, zoom):
        texts = [t for t in ax.texts if t.get_text()]
        boxes = [t.get_window_extent(renderer) for t in texts]
        for (a, ta), (b, tb) in combinations(zip(boxes, texts, strict=True), 2):
            assert not a.overlaps(b), (ta.get_text(), tb.get_text())
        dots = [c for c in ax.collections if c.get_offsets().shape[0]]
        star = max(dots, key=lambda c: c.get_zorder())
        assert tuple(star.get_offsets()[0]) == pytest.approx((1250.0, 83.4))
        assert any(t.get_text().startswith("defaults (recommended)") for t in texts)
    named = " ".join(t.get_text() for t in zoom.texts)
    assert "setting 13 with a long name" in named  # the Pareto front: named in the zoom
    assert "alt: trim_messages" in " ".join(t.get_text() for t in main.texts)
    legend = zoom.get_legend()
    frame = zoom.get_window_extent(renderer)
    assert legend is not None and legend.get_window_extent(renderer).x0 >= frame.x1
    close(figure)
    # Settings all at the defaults' place: one panel (a zoom would show no more), each named.
    same = [_plot_row(f"same {n}", 1250e3, 0.834) for n in range(5)]
    plot_frontier([rows[0], *same, rows[-1]], tmp_path / "one.png", "a title")
    (figure,) = figures[1:]
    (ax,) = figure.axes
    assert any(t.get_text() == "defaults (recommended)\n1, 2, 3, 4, 5" for t in ax.texts)
    close(figure)
