"""The code contract: :class:`AbstractCode` (every code) and :class:`AbstractLinearCode`.

Every code in gcc_jax is a frozen dataclass registered as a JAX pytree that subclasses
:class:`AbstractCode`, in the manner of lineax's ``AbstractLinearSolver``: the abstract methods
say what a code *is* (an encoder, a decoder that reports value problems as data, its sizes); the
concrete ones are shared by every code (``decode`` raising on a bad status, ``worker_outputs``,
``available``). Everything that evaluates a code — :func:`gcc_jax.coded_apply`,
:func:`gcc_jax.monte_carlo_loss`, :func:`gcc_jax.worst_case_mask`, tuning, the experiments, the
distributed service — uses only this interface.
"""

import abc
import functools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import (
    as_int,
    as_mask,
    as_mask_rows,
    check_inputs,
    check_node_leaves,
    check_outputs,
    data_status,
    float_dtype,
    input_status,
    map_chunks,
)
from .._core.pytree import AbstractVar, missing_abstract_vars, pytree_dataclass
from .._core.status import Status, combine, is_concrete, raise_if_bad
from .._core.types import Array, ArrayLike, Bool, Float, Int, Shaped
from ..spline import chebyshev_nodes, check_chebyshev_count

__all__ = [
    "AbstractCode",
    "AbstractErrorLocatingCode",
    "AbstractLinearCode",
    "AbstractNodeCode",
    "AbstractVar",
    "Decoded",
    "Encoded",
    "check_code",
    "jit_method",
    "pytree_dataclass",
]


class Decoded(NamedTuple):
    """A decoded estimate and its :class:`gcc_jax.Status` flags (0 = valid).

    Attributes:
        value: estimates of ``f(x_k)``, shape ``(k, *out)``; NaN where ``status != 0``.
        status: int32 scalar (one per pattern under ``vmap``).
    """

    value: Array
    status: Int[Array, ""]


class Encoded(NamedTuple):
    """Coded inputs and their :class:`gcc_jax.Status` flags (0 = valid).

    Attributes:
        value: the ``n`` coded inputs, shape ``(n, *d)``; NaN where ``status != 0``.
        status: int32 scalar: ``NONFINITE_DATA`` (NaN/Inf in ``x``), ``NEGATIVE_LAM``,
            ``BAD_NODES``, ``NONFINITE_RESULT``.
    """

    value: Array
    status: Int[Array, ""]


def _numeric_array(a) -> bool:
    """Whether ``a`` is a real or boolean array or scalar (what ``jit`` takes as an argument)."""
    if isinstance(a, jax.Array | np.ndarray | np.generic):
        return a.dtype.kind in "biuf"
    return isinstance(a, bool | int | float)


def jit_method(method):
    """Decorator: an eager call ``code.method(*arrays)`` runs as one compiled program.

    The code is passed to ``jax.jit`` as a pytree argument, so the program is compiled once per
    code structure (static fields, leaf shapes) and argument shapes: new λs, nodes, parameters,
    masks or outputs reuse it. Called eagerly without it, a method dispatches its operations one
    at a time and traces again any loop or closure it builds per call. Under an outer
    ``jit``/``vmap``/``grad`` the inner ``jit`` is traced inline, so nothing changes there.
    Calls with keyword arguments or with a non-array argument (a list, a string) run the method
    itself, so that its own checks name the argument. The compiled function is the wrapper's
    ``jitted`` attribute (its ``_cache_size()`` counts compilations).

    Each method opts in explicitly, and an override is compiled only if it is decorated too::

        @jit_method
        def decode_with_status(self, y, mask): ...
    """
    jitted = jax.jit(method)

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not kwargs and all(_numeric_array(a) for a in args):
            return jitted(self, *args)
        return method(self, *args, **kwargs)

    wrapper.jitted = jitted
    return wrapper


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class AbstractCode(abc.ABC):
    """The interface every code implements (GCC, BACC, LCC, uncoded, replication, ParM, learned).

    A code maps ``k`` inputs to ``n`` worker inputs (:meth:`encode`) and ``n`` worker outputs,
    of which the live ones are flagged by a boolean ``mask``, back to ``k`` estimates of
    ``f(x_k)`` (:meth:`decode_with_status`). Subclasses are frozen dataclasses registered as
    pytrees: sizes and method names are static fields, λs, nodes and learned parameters array
    leaves (new values never recompile; gradients flow to them).

    Abstract: ``encode_with_status``, ``decode_with_status`` and the sizes ``num_inputs`` /
    ``num_workers`` (static dataclass fields or properties; checked when a subclass is defined).
    Concrete defaults: :meth:`encode` and :meth:`decode` (raise :class:`gcc_jax.GCCValueError` on
    a bad status in eager calls), :meth:`worker_outputs` (``vmap(f)(encode(x))``; ParM and learned
    codes override it with their parity workers) and :meth:`available` (all estimates usable).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=8)
        >>> isinstance(code, gcc.AbstractCode), isinstance(code, gcc.AbstractLinearCode)
        (True, True)
        >>> y = code.worker_outputs(jnp.sin, jnp.linspace(-1.0, 1.0, 3)[:, None])
        >>> code.decode(y, jnp.ones(8, bool)).shape
        (3, 1)
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__name__.startswith("Abstract"):
            return
        missing = missing_abstract_vars(cls)
        if missing:
            names = ", ".join(f"`{name}`" for name in missing)
            raise TypeError(
                f"{cls.__name__} must define {names} (a static field, a property or a class "
                "constant; declared as AbstractVar on its base)"
            )

    num_inputs: AbstractVar[int]
    """``k``: the number of inputs (a static field or a property)."""

    num_workers: AbstractVar[int]
    """``n``: the number of workers (a static field or a property)."""

    min_live: AbstractVar[int]
    """The fewest live workers with which a pattern decodes with status OK.

    With fewer, every pattern's status carries a flag (``TOO_FEW_LIVE``, or the code's own:
    ``BELOW_RECOVERY_THRESHOLD``, ``TOO_MANY_ERASURES``) and no estimate is available. ``2`` for
    a smoothing-spline decoder, ``1`` for Berrut's interpolant, the recovery threshold for LCC
    and the error-locating codes, ``k`` for ParM and learned codes (``r`` of ``k + r`` may be
    missing), ``0`` for uncoded computation and replication (a missing result is a fill value).
    """

    is_exact: ClassVar[bool] = False
    """Whether an estimate is final as soon as :meth:`available` marks it (a class constant).

    ``True`` when the decoded value of input ``k`` depends only on results that give
    ``f(x_k)`` without approximation once ``available(mask)[k]`` holds: a systematic copy of
    ``x_k`` (uncoded computation, replication, ParM's base workers) or a reconstruction that
    more results would not change (ParM's parity decoding, which needs all the other ``k − 1``
    of its group). Then waiting for more workers cannot change the estimate, and the
    distributed service (:class:`gcc_jax.distributed.CodedInferenceService`) releases it at
    once. ``False`` (the default) for approximate decoders — GCC, BACC, LCC (exact only for a
    polynomial ``f`` of its degree), learned codes, the robust and error-locating decoders —
    whose every estimate changes with every further result (for a robust decoder: is vetted
    by it): the service releases them at its wait rule. ``False`` is always safe; it only
    makes the service wait longer.
    """

    max_liars: ClassVar[int] = 0
    """How many *liars* per decode the decoder locates and corrects: live workers that return a
    wrong but finite result (Byzantine workers, silent data corruption). A class constant, or a
    property where it depends on the code's settings.

    ``0`` (the default) means that every live result goes into the estimates unchecked: one
    liar changes them and nothing reports it (a straggler's NaN/Inf is always caught; a finite
    lie is not). The error-locating codes (ApproxIFER, LCC with error correction) correct
    their ``A = num_adversaries``; the robust spline decoder its trimming budget. The
    distributed service warns when its code has ``max_liars = 0`` and its executor checks no
    result (:class:`gcc_jax.distributed.CodedInferenceService`, ``on_liars``).
    """

    # -- encoder -------------------------------------------------------------------------------

    @abc.abstractmethod
    def encode_with_status(self, x: Shaped[ArrayLike, "k *d"]) -> Encoded:
        """Coded inputs ``(n, *d)`` with value problems reported as data (never raises on them)."""

    def encode(self, x: Shaped[ArrayLike, "k *d"]) -> Shaped[Array, "n *d"]:
        """The ``n`` coded inputs for ``x`` of shape ``(k, *d)``.

        Raises:
            ValueError/TypeError: wrong shapes, complex or non-numeric ``x``.
            GCCValueError: in eager calls, NaN/Inf in ``x`` or a bad parameter (negative λ,
                unsorted nodes). Under ``jit`` the value is NaN instead; use
                :meth:`encode_with_status` to get the status.
        """
        if is_concrete(x):  # a message naming `x` before the status is read
            check_inputs(x, self.num_inputs)
        out = self.encode_with_status(x)
        raise_if_bad(out.status, f"{type(self).__name__}.encode", self)
        return out.value

    def worker_outputs(self, f: Callable[[Array], Array], x: Shaped[ArrayLike, "k *d"]) -> Array:
        """What the ``n`` workers return when ``f`` is the workers' function: ``(n, *m)``.

        Default ``vmap(f)(encode(x))``. Codes whose workers run something else on some coded
        inputs (ParM's parity model, a learned code's parity workers) override this; every
        evaluator in gcc_jax obtains worker outputs through it.
        """
        return jax.vmap(f)(self.encode(x))

    # -- decoder -------------------------------------------------------------------------------

    @abc.abstractmethod
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Estimates ``(k, *m)`` of ``f(x_k)`` and a status; never raises on value problems.

        Only live workers (``mask[n] = True``) may influence the value or its gradient, whatever
        a straggler returned (NaN/Inf included). Use under ``jit``/``vmap`` over masks.
        """

    def decode_batch_with_status(
        self, y: Shaped[ArrayLike, "n *m"], masks: Bool[ArrayLike, "p n"]
    ) -> Decoded:
        """:meth:`decode_with_status` for every mask: values ``(p, k, *m)``, status ``(p,)``.

        Default ``vmap(decode_with_status)`` over the masks; a code with a batch-native decoder
        (``SplineCode``) overrides it with the same values. :meth:`decode_chunks` calls it once per
        chunk of masks.

        Example:
            >>> import jax, jax.numpy as jnp, gcc_jax as gcc
            >>> code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=8)
            >>> y = code.worker_outputs(jnp.sin, jnp.linspace(-1.0, 1.0, 3)[:, None])
            >>> masks = gcc.sample_masks(jax.random.key(0), 8, num=5, stragglers=2)
            >>> out = code.decode_batch_with_status(y, masks)
            >>> loop = jnp.stack([code.decode_with_status(y, m).value for m in masks])
            >>> out.value.shape, out.status.shape, bool(jnp.allclose(out.value, loop))
            ((5, 3, 1), (5,), True)
        """
        masks = as_mask_rows(masks, self.num_workers)
        return jax.vmap(lambda mask: self.decode_with_status(y, mask))(masks)

    def decode_chunks(
        self,
        y: Shaped[ArrayLike, "n *m"],
        chunks: Bool[ArrayLike, "g p n"],
        then: Callable[[Decoded], Any],
        state: Any = None,
    ) -> Any:
        """``then(decode_batch_with_status(y, chunk))`` for every chunk of masks, stacked.

        ``lax.map`` over the ``g`` chunks by default. A code may do once here what every chunk
        shares (``SplineCode``: the full fit that each mask's fit is a rank-S downdate of, and
        the choice of solver, see :func:`gcc_jax.spline.decode_path`); the values do not depend
        on how the masks are cut into chunks. ``then`` (a pure function of one chunk's decode,
        e.g. its losses) runs per chunk, so only its outputs are kept for all chunks.
        :class:`gcc_jax.MaskEvaluator` calls it once per block, inside its compiled call.
        ``state`` is what :meth:`decode_init` returned for these masks (or ``None``, which
        every code accepts): it never changes the values; derivatives do not flow through its
        arrays.

        Example:
            >>> import jax, jax.numpy as jnp, gcc_jax as gcc
            >>> code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=8)
            >>> y = code.worker_outputs(jnp.sin, jnp.linspace(-1.0, 1.0, 3)[:, None])
            >>> masks = gcc.sample_masks(jax.random.key(0), 8, num=10, stragglers=2)
            >>> values = code.decode_chunks(y, masks.reshape(2, 5, 8), lambda d: d.value)
            >>> ref = code.decode_batch_with_status(y, masks).value
            >>> values.shape, bool(jnp.allclose(values.reshape(ref.shape), ref))
            ((2, 5, 3, 1), True)
        """
        del state  # no shared work to reuse
        chunks = as_mask_rows(chunks, self.num_workers, "chunks", chunked=True)
        return map_chunks(lambda masks: then(self.decode_batch_with_status(y, masks)), chunks)

    def decode_init(self, masks: Bool[np.ndarray, "p n"]) -> Any:
        """The work for :meth:`decode_chunks` that depends on the code and the masks' number of
        stragglers but not on the outputs ``y``: a pytree of arrays, or ``None`` (the default:
        nothing to precompute).

        The init half of an init/compute split (as lineax's ``solver.init(operator)`` before
        ``solver.compute(state, vector)``): the caller decides when to make it and reuses it
        for every :meth:`decode_chunks` call over masks with that number of stragglers.
        ``masks`` is a host array whose first row stands for the masks to be decoded. The state
        never changes the values: a code ignores a state that does not fit the call, and
        ``decode_chunks(..., state=None)`` is always valid. ``SplineCode`` returns the
        downdate's full fit without its outputs (a :class:`gcc_jax.spline.DowndatePlan`),
        made once per code object and straggler count. What the caller does with the state's
        type (chunk sizes, compiler options) is its own backend policy
        (:func:`gcc_jax.evaluation.policy_for`).

        Example:
            >>> import numpy as np, gcc_jax as gcc
            >>> code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=8)
            >>> code.decode_init(np.ones((4, 8), bool)) is None
            True
        """
        del masks
        return None

    def status_message(self, flag: Status) -> str | None:
        """What :func:`gcc_jax.describe_status` says for ``flag`` about this code, naming what
        it needs; ``None`` leaves the flag's generic message.

        The default names :attr:`min_live` for ``TOO_FEW_LIVE``; codes with a recovery
        threshold or a number of parities override it for their flags.

        Example:
            >>> import gcc_jax as gcc
            >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8)
            >>> code.status_message(gcc.Status.TOO_FEW_LIVE)
            'fewer than 2 live workers (SplineCode needs at least 2 live workers to decode)'
        """
        if flag == Status.TOO_FEW_LIVE and self.min_live >= 1:
            return live_message(self, self.min_live)
        return None

    def decode(self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]) -> Array:
        """Estimates ``(k, *m)`` of ``f(x_k)`` from worker outputs ``y`` ``(n, *m)``.

        Raises:
            ValueError/TypeError: wrong shapes, a non-boolean mask, complex outputs.
            GCCValueError: in eager calls, a value problem (see :meth:`decode_with_status` and
                :class:`gcc_jax.Status`). Under ``jit``/``vmap`` the value is NaN instead.
        """
        out = self.decode_with_status(y, mask)
        raise_if_bad(out.status, f"{type(self).__name__}.decode", self)
        return out.value

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Which estimates carry information about their input under ``mask``.

        Coded schemes estimate every input (``True`` everywhere, the default); uncoded
        computation and replication return ``False`` for an input all of whose copies
        straggled (its estimate is the fill value).
        """
        _, mask = check_outputs(jnp.zeros((self.num_workers,)), mask, self.num_workers)
        return jnp.ones((self.num_inputs,), bool)


class AbstractLinearCode(AbstractCode):
    """A code whose encoder and decoder are matrices: ``X~ = E X`` and ``Y^ = D(mask) Y~``.

    Abstract: :meth:`encoder_matrix_with_status` and :meth:`decoder_matrix_with_status`.
    Shared: :meth:`encode_with_status` (``E X``), :meth:`decode_with_status` (``D(mask) Y~`` with
    the straggler rows neutralised before the product), the raising ``encoder_matrix`` /
    ``decoder_matrix``. A subclass may override ``decode_with_status`` with a faster solve that
    gives the same value (``SplineCode`` fits the spline per column when there are few columns).
    """

    @abc.abstractmethod
    def encoder_matrix_with_status(self) -> tuple[Float[Array, "n k"], Int[Array, ""]]:
        """``E`` of shape ``(n, k)`` and its status."""

    @abc.abstractmethod
    def decoder_matrix_with_status(
        self, mask: Bool[ArrayLike, " n"]
    ) -> tuple[Float[Array, "k n"], Int[Array, ""]]:
        """``D(mask)`` of shape ``(k, n)`` (straggler columns zero) and its status."""

    def encoder_matrix(self) -> Float[Array, "n k"]:
        """``E`` with ``X~ = E X`` (raises on a bad status in eager calls)."""
        e, status = self.encoder_matrix_with_status()
        raise_if_bad(status, f"{type(self).__name__}.encoder_matrix", self)
        return e

    def decoder_matrix(self, mask: Bool[ArrayLike, " n"]) -> Float[Array, "k n"]:
        """``D(mask)`` with ``Y^ = D Y~`` (raises on a bad status in eager calls)."""
        d, status = self.decoder_matrix_with_status(mask)
        raise_if_bad(status, f"{type(self).__name__}.decoder_matrix", self)
        return d

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, "k *d"]) -> Encoded:
        """``X~ = E X`` over the leading axis of ``x`` (any trailing shape)."""
        x = check_inputs(x, self.num_inputs)
        e, status = self.encoder_matrix_with_status()
        dtype = float_dtype(e, x)
        status = status | input_status(x)
        value = apply_rows(e.astype(dtype), x.astype(dtype))
        bad_value = ~jnp.all(jnp.isfinite(value)) & (status == 0)  # not a NaN of x's
        status = status | combine((bad_value, Status.NONFINITE_RESULT))
        return Encoded(jnp.where(status == 0, value, jnp.nan), status)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """``Y^ = D(mask) Y~``; straggler rows never reach the product (NaN-safe)."""
        return self.decode_by_matrix_with_status(y, mask)

    def decode_by_matrix_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """The matrix form of the decoder, shared by every linear code.

        One ``(k, n)`` solve and a product: the cheap form when ``y`` has many columns (many
        outputs or many jobs decoded with one pattern).
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        n = self.num_workers
        y_flat = y.reshape(n, -1)
        d, status = self.decoder_matrix_with_status(mask)
        dtype = float_dtype(d, y_flat)
        status = status | data_status(y_flat, mask)
        safe = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0).astype(dtype)
        d = jnp.where(status == 0, d, 0).astype(dtype)
        value = jnp.matmul(d, safe, precision=jax.lax.Precision.HIGHEST)
        status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
        value = jnp.where(status == 0, value, jnp.nan)
        return Decoded(value.reshape((d.shape[0], *y.shape[1:])), status)


class NodeSizes:
    """``num_inputs`` and ``num_workers`` read from the node leaves ``alpha`` (``k``) and
    ``beta`` (``n``): shared by every code built on interpolation nodes."""

    @property
    def num_inputs(self) -> int:
        """``k``: the number of input nodes ``alpha``."""
        return self.alpha.shape[0]

    @property
    def num_workers(self) -> int:
        """``n``: the number of worker nodes ``beta``."""
        return self.beta.shape[0]


class ParitySizes:
    """``num_workers = k + r`` and ``min_live = k``, read from ``num_inputs`` (``k``) and
    ``num_parities`` (``r``), and the ``TOO_MANY_ERASURES`` message naming ``r``: shared by the
    codes with ``k`` systematic workers and ``r`` parity workers (ParM, the learned code)."""

    @property
    def num_workers(self) -> int:
        """``k + r``: ``k`` workers on the inputs and ``r`` on the parities."""
        return self.num_inputs + self.num_parities

    @property
    def min_live(self) -> int:
        """``k`` of the ``k + r`` workers."""
        return self.num_inputs

    def status_message(self, flag: Status) -> str | None:
        """Names ``r`` for ``TOO_MANY_ERASURES`` (:meth:`gcc_jax.AbstractCode.status_message`)."""
        if flag == Status.TOO_MANY_ERASURES:
            return erasure_message(self, self.num_parities)
        return super().status_message(flag)


class AbstractNodeCode(NodeSizes, AbstractLinearCode):
    """A linear code built on interpolation nodes: ``alpha`` (``k`` inputs), ``beta`` (``n``).

    Shared by the node-based codes (GCC's splines, BACC's Berrut interpolant, LCC's
    polynomials): the sizes come from the node leaves, the nodes are checked when the code is
    built (1-D, at least 2, strictly increasing and finite), decoding needs :attr:`min_live`
    live workers, and :meth:`chebyshev_nodes` gives the papers' placement. Subclasses declare
    ``alpha`` and ``beta`` as array fields and define ``min_live``.
    """

    alpha: AbstractVar[Float[ArrayLike, " k"]]  # a JAX or NumPy array
    beta: AbstractVar[Float[ArrayLike, " n"]]

    def check_nodes(self) -> None:
        """Static checks on ``alpha``/``beta`` (value checks only on concrete arrays)."""
        check_node_leaves(self, ("alpha", "beta"))

    @staticmethod
    def chebyshev_nodes(num_inputs, num_workers, dtype=None) -> tuple[Array, Array]:
        """The papers' placement: ``alpha`` Chebyshev-1 (``k``), ``beta`` Chebyshev-2 (``n``).

        Both ascending; ``beta`` includes ``±1``. ``num_inputs, num_workers ≥ 2`` (any integral
        type); ``dtype`` defaults to JAX's default float. A count whose nodes would round to
        repeated values in ``dtype`` (float32: ``num_workers`` above 12,868,
        :func:`gcc_jax.spline.max_chebyshev_nodes`) raises a ``ValueError`` that names the
        largest one and the ways around it (float64, equispaced nodes).
        """
        num_inputs = as_int(num_inputs, "num_inputs", 2)
        num_workers = as_int(num_workers, "num_workers", 2)
        dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
        check_chebyshev_count(num_inputs, 1, dtype, "num_inputs")
        check_chebyshev_count(num_workers, 2, dtype, "num_workers")
        return (
            chebyshev_nodes(num_inputs, kind=1, dtype=dtype),
            chebyshev_nodes(num_workers, kind=2, dtype=dtype),
        )

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate when at least :attr:`min_live` workers are live, none otherwise."""
        mask = as_mask(mask, self.num_workers)
        return jnp.broadcast_to(jnp.sum(mask) >= self.min_live, (self.num_inputs,))


class AbstractErrorLocatingCode(NodeSizes, AbstractCode):
    """A code that locates up to ``A`` Byzantine workers and drops them before decoding.

    Shared by ApproxIFER and LCC with error correction: the sizes come from the node leaves
    ``alpha`` (``k``) and ``beta`` (``n``); an estimate is available once
    :attr:`recovery_threshold` workers are live (below it the status carries
    ``BELOW_RECOVERY_THRESHOLD``), so :attr:`min_live` is the recovery threshold;
    :meth:`locate` checks the outputs, zeroes dead and non-finite entries and calls the
    subclass's ``_locate`` without gradients (location is discrete). Subclasses declare
    ``alpha``, ``beta`` and ``num_adversaries`` fields and define ``recovery_threshold``,
    ``recovery_rule`` and ``_locate(y_flat, mask, dtype)``.
    """

    alpha: AbstractVar[Float[ArrayLike, " k"]]
    beta: AbstractVar[Float[ArrayLike, " n"]]
    num_adversaries: AbstractVar[int]
    """``A``: the number of workers located and dropped."""

    recovery_threshold: AbstractVar[int]
    """Live workers needed to locate ``A`` adversaries and decode."""

    recovery_rule: AbstractVar[str]
    """The formula of :attr:`recovery_threshold` in ``K``, ``A`` (and ``deg f``), for messages."""

    @property
    def max_liars(self) -> int:
        """``A``: the adversaries located and dropped (see :attr:`AbstractCode.max_liars`)."""
        return int(self.num_adversaries)

    @property
    def min_live(self) -> int:
        """:attr:`recovery_threshold`: below it no pattern decodes."""
        return self.recovery_threshold

    def status_message(self, flag: Status) -> str | None:
        """Names :attr:`recovery_threshold` and :attr:`recovery_rule` for
        ``BELOW_RECOVERY_THRESHOLD``; see :meth:`AbstractCode.status_message`."""
        if flag == Status.BELOW_RECOVERY_THRESHOLD:
            return recovery_message(self, self.recovery_rule)
        if flag == Status.TOO_FEW_LIVE:  # raised with no live worker at all
            return live_message(self, 1, "to decode at all")
        return super().status_message(flag)

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate once :attr:`recovery_threshold` workers are live, none otherwise."""
        mask = as_mask(mask, self.num_workers)
        ok = jnp.sum(mask) >= self.recovery_threshold
        return jnp.broadcast_to(ok, (self.num_inputs,))

    @jit_method
    def locate(self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]) -> Array:
        """The live workers declared adversarial, dead ones never.

        Boolean ``(n,)`` for codes that drop whole workers (ApproxIFER: the ``A`` with the most
        votes over the output coordinates), ``(n, m)`` for codes that locate per output
        coordinate ``m`` of the flattened outputs (LCC with error correction: ``A`` per column).
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        dtype = float_dtype(self.alpha, self.beta, y)
        y_flat = y.reshape(self.num_workers, -1).astype(dtype)
        y_flat = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)
        return self._locate(jax.lax.stop_gradient(y_flat), mask, dtype)

    @abc.abstractmethod
    def _locate(self, y_flat: Array, mask: Array, dtype) -> Array:
        """The located workers for flattened, cleaned outputs ``(n, m)``."""


def live_message(code: AbstractCode, need: int, what: str = "to decode") -> str:
    """``TOO_FEW_LIVE``'s message for a code that needs ``need`` live workers."""
    got = "no live worker" if need == 1 else f"fewer than {need} live workers"
    return f"{got} ({type(code).__name__} needs at least {_plural(need, 'live worker')} {what})"


def recovery_message(code: AbstractCode, rule: str) -> str:
    """``BELOW_RECOVERY_THRESHOLD``'s message for a code with a ``recovery_threshold``."""
    return (
        f"fewer live workers than {type(code).__name__}'s recovery threshold: it needs "
        f"{_plural(code.recovery_threshold, 'live worker')} ({rule})"
    )


def erasure_message(code: AbstractCode, num_parities: int) -> str:
    """``TOO_MANY_ERASURES``'s message for a code that recovers ``r`` missing outputs."""
    r = num_parities
    return (
        f"more than {_plural(r, 'output')} missing ({type(code).__name__} recovers at most "
        f"r = {r} unavailable outputs)"
    )


def apply_rows(matrix: Array, x: Array) -> Array:
    """``matrix @ x`` over the leading axis of ``x`` of any trailing shape."""
    flat = x.reshape(x.shape[0], -1)
    product = jnp.matmul(matrix, flat, precision=jax.lax.Precision.HIGHEST)
    return product.reshape((matrix.shape[0], *x.shape[1:]))


def check_code(code, name: str = "code"):
    """``code`` must be a :class:`gcc_jax.AbstractCode` (every code in gcc_jax is one)."""
    if not isinstance(code, AbstractCode):
        raise TypeError(
            f"`{name}` must be a gcc_jax code (a subclass of gcc_jax.AbstractCode, e.g. "
            f"gcc_jax.SplineCode.chebyshev(...)); got {type(code).__name__}"
        )
    return code
