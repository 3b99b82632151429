"""Plain-text tables and number formats shared by the benchmark sections."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def print_table(
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    notes: Sequence[str] = (),
) -> None:
    """Print `rows` under `title` with aligned columns.

    The first column is left-aligned (labels), the others right-aligned (figures). Cells are
    printed with `str()`, so format numbers before passing them (see the helpers below).
    """
    body = [[str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        if len(row) != len(headers):
            msg = f"row {row!r} has {len(row)} cells for {len(headers)} headers"
            raise ValueError(msg)
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        out = [cells[0].ljust(widths[0])]
        out += [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    print()
    print(title)
    print("=" * len(title))
    print(line(list(headers)))
    print("  ".join("-" * w for w in widths))
    for row in body:
        print(line(row))
    for note in notes:
        print(note)


def fmt_duration(seconds: float | None) -> str:
    """`12.3 µs`, `4.56 ms`, `1.23 s`; `-` for None."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_rate(per_second: float, unit: str = "tok/s") -> str:
    """`1.23 M tok/s`, `456 k tok/s`, `789 tok/s`."""
    if per_second >= 1e6:
        return f"{per_second / 1e6:.2f} M {unit}"
    if per_second >= 1e3:
        return f"{per_second / 1e3:.0f} k {unit}"
    return f"{per_second:.0f} {unit}"


def fmt_int(value: int) -> str:
    """`1,234,567`."""
    return f"{value:,}"


def fmt_ratio(value: float) -> str:
    """`12.3x`."""
    return f"{value:.1f}x" if value < 100 else f"{value:,.0f}x"
