"""Small plotting conventions shared by the experiments' figures.

Log axes never drop values silently (:func:`positive` counts what it cannot draw, and the label
says so), discrete axes get integer ticks (:func:`integer_ticks`), legends go outside the data
(:func:`legend_outside`), and error bars on a log axis are symmetric in log space
(:func:`log_errorbar`: the 95% interval ``mean ± ci`` is drawn as far as it is positive, and the
clipped side is drawn to the axis edge with an open cap, never hidden), and a log axis always
has labelled ticks, even when its data span less than a decade (:func:`log_ticks`). A code has
one colour in every figure (:data:`CODE_COLORS`). Values at round-off level next to real ones
(an exact code's 1e-17 beside 1e-3) are left out of a log axis and counted in the label
(``positive(..., roundoff=...)``), so they cannot set its scale; a bounded quantity's interval
(an accuracy's) is drawn clipped to its bounds and labelled so (:func:`bounded_errorbar`). A
heat map's cell labels are dark on light cells and light on dark ones (:func:`annotate_cells`).
"""

from collections.abc import Sequence

import numpy as np

__all__ = [
    "CODE_COLORS",
    "annotate_cells",
    "bounded_errorbar",
    "integer_ticks",
    "legend_outside",
    "log_errorbar",
    "log_ticks",
    "positive",
]

CODE_COLORS = {"GCC": "C0", "BACC": "C3", "uncoded": "C7", "replication": "C2", "ParM": "C1"}
"""Matplotlib colours of the codes every experiment compares; an experiment adds its variants."""


def positive(
    y, label: str, *, roundoff: float | None = None, reference: float | None = None
) -> tuple[np.ndarray, str]:
    """``y`` with non-positive or non-finite values masked (NaN) and ``label`` noting how many.

    ``roundoff``: also mask values below ``roundoff`` times ``reference`` (default: the series'
    largest finite value; pass the largest value on the axis so that a series that is all
    round-off, e.g. an exact code's 1e-17, is masked too), counted as "at round-off".

    Example:
        >>> y, label = positive([1.0, 0.0, 2.0, float("nan")], "GCC")
        >>> label
        'GCC (1 zero, 1 failed: not drawn)'
        >>> y, label = positive([1e-3, 1e-17, 2e-3], "uncoded", roundoff=1e-9)
        >>> label, bool(np.isnan(y[1]))
        ('uncoded (1 at round-off: not drawn)', True)
    """
    y = np.asarray(y, dtype=float)
    zeros = int(np.sum(y == 0))
    bad = int(np.sum(~np.isfinite(y))) + int(np.sum(y < 0))
    keep = np.isfinite(y) & (y > 0)
    tiny = 0
    if roundoff is not None and keep.any():
        top = np.max(y[keep]) if reference is None else max(float(reference), np.max(y[keep]))
        small = keep & (y < roundoff * top)
        tiny, keep = int(small.sum()), keep & ~small
    notes = []
    if zeros:
        notes.append(f"{zeros} zero{'s' if zeros > 1 else ''}")
    if tiny:
        notes.append(f"{tiny} at round-off")
    if bad:
        notes.append(f"{bad} failed")
    if notes:
        label = f"{label} ({', '.join(notes)}: not drawn)"
    return np.where(keep, y, np.nan), label


def bounded_errorbar(ax, x, mean, ci, label: str, *, lo: float = 0.0, hi: float = 1.0, **kwargs):
    """``mean`` with its 95% interval clipped to ``[lo, hi]`` (an accuracy's ``[0, 1]``;
    ``hi = inf`` for a quantity bounded below only), labelled as such. The bars never leave the
    bounds, so neither does the axis's autoscaled range (beyond its margins); other lines drawn
    on the axis later still scale it.

    Example:
        >>> from gcc_jax.experiments._io import new_figure
        >>> fig, ax = new_figure()
        >>> _ = bounded_errorbar(ax, [0, 1], [0.625, 0.9], [1.5883, 0.05], "GCC")
        >>> bool(ax.get_ylim()[0] >= -0.06), ax.get_legend_handles_labels()[1]
        (True, ['GCC, 95% CI clipped to [0, 1]'])
    """
    mean = np.asarray(mean, dtype=float)
    ci = np.nan_to_num(np.asarray(ci, dtype=float), nan=0.0)
    low = np.maximum(lo, mean - ci)
    high = np.minimum(hi, mean + ci)
    yerr = [np.maximum(mean - low, 0.0), np.maximum(high - mean, 0.0)]
    bounds = f"clipped to [{lo:g}, {hi:g}]" if np.isfinite(hi) else f"clipped at {lo:g}"
    return ax.errorbar(x, mean, yerr=yerr, capsize=3, label=f"{label}, 95% CI {bounds}", **kwargs)


def annotate_cells(ax, values, texts, image) -> None:
    """Write ``texts[i][j]`` on the heat-map cell ``(i, j)`` of ``image`` (an ``imshow``), dark
    on light cells and white on dark ones, so every label stays readable; NaN cells stay bare."""
    values = np.asarray(values, dtype=float)
    for (i, j), v in np.ndenumerate(values):
        if not np.isfinite(v):
            continue
        r, g, b, _ = image.cmap(image.norm(v))
        light = 0.299 * r + 0.587 * g + 0.114 * b > 0.5  # perceived luminance of the cell
        ax.text(
            j, i, texts[i][j], ha="center", va="center", fontsize=6,
            color="black" if light else "white",
        )  # fmt: skip


def integer_ticks(ax, values: Sequence[int], axis: str = "x") -> None:
    """Ticks exactly at the integer ``values`` (e.g. every S measured), nothing in between."""
    values = sorted({int(v) for v in values})
    if axis == "x":
        ax.set_xticks(values)
        ax.set_xticklabels([str(v) for v in values])
    else:
        ax.set_yticks(values)
        ax.set_yticklabels([str(v) for v in values])


def legend_outside(ax, **kwargs) -> None:
    """The legend to the right of the axes, where it cannot cover data; none when nothing on
    ``ax`` is labelled (an interrupted run's empty panel)."""
    if not ax.get_legend_handles_labels()[0]:
        return
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def log_errorbar(
    ax, x, mean, ci, label: str, *, roundoff: float | None = None, reference=None, **kwargs
):
    """``mean ± ci`` (a 95% interval) on a log y-axis, labelled as such.

    Where ``mean − ci ≤ 0`` the lower bar would be infinitely long on a log axis: it is drawn
    down to one decade below the mean and marked with an open marker, so the interval is
    visibly unbounded below rather than clipped without notice. Zeros, failures and (with
    ``roundoff`` and ``reference``) round-off values are not drawn but counted in the label
    (:func:`positive`).
    """
    mean, label = positive(mean, label, roundoff=roundoff, reference=reference)
    ci = np.nan_to_num(np.asarray(ci, dtype=float), nan=0.0)
    low = mean - ci
    unbounded = np.isfinite(mean) & (low <= 0)
    lower = np.where(unbounded, 0.9 * mean, ci)
    note = "; ▽: CI reaches 0" if unbounded.any() else ""
    line = ax.errorbar(
        x, mean, yerr=[lower, ci], capsize=3, label=f"{label}, ±95% CI{note}", **kwargs
    )
    if unbounded.any():
        ax.plot(
            np.asarray(x)[unbounded],
            0.1 * mean[unbounded],
            linestyle="none",
            marker="v",
            markerfacecolor="none",
            color=line[0].get_color(),
        )
    return line


def log_ticks(ax, axis: str = "y", count: int = 4) -> None:
    """Labelled ticks on a log axis, also when its range spans less than a decade.

    Call after plotting. Over two decades or more, Matplotlib's decade ticks are kept (at most
    six labelled); over less, ``count`` ticks evenly spaced in log inside the limits, labelled
    with three significant digits or as many as tell them apart (Matplotlib would label
    none, or one).

    Example:
        >>> from gcc_jax.experiments._io import new_figure
        >>> fig, ax = new_figure()
        >>> _ = ax.semilogy([0, 1], [0.0148, 0.0153])
        >>> log_ticks(ax)
        >>> len(ax.get_yticks())
        4
    """
    from matplotlib.ticker import LogLocator, NullFormatter, NullLocator

    get = ax.get_ylim if axis == "y" else ax.get_xlim
    target = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = get()
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
        return
    if np.log10(hi / lo) >= 2.0:
        target.set_major_locator(LogLocator(base=10.0, numticks=6))
        target.set_minor_formatter(NullFormatter())
        return
    margin = (hi / lo) ** 0.05
    ticks = np.geomspace(lo * margin, hi / margin, count)
    set_ticks = ax.set_yticks if axis == "y" else ax.set_xticks
    digits = next(d for d in range(3, 12) if len({f"{v:.{d}g}" for v in ticks}) == count)
    set_ticks(ticks, [f"{v:.{digits}g}" for v in ticks])
    target.set_minor_locator(NullLocator())
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
