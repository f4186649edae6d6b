"""Checks of scalar settings (counts, real numbers, names), importable without JAX.

The command line checks its flags with these before it imports JAX; the library's sizes use the
same rules (:func:`gcc_jax._core.checks.as_int` accepts the same values and says the same). Every
message names the argument in backquotes: ``ValueError("`num_masks` must be >= 1; got 0")``.
"""

import math
import numbers
import sys
from collections.abc import Sequence

__all__ = ["as_choice", "as_int", "as_real", "interval"]


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _zero_d(value):
    """A 0-d NumPy or JAX array as its Python scalar (and its dtype kind); else ``None``."""
    np = sys.modules.get("numpy")  # an array exists only if its library is already imported
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(value, jax.core.Tracer):
        raise TypeError("a concrete number is needed (a setting is static); got a tracer")
    arrays = tuple(
        t for t in (getattr(np, "ndarray", None), getattr(jax, "Array", None)) if t is not None
    )
    if arrays and isinstance(value, arrays) and value.ndim == 0:
        return value.item(), value.dtype.kind
    return None


def _number(value, name: str, kind: type, dtype_kinds: str, what: str, what_in: str):
    """``value`` as a Python number of ``kind`` (a 0-d array of a dtype kind in ``dtype_kinds``
    unwrapped); ``TypeError`` naming ``name`` and what it must be (``what``, or ``what_in`` with
    its range) for a bool, another dtype or another type."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise TypeError(f"`{name}` must be {what_in}; got bool {value!r}")
    try:
        scalar = _zero_d(value)
    except TypeError as err:
        raise TypeError(f"`{name}`: {err}") from None
    if scalar is not None:
        if scalar[1] not in dtype_kinds:
            raise TypeError(f"`{name}` must be {what}; got an array of dtype {value.dtype}")
        value = scalar[0]
    if not isinstance(value, kind):
        raise TypeError(
            f"`{name}` must be {what_in}; got {type(value).__name__} {_describe(value)}"
        )
    return value


def as_int(value, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as a Python int: any integral type (``int``, ``np.int64``, a 0-d integer array).

    Raises:
        TypeError: a bool, float, string or other non-integral value.
        ValueError: outside ``[lo, hi]``.

    Example:
        >>> as_int(3, "num_workers", 2)
        3
        >>> as_int(0, "num_masks", 1)
        Traceback (most recent call last):
        ...
        ValueError: `num_masks` must be >= 1; got 0
    """
    value = int(_number(value, name, numbers.Integral, "iu", "an integer", "an integer"))
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if hi is None:
            rng = f">= {lo}"
        elif lo is None:
            rng = f"<= {hi}"
        else:
            rng = f"in [{lo}, {hi}]"
        raise ValueError(f"`{name}` must be {rng}; got {value}")
    return value


def interval(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> str:
    """The interval in the usual notation.

    Example:
        >>> interval(0.0), interval(0, 1, hi_open=True), interval(1.0, lo_open=True)
        ('[0, inf)', '[0, 1)', '(1, inf)')
    """
    left = "-inf" if lo is None else f"{lo:g}"
    right = "inf" if hi is None else f"{hi:g}"
    opening = "(" if lo_open or lo is None else "["
    closing = ")" if hi_open or hi is None else "]"
    return f"{opening}{left}, {right}{closing}"


def as_real(
    value,
    name: str,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """``value`` as a finite Python float in the given (half-)open interval.

    A smoothing parameter is ``as_real(lam, "lam", 0.0)``; a probability of straggling
    ``as_real(p, "p", 0.0, 1.0)``. Strings and bools are refused (``"0.1"`` is not parsed).

    Raises:
        TypeError: not a real number.
        ValueError: NaN, infinite, or outside the interval.

    Example:
        >>> as_real(1e-6, "lam_dec", 0.0)
        1e-06
        >>> as_real(-1.0, "lam_dec", 0.0)
        Traceback (most recent call last):
        ...
        ValueError: `lam_dec` must be a finite number in [0, inf); got -1.0
    """
    rng = interval(lo, hi, lo_open=lo_open, hi_open=hi_open)
    value = _number(value, name, numbers.Real, "iuf", "a real number", f"a real number in {rng}")
    v = float(value)
    ok = (
        math.isfinite(v)
        and (lo is None or (v > lo if lo_open else v >= lo))
        and (hi is None or (v < hi if hi_open else v <= hi))
    )
    if not ok:
        raise ValueError(f"`{name}` must be a finite number in {rng}; got {v!r}")
    return v


def as_choice(value, name: str, allowed: Sequence[str], *, case: bool = True) -> str:
    """``value``, one of ``allowed`` (compared case-insensitively unless ``case``); returned
    as spelled in ``allowed``.

    Raises:
        ValueError: an unknown name (the message lists the known ones).

    Example:
        >>> as_choice("gcc", "code", ("GCC", "BACC"), case=False)
        'GCC'
    """
    lookup = {a if case else a.lower(): a for a in allowed}
    key = value if case else str(value).lower()
    if not isinstance(value, str) or key not in lookup:
        raise ValueError(f"`{name}`: unknown name {value!r}; choose from {', '.join(allowed)}")
    return lookup[key]
