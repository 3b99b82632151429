"""The frontier plot of `langgraph-ctx frontier --plot`: effective cost against next-step recall.

One point per setting and alternative, the Pareto front drawn through them, the defaults as a
star drawn on top; a second panel zooms on the settings within `ZOOM_COST` of the defaults'
cost. Labels are placed beside their points by measuring them, clear of the other labels and
markers (`_place_labels`), with a thin line when one has to move away from its point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph_ctx_tools.replay.tally import pareto_front

__all__ = ["ZOOM_COST", "plot_frontier"]


ZOOM_COST = 0.1
"""The plot's second panel shows the settings within this share of the defaults' cost: the
ones a recommendation at a `--max-cost` near 1 chooses among, too close to tell apart at the
scale of the alternatives."""


def plot_frontier(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Cost against recall, and a panel zoomed on the settings near the defaults' cost.

    The Pareto front, the defaults, the pick and the alternatives carry their names beside
    them; the other settings a number, listed beside the plot (points at one place share a
    label). The defaults are drawn over every other point; the key is a legend outside the
    axes, so no point hides it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    shown = [r for r in rows if r["recall"] is not None]
    valid = [r for r in shown if r["over_budget"] == 0 and r["invalid"] == 0]
    front = [valid[i] for i in pareto_front([_at(r) for r in valid])]
    named = [r for r in shown if r in front or r["defaults"] or r["recommended"]]
    named += [r for r in shown if r["alternative"] and r not in named]
    numbered = [r for r in shown if r not in named]
    base = next((r for r in shown if r["defaults"]), None)
    near = [
        r
        for r in shown
        if base is not None and abs(r["cost"] / base["cost"] - 1) <= ZOOM_COST and r is not base
    ]
    places = {_at(r) for r in near}
    panels = 2 if base is not None and len(places - {_at(base)}) >= 2 else 1  # else: no more
    fig, axes = plt.subplots(1, panels, figsize=(8 + 6 * (panels - 1), 6.5), squeeze=False)
    main = axes[0][0]
    outside = [r for r in shown if panels == 1 or r not in near]  # a zoom names those inside
    placed = [(main, _draw(main, shown, front, named, numbered, labelled=outside))]
    if base is not None and panels == 2:
        zoom = axes[0][1]
        inside = [base, *near]
        placed.append((zoom, _draw(zoom, inside, front, named, numbered, labelled=inside)))
        zoom.set_title(f"within {ZOOM_COST:.0%} of the defaults' cost", fontsize=8)
        (x0, x1), (y0, y1) = zoom.get_xlim(), zoom.get_ylim()
        main.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ls="--", lw=0.8,
                                 color="gray", zorder=1))  # fmt: skip
        main.annotate("zoomed on the right", (x1, y1), xytext=(4, 4), textcoords="offset points",
                      fontsize=7, color="gray")  # fmt: skip
    key = [
        Line2D([], [], marker="*", color="tab:red", ms=14, ls="", label="the defaults"),
        Line2D([], [], marker="o", color="tab:blue", ms=7, ls="", label="our settings"),
        Line2D([], [], marker="D", color="tab:orange", ms=6, ls="", label="the alternatives"),
        Line2D([], [], marker="x", color="tab:gray", ms=7, ls="",
               label="a prompt over the budget or invalid"),
        Line2D([], [], marker="o", color="tab:green", mfc="none", ms=14, ls="", lw=2,
               label="recommended"),
        Line2D([], [], color="tab:green", alpha=0.4, label="the Pareto front"),
    ]  # fmt: skip
    last = axes[0][-1]
    conditions = sorted({str(r.get("summaries")) for r in rows if r.get("summaries")})
    last.legend(handles=key, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8,
                frameon=False, borderaxespad=0, title_fontsize=8,
                title=f"summaries: {', '.join(conditions)}" if conditions else None)  # fmt: skip
    if numbered:  # the numbered points, under the key
        lines = [f"{n}: {r['setting']}" for n, r in enumerate(numbered, 1)]
        last.text(1.03, 0.62, "\n".join(lines), transform=last.transAxes, fontsize=7, va="top")
    fig.suptitle(title, fontsize=8, wrap=True)
    fig.tight_layout()
    for ax, labels in placed:  # after the layout: placed where they will be drawn
        _place_labels(ax, labels)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _at(row: dict[str, Any]) -> tuple[float, float]:
    """Where a row is drawn: cost in thousand tokens, recall in percent."""
    return row["cost"] / 1e3, 100 * row["recall"]


def _draw(
    ax: Any,
    rows: Sequence[dict[str, Any]],
    front: Sequence[dict[str, Any]],
    named: Sequence[dict[str, Any]],
    numbered: Sequence[dict[str, Any]],
    labelled: Sequence[dict[str, Any]],
) -> list[_Label]:
    """Draw `rows` on `ax` (the front among them as a line); the labels of `labelled`'s."""
    line = [_at(r) for r in front if r in rows]
    if line:  # the settings nothing beats on both cost and recall
        ax.step(*zip(*line, strict=True), where="post", color="tab:green", alpha=0.4, zorder=2)
    labels: dict[tuple[float, float], _Label] = {}  # one label per place
    for row in sorted(rows, key=lambda r: r["defaults"]):  # the defaults drawn last: on top
        x, y = _at(row)
        ok = row["over_budget"] == 0 and row["invalid"] == 0
        marker, color, size, z = ("o", "tab:blue", 45, 3) if ok else ("x", "tab:gray", 45, 3)
        if row["alternative"]:  # what a team would pick instead: marked apart
            marker, color, z = ("D" if ok else "x"), "tab:orange", 4
        if row["defaults"]:
            marker, color, size, z = "*", "tab:red", 260, 6
        edge = {} if marker == "x" else {"edgecolors": "white", "linewidths": 0.6}  # apart
        ax.scatter(x, y, marker=marker, color=color, s=size, zorder=z, **edge)
        if row["recommended"]:
            ax.scatter(x, y, marker="o", s=420, facecolors="none", edgecolors="tab:green",
                       lw=1.5, zorder=5)  # fmt: skip
        if row not in labelled:
            continue
        label = labels.setdefault((x, y), _Label(x, y))
        if row in named:
            label.names.append(row["setting"] + (" (recommended)" if row["recommended"] else ""))
            label.rank = min(label.rank, 0 if row["defaults"] or row["recommended"] else 1)
            alone = row["alternative"] and label.color != "black"  # only alternatives here
            label.color = "tab:orange" if alone else "black"
        else:
            label.numbers.append(str(numbered.index(row) + 1))
    ax.set_xlabel("effective cost (thousand tokens), lower is better")
    ax.set_ylabel("next-step recall (%), higher is better")
    ax.grid(alpha=0.3)
    ax.margins(x=0.15, y=0.1)
    return list(labels.values())


@dataclass
class _Label:
    """What is written beside one place of the plot: names, numbers, or both."""

    x: float
    y: float
    names: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    rank: int = 2
    """Placed first, nearest its point: 0 the defaults and the pick, 1 named, 2 numbered."""
    color: str = "dimgray"

    @property
    def text(self) -> str:
        rows = [", ".join(self.numbers[i : i + 8]) for i in range(0, len(self.numbers), 8)]
        return "\n".join([*self.names, *rows])  # numbers 8 to a line: the label stays narrow


_OFFSETS = [(dx * r, dy * r) for r in (1, 2, 3, 4, 6, 8)
            for dx, dy in ((1, 0.3), (-1, 0.3), (1, -1), (-1, -1), (0, 1.2), (0, -1.8),
                           (1, 1), (-1, 1))]  # fmt: skip
"""Where a label is tried, in points from its dot times 7: beside it first, then further."""


def _place_labels(ax: Any, labels: Sequence[_Label]) -> None:
    """Write each label beside its point, where it covers no other label and no point.

    The first spot of `_OFFSETS` that covers nothing and stays in the axes; a label moved far
    from its point gets a thin line to it. Greedy, in display coordinates measured by the
    renderer: the defaults and the pick first, then the named points, then the numbered ones,
    each from the top left.
    """
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    to_screen = ax.transData.transform
    taken = []  # every marker drawn (labelled or not), as a box of its size, in pixels
    for dots in ax.collections:
        sizes = list(dots.get_sizes()) or [36.0]
        for n, (x, y) in enumerate(to_screen(dots.get_offsets())):
            half = (sizes[min(n, len(sizes) - 1)] ** 0.5) / 2 * fig.dpi / 72  # s is points²
            taken.append((x - half, y - half, x + half, y + half))
    for label in sorted(labels, key=lambda lb: (lb.rank, -lb.y, lb.x)):
        if not label.text:
            continue
        spot = None
        for dx, dy in _OFFSETS:
            ox, oy = 7 * dx, 7 * dy
            note = ax.annotate(label.text, (label.x, label.y), xytext=(ox, oy),
                               textcoords="offset points", fontsize=7, color=label.color,
                               ha="left" if dx > 0 else "right" if dx < 0 else "center",
                               va="center", zorder=7)  # fmt: skip
            box = note.get_window_extent(renderer)
            edges = (box.x0 - 1, box.y0 - 1, box.x1 + 1, box.y1 + 1)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
            if inside and box.y1 <= frame.y1 and not any(_overlap(edges, t) for t in taken):
                spot = note
                break
            note.remove()
        if spot is None:  # no free spot: the nearest one, over whatever is there
            spot = ax.annotate(label.text, (label.x, label.y), xytext=(7, 2),
                               textcoords="offset points", fontsize=7, color=label.color,
                               va="center", zorder=7)  # fmt: skip
        box = spot.get_window_extent(renderer)
        taken.append((box.x0 - 1, box.y0 - 1, box.x1 + 1, box.y1 + 1))
        ox, oy = spot.xyann
        if abs(ox) + abs(oy) > 20:  # far from its point: a line says whose it is
            ax.annotate("", (label.x, label.y), xytext=(ox, oy), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "color": "0.35", "lw": 0.6,
                                    "shrinkA": 0, "shrinkB": 4}, zorder=4.5)  # fmt: skip


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
