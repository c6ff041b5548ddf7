"""Helpers the studies share: finding rows, naming their runs, formatting figures, plain bar figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cluster.evaluate.study import Row


def pick(rows: list[Row], **match) -> Row | None:
    """The first row whose fields equal ``match`` (None if none)."""
    for r in rows:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def ids(*rows: Row | None) -> tuple[str, ...]:
    """The run ids of the rows present."""
    return tuple(r["run_id"] for r in rows if r is not None and r.get("run_id"))


def num(v) -> str:
    """A figure as printed in a check: integers with thousands separators, others to 4 significant digits."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 1):
        return f"{int(v):,}"
    return f"{v:.4g}"


def served(r: Row | None) -> str:
    if r is None:
        return "-"
    return f"{r.get('requests_finished') or r.get('requests', 0) - r.get('requests_failed', 0)}/{r.get('requests')}"


Panel = tuple[str, str | Callable[[Row], float | None]]  # (y label, a run_summary column or a function of the row)


def bars(rows: list[Row], label: Callable[[Row], str], panels: Sequence[Panel], plt, title: str):
    """One bar panel a figure of merit, a bar a row (a missing figure drawn as no bar)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4), layout="constrained", squeeze=False)
    names = [label(r) for r in rows]
    colours = [f"C{i % 10}" for i in range(len(rows))]
    for ax, (ylabel, value) in zip(axes[0], panels):
        heights = [r.get(value) if isinstance(value, str) else value(r) for r in rows]
        ax.bar(range(len(rows)), [h if h is not None else 0.0 for h in heights], color=colours)
        ax.set_xticks(range(len(rows)), names, rotation=35, ha="right", fontsize=7)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=9)
    return fig
