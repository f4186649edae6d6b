"""Verdicts and intervals that the experiments' summaries and figures state the same way.

* A fitted slope gets an interval only from at least :data:`MIN_FIT_POINTS` values of ``N``
  (:func:`fit_interval`): through two points any line fits, and a bootstrap over the jobs at
  two ``N`` says nothing about whether the curve is straight.
* A comparison is **tied** only when its whole 95% interval lies within an equivalence margin
  (:func:`ratio_verdict`, :func:`difference_verdict`); an interval that includes "no
  difference" but is wide (a ratio of 1e15 ± 3e15) is **inconclusive**, never tied.
* A quantity bounded to ``[lo, hi]`` (an accuracy in ``[0, 1]``) has its interval clipped to
  those bounds and says so (:func:`bounded_interval`, :func:`format_bounded`), rather than
  ``0.6250±1.5883``.
"""

import math

__all__ = [
    "MIN_FIT_POINTS",
    "bounded_interval",
    "difference_verdict",
    "fit_interval",
    "format_bounded",
    "ratio_verdict",
]

MIN_FIT_POINTS = 3
"""Fewest ``N`` values a fitted slope needs for an interval."""


def fit_interval(num_points: int, interval):
    """``interval`` when the fit used at least :data:`MIN_FIT_POINTS` points, else ``None``.

    Example:
        >>> fit_interval(2, (-3.1, -1.2)) is None, fit_interval(3, (-3.1, -1.2))
        (True, (-3.1, -1.2))
    """
    return interval if num_points >= MIN_FIT_POINTS else None


def _finite(*values) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def ratio_verdict(
    ratio: float | None,
    ci: float | None,
    *,
    margin: float = 1.5,
    lower: str = "lower",
    higher: str = "higher",
) -> str:
    """How a ratio ``A/B`` with 95% half-width ``ci`` compares with 1.

    ``lower``/``higher`` when the interval excludes 1; ``"tied"`` when it lies within
    ``[1/margin, margin]`` (equivalent within a factor ``margin``); else ``"inconclusive"``.

    Example:
        >>> ratio_verdict(0.5, 0.1), ratio_verdict(1.02, 0.05), ratio_verdict(1e15, 3e15)
        ('lower', 'tied', 'inconclusive')
    """
    if not _finite(ratio, ci):
        return "inconclusive"
    if ratio + ci < 1.0:
        return lower
    if ratio - ci > 1.0:
        return higher
    return "tied" if ratio - ci >= 1.0 / margin and ratio + ci <= margin else "inconclusive"


def difference_verdict(
    diff: float | None,
    ci: float | None,
    *,
    margin: float,
    better: str = "better",
    worse: str = "worse",
) -> str:
    """How a difference ``A − B`` with 95% half-width ``ci`` compares with 0.

    ``better``/``worse`` when the interval excludes 0; ``"tied"`` when it lies within
    ``[−margin, margin]``; else ``"inconclusive"``.

    Example:
        >>> difference_verdict(2.0, 0.5, margin=1.0), difference_verdict(0.1, 0.3, margin=1.0)
        ('better', 'tied')
        >>> difference_verdict(0.1, 30.0, margin=1.0)
        'inconclusive'
    """
    if not _finite(diff, ci):
        return "inconclusive"
    if diff - ci > 0.0:
        return better
    if diff + ci < 0.0:
        return worse
    return "tied" if abs(diff) + ci <= margin else "inconclusive"


def bounded_interval(
    mean: float, ci: float, lo: float = 0.0, hi: float = 1.0
) -> tuple[float, float]:
    """The interval ``mean ± ci`` clipped to ``[lo, hi]`` (an accuracy's ``[0, 1]``).

    Example:
        >>> bounded_interval(0.625, 1.5883)
        (0.0, 1.0)
    """
    return max(lo, mean - ci), min(hi, mean + ci)


def format_bounded(
    mean: float | None, ci: float | None, lo: float = 0.0, hi: float = 1.0, digits: int = 4
) -> str:
    """``mean [low, high]`` with the 95% interval clipped to ``[lo, hi]``.

    Example:
        >>> format_bounded(0.625, 1.5883)
        '0.6250 [0.0000, 1.0000]'
        >>> format_bounded(0.9, None)
        '0.9000'
    """
    if mean is None or not math.isfinite(mean):
        return "-"
    if ci is None or not math.isfinite(ci):
        return f"{mean:.{digits}f}"
    low, high = bounded_interval(mean, ci, lo, hi)
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"
