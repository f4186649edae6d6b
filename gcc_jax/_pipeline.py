"""End to end: encode, apply ``f`` on the workers, decode, and Monte Carlo over straggler masks."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._status import GCCValueError, describe_status
from ._types import Array, ArrayLike, Bool, Float, Int

__all__ = ["apply_workers", "coded_apply", "monte_carlo_loss", "MonteCarloResult"]


def _check_masks(masks, n: int) -> np.ndarray | Array:
    masks = jnp.asarray(masks) if not isinstance(masks, np.ndarray) else masks
    if masks.dtype != np.bool_:
        raise TypeError(f"`masks` must be boolean (True = returned in time); got {masks.dtype}")
    if masks.ndim != 2 or masks.shape[1] != n:
        raise ValueError(
            f"`masks` must have shape (M, {n}), one row per pattern; got {masks.shape}"
        )
    return masks


def apply_workers(code: Any, f: Callable, x: ArrayLike) -> tuple[Array, Array]:
    """Encode ``x`` and apply ``f`` to every coded input: returns ``(x~, f(x~))``."""
    return _apply_workers(code, f, jnp.asarray(x))


@functools.partial(jax.jit, static_argnames="f")
def _apply_workers(code, f, x):
    xt = code.encode(x)
    return xt, jax.vmap(f)(xt)


def coded_apply(code: Any, f: Callable, x: ArrayLike, mask: Bool[ArrayLike, " n"]) -> Array:
    """``f^(x_k)``: encode ``x``, run ``f`` on all ``N`` coded inputs, decode with ``mask``.

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
    """
    _, yt = _apply_workers(code, f, jnp.asarray(x))
    return code.decode(yt, jnp.asarray(mask))


class MonteCarloResult(NamedTuple):
    """Per-pattern losses with their statuses (``monte_carlo_loss(..., return_status=True)``).

    Attributes:
        loss: ``(M,)`` losses; NaN where the pattern could not be decoded.
        status: ``(M,)`` :class:`gcc_jax.Status` flags (0 = valid).
    """

    loss: Float[np.ndarray, " p"]
    status: Int[np.ndarray, " p"]


@jax.jit
def _loss_blocks(code, yt, fx, masks):
    """Per-mask loss ``(1/K) Σ_k ‖y^_k − f(x_k)‖²`` and status for masks ``(g, chunk, n)``.

    ``vmap`` over the ``chunk`` masks of a block, ``lax.map`` (sequential) over the ``g`` blocks:
    one dispatch for many masks while the working set stays one chunk.
    """

    def one(mask):
        dec = code.decode_with_status(yt, mask)
        err = (dec.value - fx).reshape(fx.shape[0], -1)
        return jnp.sum(err * err) / fx.shape[0], dec.status

    return jax.lax.map(jax.vmap(one), masks)


def auto_chunk_size(num_workers: int, out_size: int) -> int:
    """Masks per vmapped block: a power of two in [1, 1024].

    Two budgets (float64 bytes): each scan step of the banded decoder touches about
    ``48 (m + 2)`` bytes per mask, kept within 128 KiB so a step stays in cache (measured on CPU,
    N = 100, m = 10: ~100k masks/s at 128 masks per block, ~20k at 2048); and the backward pass
    stores about ``8 N (3 (m + 2) + 6)`` bytes per mask, kept within 256 MiB per block so memory
    is bounded for any N.
    """
    cache_chunk = (128 << 10) // (48 * (out_size + 2))
    memory_chunk = (256 << 20) // (8 * num_workers * (3 * (out_size + 2) + 6))
    chunk = max(1, min(cache_chunk, memory_chunk, 1024))
    return int(1 << (chunk.bit_length() - 1))


def _placement(devices: list) -> tuple[Callable, Callable]:
    """Functions placing a mask block (sharded on its chunk axis) and replicated operands."""
    if len(devices) == 1:
        dev = devices[0]
        return (lambda a: jax.device_put(a, dev)), (lambda t: jax.device_put(t, dev))
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.asarray(devices), ("p",))
    by_mask = NamedSharding(mesh, P(None, "p", None))
    replicated = NamedSharding(mesh, P())
    return (lambda a: jax.device_put(a, by_mask)), (lambda t: jax.device_put(t, replicated))


def monte_carlo_loss(
    code: Any,
    f: Callable,
    x: ArrayLike,
    masks: Bool[ArrayLike, "p n"],
    *,
    chunk_size: int | None = None,
    return_status: bool = False,
    progress: bool = False,
    devices: Sequence[jax.Device] | None = None,
) -> Float[np.ndarray, " p"] | MonteCarloResult:
    """Per-pattern loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` over a batch of straggler masks.

    Encodes ``x`` once, applies ``f`` (one input → one output, vmapped) once to the ``N`` coded
    inputs and once to the ``K`` true inputs, then decodes all ``M`` masks batched with
    ``jax.vmap`` in chunks of ``chunk_size`` masks, up to 64 chunks per compiled call (the last
    call is padded with all-live masks), so memory is bounded for any ``M`` (O(chunk · N · m) for
    the banded decoder, O(chunk · N²) for the kernel one) and there is one compilation per
    shape: new masks, new λs or new nodes reuse it.

    Args:
        code: any gcc_jax code (``encode`` / ``decode_with_status``).
        f: the worker function, one input of shape ``x.shape[1:]`` → one output.
        x: inputs, shape ``(K, ...)``.
        masks: boolean ``(M, N)``; ``True`` = the worker returned in time.
        chunk_size: masks per vmapped block; default :func:`auto_chunk_size`.
        return_status: also return each pattern's :class:`gcc_jax.Status` instead of raising.
        progress: show a progress bar over chunks.
        devices: devices to shard the mask batch over (data parallel: each device decodes
            ``chunk_size`` masks of every block; the code and worker outputs are replicated).
            Default: all devices of JAX's default backend. Results do not depend on it.

    Returns:
        NumPy array ``(M,)`` of losses, or a :class:`MonteCarloResult` ``(loss, status)`` when
        ``return_status`` (failed patterns then have loss NaN and a non-zero status).

    Raises:
        ValueError/TypeError: wrong shapes or dtypes.
        GCCValueError: (unless ``return_status``) some pattern has fewer than 2 live workers,
            a live worker returned NaN/Inf, or ``f(x)`` itself is not finite.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=5, num_workers=30)
        >>> x = jnp.linspace(-1.0, 1.0, 5)[:, None]
        >>> masks = gcc.sample_masks(jax.random.key(0), 30, num=64, stragglers=3)
        >>> loss = gcc.monte_carlo_loss(code, jnp.sin, x, masks)
        >>> loss.shape, bool(loss.max() < 1e-4)
        ((64,), True)
    """
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
    ):
        raise ValueError(f"`chunk_size` must be a positive int or None; got {chunk_size!r}")
    x = jnp.asarray(x)
    n = code.num_workers
    masks = _check_masks(masks, n)
    xt, yt = _apply_workers(code, f, x)
    fx = jax.vmap(f)(x)
    if not bool(jnp.all(jnp.isfinite(fx))):
        raise GCCValueError("`f(x)` on the uncoded inputs is not finite; the loss is undefined")
    if yt.shape[1:] != fx.shape[1:]:
        raise ValueError(f"f gave shape {yt.shape[1:]} on coded inputs, {fx.shape[1:]} on x")
    num = masks.shape[0]
    out_size = int(np.prod(yt.shape[1:]))
    chunk = chunk_size if chunk_size is not None else auto_chunk_size(n, out_size)
    devices = list(jax.devices()) if devices is None else list(devices)
    if not devices:
        raise ValueError("`devices` must name at least one device")
    chunk = min(chunk, max(math.ceil(num / len(devices)), 1)) * len(devices)
    groups = min(64, 1 << max(math.ceil(num / chunk) - 1, 0).bit_length())  # power of two
    step = chunk * groups
    place_masks, place_rest = _placement(devices)
    code, yt, fx = place_rest((code, yt, fx))
    losses = np.empty((num,), dtype=np.result_type(np.asarray(yt).dtype, np.float32))
    statuses = np.empty((num,), dtype=np.int32)
    starts = range(0, num, step)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, total=math.ceil(num / step), desc="decoding masks", unit="block")
    for start in starts:
        block = np.asarray(masks[start : start + step])
        size = block.shape[0]
        if size < step:  # pad with all-live rows: keeps one compiled shape
            block = np.concatenate([block, np.ones((step - size, n), bool)], axis=0)
        loss, status = _loss_blocks(code, yt, fx, place_masks(block.reshape(groups, chunk, n)))
        losses[start : start + size] = np.asarray(loss).reshape(-1)[:size]
        statuses[start : start + size] = np.asarray(status).reshape(-1)[:size]
    if return_status:
        return MonteCarloResult(losses, statuses)
    if statuses.any():
        bad = np.flatnonzero(statuses)
        flags = describe_status(int(np.bitwise_or.reduce(statuses[bad])))
        raise GCCValueError(
            f"monte_carlo_loss: {bad.size} of {num} patterns could not be decoded ({flags}); "
            f"first bad pattern index {bad[0]}. Pass return_status=True to get per-pattern "
            "losses (NaN for those) with their statuses."
        )
    return losses
