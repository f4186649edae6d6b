"""End to end: encode, apply ``f`` on the workers, decode, and Monte Carlo over straggler masks."""

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_masks, check_inputs
from .._core.precision import warn_if_round_off
from .._core.status import GCCValueError, describe_status
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ..codes import AbstractCode, check_code
from ._evaluator import evaluate_masks
from ._order import check_order, inverse_order

__all__ = ["apply_workers", "coded_apply", "monte_carlo_loss", "MonteCarloResult"]


def apply_workers(code: AbstractCode, f: Callable, x: ArrayLike) -> tuple[Array, Array]:
    """Encode ``x`` and run the workers: returns ``(x~, y~)``.

    ``x~ = code.encode(x)`` and ``y~ = code.worker_outputs(f, x)``: ``f`` on every coded input
    for most codes, the parity model on ParM's parity query (see
    :meth:`gcc_jax.AbstractCode.worker_outputs`).
    """
    code = check_code(code)
    return _apply_workers(code, f, check_inputs(x, code.num_inputs))


@functools.partial(jax.jit, static_argnames="f")
def _apply_workers(code, f, x):
    return code.encode(x), code.worker_outputs(f, x)


@functools.partial(jax.jit, static_argnames="f")
def outputs_and_targets(code: AbstractCode, f: Callable, x: Array) -> tuple[Array, Array]:
    """``(code.worker_outputs(f, x), vmap(f)(x))`` in one compiled call (``f`` static)."""
    return code.worker_outputs(f, x), jax.vmap(f)(x)


def coded_apply(
    code: AbstractCode,
    f: Callable,
    x: ArrayLike,
    mask: Bool[ArrayLike, " n"],
    *,
    order: Int[ArrayLike, " k"] | None = None,
) -> Array:
    """``f^(x_k)``: encode ``x``, run the ``N`` workers, decode with ``mask``.

    The workers' outputs come from ``code.worker_outputs(f, x)`` (so ParM's parity worker runs
    its parity model, not ``f``).

    With ``order`` (a permutation, e.g. :func:`gcc_jax.input_order`) the code encodes
    ``x[order]`` — input ``order[j]`` at the encoder's ``j``-th position — and the estimates
    come back in the caller's order: ``result[k]`` estimates ``f(x[k])``. The order is an
    array: a new one does not recompile, and ``jax.grad`` flows through the permutation.

    The workers flagged dead in ``mask`` are computed too (this is a simulation) but their
    results are discarded by the decoder.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=5, num_workers=40)
        >>> x = jnp.linspace(-1.0, 1.0, 5)[:, None]
        >>> mask = jnp.ones(40, bool).at[7].set(False)
        >>> yh = gcc.coded_apply(code, jnp.sin, x, mask)
        >>> bool(jnp.max(jnp.abs(yh - jnp.sin(x))) < 1e-3)
        True
        >>> order = jnp.array([4, 2, 0, 1, 3])
        >>> yo = gcc.coded_apply(code, jnp.sin, x, mask, order=order)   # caller's order back
        >>> bool(jnp.max(jnp.abs(yo - jnp.sin(x))) < 1e-3)
        True
    """
    code = check_code(code)
    x = check_inputs(x, code.num_inputs)
    order = check_order(order, code.num_inputs)
    if order is None:
        return code.decode(_apply_workers(code, f, x)[1], mask)
    _, yt = _apply_workers(code, f, jnp.take(x, order, axis=0))
    return jnp.take(code.decode(yt, mask), inverse_order(order), axis=0)


class MonteCarloResult(NamedTuple):
    """Per-pattern losses with their statuses (``monte_carlo_loss(..., return_status=True)``).

    Attributes:
        loss: ``(M,)`` losses; NaN where the pattern could not be decoded.
        status: ``(M,)`` :class:`gcc_jax.Status` flags (0 = valid).
    """

    loss: Float[np.ndarray, " p"]
    status: Int[np.ndarray, " p"]


def monte_carlo_loss(
    code: AbstractCode,
    f: Callable,
    x: ArrayLike,
    masks: Bool[ArrayLike, "p n"],
    *,
    chunk_size: int | None = None,
    return_status: bool = False,
    progress: bool = False,
    devices: Sequence[jax.Device] | None = None,
    order: Int[ArrayLike, " k"] | None = None,
) -> Float[np.ndarray, " p"] | MonteCarloResult:
    """Per-pattern loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` over a batch of straggler masks.

    Encodes ``x`` once, applies ``f`` (one input → one output, vmapped) once to the ``N`` coded
    inputs and once to the ``K`` true inputs, then decodes all ``M`` masks in chunks of
    ``chunk_size`` masks through :class:`gcc_jax.MaskEvaluator` (the code's batched decoder, up
    to 64 chunks per compiled call, the last call padded with copies of its first mask), so
    memory is bounded for any ``M`` (O(chunk · N · m) for the Kalman decoder, O(chunk · N²) for
    the kernel one) and there is one compilation per shape: new masks, new λs or new nodes reuse
    it. A ``SplineCode`` with 64 ≤ N ≤ 1024 and masks of one straggler count S ≤ 24
    decodes each mask as a rank-S downdate of one full fit (``gcc_jax/spline/_downdate.py``).

    Args:
        code: any :class:`gcc_jax.AbstractCode`.
        f: the worker function, one input of shape ``x.shape[1:]`` → one output.
        x: inputs, shape ``(K, ...)``.
        masks: boolean ``(M, N)``; ``True`` = the worker returned in time.
        chunk_size: masks per vmapped block; default the devices' backend policy
            (:func:`gcc_jax.evaluation.policy_for`, :func:`gcc_jax.auto_chunk_size`).
        return_status: also return each pattern's :class:`gcc_jax.Status` instead of raising.
        progress: show a progress bar over chunks.
        devices: devices to shard the mask batch over (data parallel: each device decodes
            ``chunk_size`` masks of every block; the code and worker outputs are replicated).
            Default: all devices of JAX's default backend. Results do not depend on it.
        order: encode ``x[order]`` (a permutation, e.g. :func:`gcc_jax.input_order`); the loss
            is a mean over the inputs, so it needs no reordering back.

    Returns:
        The ``(M,)`` losses as a **NumPy array** on the host, not a ``jax.Array``: the chunks
        are gathered on the host as they finish, so memory on the device stays bounded
        (``jnp.asarray(loss)`` puts them back on a device). With ``return_status``, a
        :class:`MonteCarloResult` ``(loss, status)`` of NumPy arrays (failed patterns then have
        loss NaN and a non-zero status).

    Raises:
        ValueError/TypeError: wrong shapes or dtypes.
        GCCValueError: (unless ``return_status``) some pattern cannot be decoded (too few live
            workers for the code, see :func:`gcc_jax.describe_status`), a live worker returned
            NaN/Inf, or ``f(x)`` itself is not finite.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=5, num_workers=30)
        >>> x = jnp.linspace(-1.0, 1.0, 5)[:, None]
        >>> masks = gcc.sample_masks(jax.random.key(0), 30, num=64, stragglers=3)
        >>> loss = gcc.monte_carlo_loss(code, jnp.sin, x, masks)
        >>> type(loss).__name__, loss.shape, bool(loss.max() < 1e-4)
        ('ndarray', (64,), True)
    """
    code = check_code(code)
    if any(
        isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves((code, x, masks))
    ):
        raise TypeError(
            "monte_carlo_loss drives a host-side loop over chunks of masks and cannot run under "
            "jit/vmap/grad; inside a transformation use gcc_jax.mask_losses(code, yt, fx, masks) "
            "(jittable), or gcc_jax.tuning.expected_loss (differentiable)"
        )
    x = check_inputs(x, code.num_inputs)
    order = check_order(order, code.num_inputs)
    if order is not None:
        x = jnp.take(x, order, axis=0)
    masks = as_masks(masks, code.num_workers)
    yt, fx = outputs_and_targets(code, f, x)
    if yt.shape[1:] != fx.shape[1:]:
        raise ValueError(f"f gave shape {yt.shape[1:]} on coded inputs, {fx.shape[1:]} on x")
    # read only after the masks are dispatched, so the host does not wait for f first
    finite = jnp.all(jnp.isfinite(fx))
    num = masks.shape[0]
    losses, statuses = evaluate_masks(
        code, yt, fx, masks, chunk_size=chunk_size, devices=devices, progress=progress
    )
    if not bool(finite):
        raise GCCValueError("`f(x)` on the uncoded inputs is not finite; the loss is undefined")
    warn_if_round_off(losses, fx, "monte_carlo_loss")
    if return_status:
        return MonteCarloResult(losses, statuses)
    if statuses.any():
        bad = np.flatnonzero(statuses)
        flags = describe_status(int(np.bitwise_or.reduce(statuses[bad])), code)
        raise GCCValueError(
            f"monte_carlo_loss: {bad.size} of {num} patterns could not be decoded ({flags}); "
            f"first bad pattern index {bad[0]}. Pass return_status=True to get per-pattern "
            "losses (NaN for those) with their statuses."
        )
    return losses
