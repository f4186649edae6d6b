"""The one mask evaluator: many straggler patterns over precomputed worker outputs.

Every batch of masks in gcc_jax — :func:`gcc_jax.monte_carlo_loss`, the worst-case search,
tuning's held-out evaluation, the experiments — is decoded here. Worker outputs ``yt`` and
targets ``fx`` are computed once (by :meth:`AbstractCode.worker_outputs`); the masks are cut into
blocks of ``groups × chunk`` rows, each block is one compiled call (``lax.map`` over ``groups``
of a ``vmap`` over ``chunk`` masks, so the working set stays one chunk), the last block is
padded with copies of its first mask (one compiled shape), and blocks can be sharded over
devices on their chunk axis. Per-pattern statuses always come back alongside the values.
"""

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.cache import IdentityCache
from .._core.checks import as_int, as_masks
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ..codes import AbstractCode
from ._order import check_order
from ._policy import BackendPolicy, device_policy

__all__ = [
    "MaskEvaluator",
    "batch_losses",
    "evaluate_masks",
    "mask_losses",
    "pattern_loss",
]


def pattern_loss(
    code: AbstractCode, yt: Array, fx: Array, mask: Bool[Array, " n"]
) -> tuple[Array, Array]:
    """Loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` of one pattern and its status (NaN if not OK).

    The error of a pattern whose status is not OK never enters the arithmetic, so gradients
    through the other patterns stay finite.
    """
    dec = code.decode_with_status(yt, mask)
    ok = dec.status == 0
    err = jnp.where(ok, dec.value - fx, 0).reshape(-1)
    loss = jnp.sum(err * err) / fx.shape[0]
    return jnp.where(ok, loss, jnp.nan), dec.status


def mask_losses(
    code: AbstractCode, yt: Array, fx: Array, masks: Bool[Array, "p n"]
) -> tuple[Float[Array, " p"], Int[Array, " p"]]:
    """Per-pattern loss and status for a batch of masks: the jittable core of Monte Carlo.

    ``(1/K) Σ_k ‖f^_p(x_k) − f(x_k)‖²`` for every row ``p`` of ``masks``, with
    ``f^_p = code.decode_with_status(yt, masks[p])``; NaN where the status is not OK. A pure
    function (``vmap`` of :func:`pattern_loss`): use it inside your own ``jit``/``grad``; for
    many masks with bounded memory use :func:`gcc_jax.monte_carlo_loss` or
    :class:`MaskEvaluator`.

    Args:
        code: any :class:`gcc_jax.AbstractCode`.
        yt: worker outputs ``(n, *m)`` (``code.worker_outputs(f, x)``).
        fx: targets ``(k, *m)`` (``jax.vmap(f)(x)``).
        masks: boolean ``(p, n)``.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=16)
        >>> x = jnp.linspace(-1.0, 1.0, 4)[:, None]
        >>> yt, fx = code.worker_outputs(jnp.sin, x), jax.vmap(jnp.sin)(x)
        >>> masks = gcc.sample_masks(jax.random.key(0), 16, num=8, stragglers=2)
        >>> loss, status = jax.jit(gcc.mask_losses)(code, yt, fx, masks)
        >>> loss.shape, int(status.max()), bool(loss.max() < 1e-4)
        ((8,), 0, True)
    """
    return jax.vmap(lambda mask: pattern_loss(code, yt, fx, mask))(masks)


def batch_losses(
    code: AbstractCode, yt: Array, fx: Array, masks: Bool[Array, "p n"]
) -> tuple[Float[Array, " p"], Int[Array, " p"]]:
    """:func:`mask_losses` through the code's batched decoder (``decode_batch_with_status``).

    The same values as ``vmap(pattern_loss)``; a code with a batch-native decoder (``SplineCode``)
    decodes the whole chunk in one pass.
    """
    return _losses(code.decode_batch_with_status(yt, masks), fx)


def _losses(dec, fx: Array) -> tuple[Array, Array]:
    """Per-pattern loss and status from a batch of decodes (NaN where the status is not OK)."""
    ok = dec.status == 0
    err = jnp.where(ok.reshape((-1,) + (1,) * (dec.value.ndim - 1)), dec.value - fx[None], 0)
    loss = jnp.sum(err.reshape(err.shape[0], -1) ** 2, axis=1) / fx.shape[0]
    return jnp.where(ok, loss, jnp.nan), dec.status


def blocks_fn(per_mask, treedef, leaves, yt, fx, masks, state):
    """``per_mask`` over masks ``(g, chunk, n)``: ``lax.map`` over ``g``, ``vmap`` over chunks.

    The code comes as its structure (static) and its array leaves: it is rebuilt here, under the
    trace, where its constructor's checks of concrete values do not run again. The default loss
    goes through the code's batched decoder instead of ``vmap(per_mask)``, over the whole block
    (:meth:`AbstractCode.decode_chunks`, with the code's :meth:`AbstractCode.decode_init` state
    for these masks).
    """
    code = jax.tree.unflatten(treedef, leaves)
    if per_mask is pattern_loss:
        return code.decode_chunks(yt, masks, lambda dec: _losses(dec, fx), state)
    return jax.lax.map(jax.vmap(lambda mask: per_mask(code, yt, fx, mask)), masks)


_blocks = jax.jit(blocks_fn, static_argnames=("per_mask", "treedef"))


@functools.cache
def _mesh(devices: tuple[jax.Device, ...]) -> jax.sharding.Mesh:
    """The one-axis mesh (``"p"``, the chunk axis) over ``devices``."""
    return jax.sharding.Mesh(np.asarray(devices), ("p",))


@functools.cache
def _blocks_on(
    devices: tuple[jax.Device, ...], options: tuple[tuple[str, Any], ...] = ()
) -> Callable:
    """:func:`blocks_fn` compiled for ``devices`` with XLA ``options``
    (:meth:`BackendPolicy.compiler_options`). One jitted function per pair, so each still
    compiles once per shape.

    One device: the shared :data:`_blocks` when there are no options. Several: each device runs
    :func:`blocks_fn` on its own slice of every chunk (``shard_map`` over the chunk axis; the
    code, outputs and targets replicated), so a device never waits for another: its chunk's
    decoder choices (the downdate's per-chunk gates) and its batched decoder's shared fit are
    its own, and no value crosses devices until the losses come back (under automatic
    partitioning every chunk's gate would be a reduction across the devices).
    """
    jit = functools.partial(jax.jit, static_argnames=("per_mask", "treedef"))
    if options:
        jit = functools.partial(jit, compiler_options=dict(options))
    if len(devices) == 1:
        return jit(blocks_fn) if options else _blocks
    from jax.sharding import PartitionSpec as P

    mesh = _mesh(devices)

    def sharded(per_mask, treedef, leaves, yt, fx, masks, state):
        return jax.shard_map(
            functools.partial(blocks_fn, per_mask, treedef),
            mesh=mesh,
            in_specs=(P(), P(), P(), P(None, "p", None), P()),
            out_specs=P(None, "p"),
            check_vma=False,  # no collectives: nothing to type-check across devices
        )(leaves, yt, fx, masks, state)

    return jit(sharded)


# the copies of codes' leaves and decode_init states on the evaluators' devices, by identity
_PLACED = IdentityCache(size=16)


def _placement(devices: list) -> tuple[Callable, Callable]:
    """Functions placing a mask block (sharded on its chunk axis) and replicated operands.

    The operands (the code's leaves, the outputs, the targets) are replicated onto ``devices``
    once per evaluator, unless they are JAX arrays already placed so; the compiled call then
    takes them as they are (left on JAX's default device, every block's call would move them
    again). The code's leaves are placed rather than the code rebuilt on the devices, which
    would re-run its validation. ``cached=True`` (the code's leaves, its ``decode_init`` state)
    keeps the copies for as long as the arrays copied live (:mod:`gcc_jax._core.cache`), so
    evaluators built for the same code do not copy it again.
    """
    if len(devices) == 1:
        by_mask = replicated = jax.sharding.SingleDeviceSharding(devices[0])
    else:
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        mesh = _mesh(tuple(devices))
        by_mask = NamedSharding(mesh, P(None, "p", None))
        replicated = NamedSharding(mesh, P())

    def place(tree):
        if all(
            isinstance(a, jax.Array) and a.sharding.is_equivalent_to(replicated, a.ndim)
            for a in jax.tree.leaves(tree)
        ):
            return tree
        return jax.device_put(tree, replicated)

    def place_rest(tree, cached: bool = False):
        if cached:  # found by identity first, before any sharding check
            key = (jax.tree.structure(tree), tuple(devices))
            return _PLACED(jax.tree.leaves(tree), key, lambda: place(tree))
        return place(tree)

    return (lambda a: jax.device_put(a, by_mask)), place_rest


class MaskEvaluator:
    """Decodes batches of masks over fixed worker outputs; the one mask loop of gcc_jax.

    ``evaluator(masks)`` returns ``per_mask`` of every row of ``masks`` as NumPy arrays with a
    leading axis ``p`` (by default ``(loss, status)``, see :func:`pattern_loss`). One compiled
    call per block shape; new masks never recompile, and neither do a new code of the same
    structure, new outputs or new targets of the same shapes.

    Args:
        code: any :class:`gcc_jax.AbstractCode`.
        yt: worker outputs ``(n, *m)`` (any trailing shape the code decodes; several jobs as
            extra trailing axes).
        fx: targets, passed unchanged to ``per_mask`` (any pytree it understands; the default
            wants ``f(x)`` of shape ``(k, *m)``).
        per_mask: ``per_mask(code, yt, fx, mask) -> (values..., status)``, a pure function of one
            mask whose last output is the int32 status; hashable (a module-level function).
        chunk_size: masks per vmapped chunk (per device); default the devices' backend policy
            (:func:`gcc_jax.evaluation.device_policy`: their platform's, sized by their memory):
            :func:`auto_chunk_size`, narrower where the policy asks for it given the code's
            :meth:`AbstractCode.decode_init` state for the masks of each call.
        devices: devices to shard each block over (data parallel on the chunk axis); default
            all devices of JAX's default backend. Results do not depend on it.
        progress: show a progress bar (stderr) over blocks.
        one_shape: every call runs blocks of exactly ``chunk_size`` masks (one chunk per
            block, the last padded), so the evaluator compiles once whatever the batch sizes:
            for costly ``per_mask`` functions whose compilation outweighs the padding.
        order: the permutation the inputs were encoded in (``yt`` from
            ``code.worker_outputs(f, x[order])``) when ``fx`` is in the caller's order: every
            leaf of ``fx`` is then taken as ``leaf[order]`` (along its leading axis ``k``), so
            estimates and targets line up.

    Attributes:
        count: patterns evaluated so far.
    """

    def __init__(
        self,
        code: AbstractCode,
        yt: Float[ArrayLike, "n *m"],
        fx: Any,
        *,
        per_mask: Callable = pattern_loss,
        chunk_size: int | None = None,
        devices: Sequence[jax.Device] | None = None,
        progress: bool = False,
        one_shape: bool = False,
        order: Int[ArrayLike, " k"] | None = None,
    ):
        self.num_workers = as_int(code.num_workers, "code.num_workers", 1)
        order = check_order(order, code.num_inputs)
        if order is not None:
            fx = jax.tree.map(lambda a: jnp.take(jnp.asarray(a), order, axis=0), fx)
        yt = jnp.asarray(yt)
        if yt.ndim < 1 or yt.shape[0] != self.num_workers:
            raise ValueError(
                f"`yt` must have one row per worker (n={self.num_workers}); got {yt.shape}"
            )
        devices = list(jax.devices()) if devices is None else list(devices)
        if not devices:
            raise ValueError("`devices` must name at least one device")
        self.devices = devices
        self.policy: BackendPolicy = device_policy(devices)
        self._out_size = max(1, math.prod(yt.shape[1:]))
        self._auto_chunk = chunk_size is None
        if chunk_size is None:
            chunk_size = self.policy.chunk_size(self.num_workers, self._out_size)
        self.chunk = as_int(chunk_size, "chunk_size", 1)
        self.per_mask = per_mask
        self.progress = progress
        self.one_shape = bool(one_shape)
        self._place_masks, self._place_rest = _placement(devices)
        self.yt, self.fx = self._place_rest((yt, fx))
        self.code = code
        self.count = 0

    @property
    def code(self) -> AbstractCode:
        """The code decoded with; assign a code of the same structure (new λs, nodes) to reuse
        the compiled blocks (its array leaves are placed on the evaluator's devices)."""
        return self._code

    @code.setter
    def code(self, code: AbstractCode) -> None:
        leaves, self._treedef = jax.tree.flatten(code)
        self._leaves = self._place_rest(leaves, cached=True)
        self._code = code

    def _state_for(self, first: Bool[np.ndarray, "1 n"]) -> Any:
        """The code's :meth:`AbstractCode.decode_init` state for masks whose first row is
        ``first``, on the devices; ``None`` for a custom ``per_mask`` (only the default loss
        runs :meth:`AbstractCode.decode_chunks`) or where the policy does not precompute."""
        if self.per_mask is not pattern_loss or not self.policy.precompute:
            return None
        state = self.code.decode_init(first)
        return None if state is None else self._place_rest(state, cached=True)

    def _chunk_for(self, first: Bool[np.ndarray, "1 n"]) -> int:
        """Masks per chunk and device for a call whose first mask is ``first`` (a host row):
        ``chunk_size`` if the caller gave one, else the policy's for the code's state for these
        masks (:meth:`BackendPolicy.chunk_size`)."""
        if not self._auto_chunk or self.one_shape or first.shape[0] == 0:
            return self.chunk
        state = self._state_for(first)
        return self.policy.chunk_size(self.num_workers, self._out_size, state)

    def __call__(self, masks: Bool[Any, "p n"]) -> tuple[np.ndarray, ...]:
        """``per_mask`` of every row of ``masks`` (NumPy, leading axis ``p``)."""
        masks = as_masks(masks, self.num_workers)
        if self.policy.host_masks or not isinstance(masks, jax.Array):
            # the whole batch on the host once (the CPU's policy): JAX keeps an array's host
            # copy, so a batch of masks passed again is not copied again (slicing it on a CPU
            # device would copy each block every call)
            masks = np.asarray(masks)
        # else (an accelerator's policy) device-resident masks stay where they are: each block
        # is sliced and padded there, and only the blocks' first rows come to the host
        num, n = masks.shape
        ndev = len(self.devices)
        # a power of two >= 16 (or the chunk size) masks per chunk: batches of nearby sizes
        # share one compiled shape (padding: at most 15 or one per mask extra decodes)
        per_dev = max(math.ceil(num / ndev), 16)
        per_dev = min(self._chunk_for(np.asarray(masks[:1])), 1 << (per_dev - 1).bit_length())
        chunk = per_dev * ndev
        groups = self.policy.groups(math.ceil(num / chunk), per_dev, n)
        if self.one_shape:
            chunk, groups = self.chunk * ndev, 1
        step = chunk * groups
        firsts = np.asarray(masks[::step])  # each block's first row, for decode_init (host)
        out = None
        starts = range(0, num, step)
        if self.progress:
            from .._core.progress import tqdm

            starts = tqdm(starts, total=math.ceil(num / step), desc="decoding masks", unit="block")
        xp = np if isinstance(masks, np.ndarray) else jnp  # where the masks are
        for start in starts:
            block = masks[start : start + step]
            size = block.shape[0]
            if size < step:  # pad (keeps one compiled shape) with copies of the first row, so
                # the padded chunk has the same number of stragglers as the others
                block = xp.concatenate([block, xp.repeat(block[:1], step - size, axis=0)], axis=0)
            first = firsts[start // step : start // step + 1]
            state = self._state_for(first)  # the host row decode_init reads
            options = tuple(sorted(self.policy.compiler_options(state).items()))
            run = _blocks_on(tuple(self.devices), options)
            res = run(
                self.per_mask,
                self._treedef,
                self._leaves,
                self.yt,
                self.fx,
                self._place_masks(block.reshape(groups, chunk, n)),
                state,
            )
            leaves, treedef = jax.tree_util.tree_flatten(res)
            if out is None:
                out = [
                    np.empty((num, *leaf.shape[2:]), dtype=np.asarray(leaf).dtype)
                    for leaf in leaves
                ]
                out_def = treedef
            for buf, leaf in zip(out, leaves, strict=True):
                buf[start : start + size] = np.asarray(leaf).reshape(step, *leaf.shape[2:])[:size]
        self.count += num
        if out is None:  # no masks: evaluate the shapes only
            shapes = jax.eval_shape(
                lambda: jax.vmap(lambda m: self.per_mask(self.code, self.yt, self.fx, m))(
                    jnp.ones((1, n), bool)
                )
            )
            leaves, out_def = jax.tree_util.tree_flatten(shapes)
            out = [np.empty((0, *leaf.shape[1:]), leaf.dtype) for leaf in leaves]
        return jax.tree_util.tree_unflatten(out_def, out)


def evaluate_masks(
    code: AbstractCode,
    yt: Array,
    fx: Any,
    masks: Bool[Any, "p n"],
    *,
    per_mask: Callable = pattern_loss,
    chunk_size: int | None = None,
    devices: Sequence[jax.Device] | None = None,
    progress: bool = False,
    order: Int[ArrayLike, " k"] | None = None,
):
    """``MaskEvaluator(code, yt, fx, ...)(masks)``: one batch of masks, bounded memory.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=16)
        >>> x = jnp.linspace(-1.0, 1.0, 4)[:, None]
        >>> yt, fx = code.worker_outputs(jnp.cos, x), jnp.cos(x)
        >>> masks = gcc.sample_masks(jax.random.key(0), 16, num=100, stragglers=3)
        >>> loss, status = gcc.evaluate_masks(code, yt, fx, masks, chunk_size=16)
        >>> loss.shape, status.shape, int(status.max())
        ((100,), (100,), 0)
    """
    evaluator = MaskEvaluator(
        code,
        yt,
        fx,
        per_mask=per_mask,
        chunk_size=chunk_size,
        devices=devices,
        progress=progress,
        order=order,
    )
    return evaluator(masks)
