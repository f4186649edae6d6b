"""Which algorithm decodes a smoothing-spline code's outputs: the one place that decides.

A decode fits the smoothing spline through the live ``(beta_n, y_n)`` of each mask and evaluates
it at the query points ``alpha``. Five algorithms give that value (equal to rounding); which one
runs depends only on static facts: the solver, the number of workers ``n``, the number of output
columns, how many masks are decoded together, and (when known on the host) their number of
stragglers ``S``:

* :attr:`DecodePath.MATRIX`: more columns than workers: the ``(q, n)`` decoder matrix is formed
  once (a fit of the identity) and applied to all columns;
* :attr:`DecodePath.FIT`: one mask, each column fitted by the chosen solver (``"parallel"``,
  ``"kernel"``, or ``"auto"`` resolved by :func:`gcc_jax.resolve_solver`);
* :attr:`DecodePath.KALMAN`: the batch-native Kalman pass, the masks as its vector axis
  (:func:`gcc_jax.spline.smooth_batch_with_status`), outputs only at the query points;
* :attr:`DecodePath.DOWNDATE`: each mask's fit as a rank-``S`` downdate of one full fit
  (:mod:`gcc_jax.spline._downdate`), for chunks of at least :data:`MIN_MASKS` masks on
  :data:`MIN_WORKERS` to :data:`MAX_WORKERS` workers with at most :data:`MAX_STRAGGLERS`
  stragglers; chunks whose masks do not fit it at run time take the Kalman pass;
* :attr:`DecodePath.VMAP`: ``vmap`` of the one-mask decode (a batch with the ``"kernel"`` or
  ``"parallel"`` solver, or more columns than workers).
"""

import enum

from ._fit import as_solver, resolve_solver

__all__ = [
    "MAX_STRAGGLERS",
    "MAX_WORKERS",
    "MIN_MASKS",
    "MIN_WORKERS",
    "DecodePath",
    "decode_path",
]

#: the downdate's static gates: below ``MIN_WORKERS`` workers or ``MIN_MASKS`` masks a chunk the
#: O(n) pass is cheap and the downdate's extra compilation does not pay; beyond ``MAX_WORKERS``
#: its O(n²) base costs more than it saves; its per-mask solves hold up to ``MAX_STRAGGLERS``
MIN_WORKERS, MAX_WORKERS = 64, 1024
MIN_MASKS = 32
MAX_STRAGGLERS = 24


class DecodePath(enum.Enum):
    """The algorithm that decodes a batch of masks (see the module docstring)."""

    MATRIX = "matrix"
    FIT = "fit"
    KALMAN = "kalman"
    DOWNDATE = "downdate"
    VMAP = "vmap"


def decode_path(
    solver: str,
    num_workers: int,
    *,
    columns: int | None = None,
    masks: int | None = 1,
    stragglers: int | None = None,
) -> DecodePath:
    """The decode path for ``masks`` masks over ``columns`` output columns on ``num_workers``.

    Args:
        solver: the code's solver (``"kalman"``, ``"parallel"``, ``"kernel"`` or ``"auto"``).
        num_workers: ``n``.
        columns: output columns decoded together; ``None``: not known (at most ``n``).
        masks: masks decoded together: ``1`` one mask on its own; ``None`` not known yet (work
            prepared for chunks of any width).
        stragglers: the masks' number of stragglers when known on the host; ``None``: decided
            at run time, per chunk.

    Static (Python values only): the choice never depends on traced data, so it never
    recompiles.

    Example:
        >>> decode_path("kalman", 100, columns=10, masks=64, stragglers=10)
        <DecodePath.DOWNDATE: 'downdate'>
        >>> decode_path("kalman", 100, columns=10, masks=64, stragglers=30)
        <DecodePath.KALMAN: 'kalman'>
        >>> decode_path("kernel", 100, columns=10, masks=64)
        <DecodePath.VMAP: 'vmap'>
        >>> decode_path("kalman", 100, columns=500)
        <DecodePath.MATRIX: 'matrix'>
    """
    solver = as_solver(solver)
    wide = columns is not None and columns > num_workers
    if masks == 1:
        if wide:
            return DecodePath.MATRIX
        if resolve_solver(solver, num_workers, columns or 1) != "kalman":
            return DecodePath.FIT
        return DecodePath.KALMAN
    if wide or solver in ("kernel", "parallel"):
        return DecodePath.VMAP
    if (
        MIN_WORKERS <= num_workers <= MAX_WORKERS
        and (masks is None or masks >= MIN_MASKS)
        and (stragglers is None or stragglers <= MAX_STRAGGLERS)
    ):
        return DecodePath.DOWNDATE
    return DecodePath.KALMAN
