"""Flag value problems and substitute safe inputs: the one guard in front of every spline solve.

A fit, or a batch of fits (one per straggler mask) sharing nodes, λ and outputs, meets value
problems only as data: nodes that are not strictly increasing and finite, a negative or
non-finite λ, a negative or non-finite weight, fewer live points than the solve needs, NaN/Inf
in a live output. :func:`sanitise` flags each as a :class:`~gcc_jax._core.status.Status` and
replaces what it flags by harmless stand-ins (equispaced nodes on [−1, 1], λ = 1, every point
live with weight 1, zero outputs), so that no NaN or Inf, a straggler's included, reaches the
arithmetic or a reverse-mode cotangent. The caller puts NaN in the value wherever the status is
not OK. The per-flag helpers (:func:`node_status`, :func:`lam_status`, :func:`weight_status`,
:func:`data_status`, :func:`input_status`) are the same checks for codes that need only some.
"""

from collections.abc import Sequence
from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from .status import Status, combine
from .types import Array, Bool, Float, Int, Shaped

__all__ = [
    "Sanitised",
    "data_status",
    "input_status",
    "lam_status",
    "node_status",
    "sanitise",
    "weight_status",
]


def node_status(t: Float[Array, " n"]) -> Int[Array, ""]:
    """``BAD_NODES`` when ``t`` is not strictly increasing and finite (checked under tracing)."""
    bad = jnp.any(jnp.diff(t) <= 0) | ~jnp.all(jnp.isfinite(t))
    return combine((bad, Status.BAD_NODES))


def lam_status(lam: Array) -> Int[Array, ""]:
    """``NEGATIVE_LAM`` when λ is negative or not finite (checked under tracing)."""
    return combine(((lam < 0) | ~jnp.isfinite(lam), Status.NEGATIVE_LAM))


def weight_status(w: Float[Array, "*p n"], used: Bool[Array, "*p n"] | None = None) -> Array:
    """``BAD_WEIGHTS`` (per row of ``w``) when a used weight is negative, NaN or Inf.

    ``used`` ``None``: every weight counts (give masked-off entries weight 0 first).
    """
    bad = ~(jnp.isfinite(w) & (w >= 0))
    if used is not None:
        bad = used & bad
    return combine((jnp.any(bad, axis=-1), Status.BAD_WEIGHTS))


def data_status(y_flat: Shaped[Array, "n m"], used: Bool[Array, " n"]) -> Int[Array, ""]:
    """``NONFINITE_DATA`` when a used (live) row of ``y`` holds NaN or Inf."""
    finite = jnp.all(jnp.isfinite(y_flat), axis=1)
    return combine((jnp.any(used & ~finite), Status.NONFINITE_DATA))


def input_status(x: Array) -> Int[Array, ""]:
    """``NONFINITE_DATA`` when the inputs hold NaN or Inf (checked under tracing)."""
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.zeros((), jnp.int32)
    return combine((~jnp.all(jnp.isfinite(x)), Status.NONFINITE_DATA))


class Sanitised(NamedTuple):
    """A fit problem with every value problem flagged and replaced by a harmless stand-in.

    The pattern axes ``*p`` are those of the masks given to :func:`sanitise`: none for one fit,
    ``(p,)`` for a batch of masks sharing nodes, λ and outputs.
    """

    status: Int[Array, "*p"]  # the flags known before solving
    t: Float[Array, " n"]  # nodes (equispaced on [−1, 1] where the nodes or λ are bad)
    lam: Float[Array, ""]  # λ (1 where the nodes or λ are bad)
    masks: Bool[Array, "*p n"]  # masks (all live where the status is not OK)
    weights: Float[Array, "*p n"] | None  # weights (1 where the status is not OK), if given
    y: Float[Array, "n r"]  # outputs (0 in non-finite rows; one fit: also in unused rows)
    dead: Int[Array, "*p"]  # points without positive weight per pattern, as given


def sanitise(
    t: Float[Array, " n"],
    lam: Float[Array, ""],
    y: Float[Array, "n r"],
    masks: Bool[Array, "*p n"],
    *,
    weights: Float[Array, "*p n"] | None = None,
    nodes: Sequence[Array] = (),
    min_live: int = 2,
) -> Sanitised:
    """Flag the value problems of the fits of ``y`` on ``t`` under ``masks`` and replace them.

    Flags, per pattern: ``BAD_NODES`` (``t`` or any of ``nodes``, e.g. query points, not
    strictly increasing and finite), ``NEGATIVE_LAM``, ``BAD_WEIGHTS`` (a negative, NaN or Inf
    weight; ``weights`` are the masked weights, 0 at masked-off points), ``TOO_FEW_LIVE`` (fewer
    than ``min_live`` points with a positive weight, or live when ``weights`` is ``None``) and
    ``NONFINITE_DATA`` (NaN/Inf in a live row of ``y``).

    Stand-ins: ``t`` and ``lam``, shared by every pattern, are replaced where the nodes or λ are
    bad; a pattern whose status is not OK gets every point live with weight 1; rows of ``y``
    that are not finite are zeroed, and for one pattern (``masks`` of shape ``(n,)``) also the
    rows it does not use, so a straggler's output never reaches the solve or its gradient. A
    pattern whose status is OK keeps its inputs unchanged.

    The live points and the live points with a non-finite output are counted in one
    two-operand reduction over the points.

    Example:
        >>> import jax.numpy as jnp
        >>> t = jnp.linspace(-1.0, 1.0, 4)
        >>> y = jnp.array([[1.0], [jnp.nan], [2.0], [3.0]])
        >>> masks = jnp.array([[True, False, True, True], [False, True, False, False]])
        >>> s = sanitise(t, jnp.asarray(0.1), y, masks)
        >>> s.status.tolist(), s.masks[1].tolist(), s.y[:, 0].tolist()
        ([0, 3], [True, True, True, True], [1.0, 0.0, 2.0, 3.0])
    """
    n = t.shape[0]
    finite_rows = jnp.all(jnp.isfinite(y), axis=1)
    shared = lam_status(lam) | node_status(t)
    for other in nodes:
        shared = shared | node_status(other)
    live = masks if weights is None else weights > 0
    zero = jnp.zeros((), jnp.int32)
    count, count_nonfinite = lax.reduce(
        (live.astype(jnp.int32), (live & ~finite_rows).astype(jnp.int32)),
        (zero, zero),
        lambda a, b: (a[0] + b[0], a[1] + b[1]),
        (live.ndim - 1,),
    )
    status = (
        combine(
            (count < min_live, Status.TOO_FEW_LIVE), (count_nonfinite > 0, Status.NONFINITE_DATA)
        )
        | shared
    )
    if weights is not None:
        status = status | weight_status(weights)
    bad = (status != 0)[..., None]
    masks_ok = jnp.where(bad, True, masks)
    keep = finite_rows if masks.ndim > 1 else masks_ok & finite_rows
    shared_bad = shared != 0
    return Sanitised(
        status=status,
        t=jnp.where(shared_bad, jnp.linspace(-1.0, 1.0, n, dtype=t.dtype), t),
        lam=jnp.where(shared_bad, jnp.ones_like(lam), lam),
        masks=masks_ok,
        weights=None if weights is None else jnp.where(bad, jnp.ones_like(weights), weights),
        y=jnp.where(keep[:, None], y, 0.0),
        dead=n - count,
    )
