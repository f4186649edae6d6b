"""When a low-precision run's losses are round-off rather than approximation error.

Measured (``SplineCode`` with Chebyshev nodes, ``f(x) = x·sin x`` on ``[−2, 2]³``, K = 10,
S = N/10 random stragglers, default (Kalman) solver; the same inputs decoded in float32 and
float64):
float32 agrees with float64 to 1% or better while the float64 loss is above ~1e-11
(N ≤ 1000 at any λ), but float32 has a loss *floor* of about ``25 · eps32² · mean_k ‖f(x_k)‖²``
(~8e-13 here): at N = 1000, λ = 0 the float32 loss is 1.24× the float64 one (3.6e-12); at
N = 10000, λ = 0 it is 7.7e-13 against 2.2e-19. So the warning fires when the mean loss is
within 10× of that floor, i.e. when round-off is at least ~10% of what is reported.

The condition lives in :func:`precision_floor` alone so that it can be re-measured and tuned
when the solvers' float32 behaviour changes.
"""

import warnings

import jax.numpy as jnp
import numpy as np

from .types import ArrayLike

__all__ = ["Float32PrecisionWarning", "precision_floor", "warn_if_round_off"]

_FLOOR_FACTOR = 25.0  # measured: float32 loss floor ≈ 25 · eps² · mean ‖f(x_k)‖²
_MARGIN = 10.0  # warn when the mean loss is below _MARGIN × the floor


class Float32PrecisionWarning(UserWarning):
    """Reported losses are close to the round-off floor of a low-precision (float32) run.

    Enable float64 (``jax.config.update("jax_enable_x64", True)`` before creating arrays) to
    measure losses this small. Silence with
    ``warnings.simplefilter("ignore", gcc.Float32PrecisionWarning)``.
    """


def precision_floor(fx: ArrayLike) -> float:
    """Smallest per-pattern loss a run in ``fx``'s dtype resolves: ``c · eps² · mean ‖f(x_k)‖²``.

    ``eps`` is the machine epsilon of ``fx``'s floating dtype and ``c = 25`` (measured for the
    spline codes; see the module docstring). Returns 0 for float64 and wider.
    """
    fx = np.asarray(fx)
    if not np.issubdtype(fx.dtype, np.floating) and fx.dtype.name != "bfloat16":
        return 0.0
    eps = float(jnp.finfo(fx.dtype).eps)
    if eps <= float(np.finfo(np.float64).eps):
        return 0.0
    scale = float(np.mean(np.sum(fx.reshape(fx.shape[0], -1).astype(np.float64) ** 2, axis=1)))
    return _FLOOR_FACTOR * eps**2 * scale


def warn_if_round_off(losses: ArrayLike, fx: ArrayLike, where: str, *, stacklevel: int = 3):
    """Warn (:class:`Float32PrecisionWarning`) when ``mean(losses) < 10 · precision_floor(fx)``.

    Args:
        losses: per-pattern losses (NaN entries are ignored).
        fx: the targets ``f(x_k)``, shape ``(K, ...)``, in the dtype the run used.
        where: the caller's name, for the message.
        stacklevel: passed to :func:`warnings.warn`.

    Returns:
        True when it warned.
    """
    floor = precision_floor(fx)
    if floor == 0.0:
        return False
    losses = np.asarray(losses, dtype=np.float64)
    if not np.any(np.isfinite(losses)):
        return False
    mean = float(np.nanmean(losses))
    if mean >= _MARGIN * floor:
        return False
    warnings.warn(
        f"{where}: mean loss {mean:.2e} is within {_MARGIN:g}x of {np.asarray(fx).dtype}'s "
        f"round-off floor (~{floor:.1e} for these outputs), so part of it is rounding error, not "
        'the code\'s approximation error; enable float64 (jax.config.update("jax_enable_x64", '
        "True)) to measure losses this small",
        Float32PrecisionWarning,
        stacklevel=stacklevel,
    )
    return True
