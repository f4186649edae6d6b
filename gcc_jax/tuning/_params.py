"""Unconstrained parameters of a :class:`~gcc_jax.SplineCode`: log λs and node-gap logits.

Gradient-based tuning works on an unconstrained vector; the code's constraints (``λ ≥ 0``,
nodes strictly increasing inside ``[−1, 1]``) hold by construction of the map back to a code:

* ``λ = exp(log λ)`` for both smoothing parameters (``λ = 0`` is the limit ``log λ → −∞``; a
  code with ``λ = 0`` starts at ``lam_floor``);
* nodes as cumulative sums of softmax gaps. For ``n`` nodes strictly inside ``(−1, 1)``
  ("free ends"), ``z ∈ ℝ^{n+1}`` and

      t_i = −1 + 2 Σ_{j ≤ i} softmax(z)_j,   i = 1..n,

  so the ``n + 1`` gaps ``−1 → t_1 → … → t_n → 1`` are ``2·softmax(z)``, all positive and
  summing to 2. With "pinned ends" (``t_1 = −1``, ``t_n = 1``, as for Chebyshev-2 workers)
  ``z ∈ ℝ^{n−1}`` holds the ``n − 1`` interior gaps only: ``t_1 = −1``,
  ``t_i = −1 + 2 Σ_{j < i} softmax(z)_j``, ``t_n = 1``.

The inverse is ``z = log(gaps) − mean(log(gaps))`` (softmax is invariant to shifts; the mean is
removed to make the representation unique), so ``params_from_code(code).to_code()`` returns
``code`` up to round-off.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import float_dtype
from .._core.status import GCCValueError, is_concrete
from .._core.types import Array, ArrayLike, Float
from ..codes import SplineCode

__all__ = ["SplineParams", "nodes_from_logits", "logits_from_nodes", "params_from_code"]

#: names of the parameter groups, as accepted by ``trainable=`` in :func:`gcc_jax.tuning.tune`
GROUPS = ("lam_enc", "lam_dec", "alpha", "beta")


def nodes_from_logits(z: Float[ArrayLike, " g"], *, pinned: bool) -> Float[Array, " n"]:
    """Strictly increasing nodes in ``[−1, 1]`` from gap logits (see the module docstring).

    Args:
        z: gap logits; ``n + 1`` of them for ``n`` free nodes, ``n − 1`` for pinned ends.
        pinned: whether the first and last node are fixed at ``−1`` and ``1``.

    Returns:
        Ascending nodes, shape ``(n,)``.

    Example:
        >>> import jax.numpy as jnp
        >>> nodes_from_logits(jnp.zeros(4), pinned=False).tolist()
        [-0.5, 0.0, 0.5]
        >>> nodes_from_logits(jnp.zeros(2), pinned=True).tolist()
        [-1.0, 0.0, 1.0]
    """
    z = jnp.asarray(z)
    gaps = jax.nn.softmax(z)
    inner = -1.0 + 2.0 * jnp.cumsum(gaps)[:-1]
    if not pinned:
        return inner
    one = jnp.ones((1,), inner.dtype)
    return jnp.concatenate([-one, inner, one])


def logits_from_nodes(t: Float[ArrayLike, " n"], *, pinned: bool, name: str = "nodes") -> Array:
    """Inverse of :func:`nodes_from_logits`: centred log-gaps of ascending nodes.

    Raises:
        GCCValueError: (concrete input) the nodes are not strictly increasing inside
            ``(−1, 1)`` (free ends), or do not start at ``−1`` and end at ``1`` (pinned ends).
    """
    t = jnp.asarray(t)
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(f"`{name}` must be 1-D with at least 2 nodes; got shape {t.shape}")
    if is_concrete(t):
        tn = np.asarray(t, dtype=np.float64)
        if pinned and not (tn[0] == -1.0 and tn[-1] == 1.0):
            raise GCCValueError(
                f"`{name}` must start at -1 and end at 1 to keep its ends pinned; "
                f"got [{tn[0]}, …, {tn[-1]}]"
            )
        ext = tn if pinned else np.concatenate([[-1.0], tn, [1.0]])
        if not np.all(np.diff(ext) > 0):
            where = "in [-1, 1]" if pinned else "strictly inside (-1, 1)"
            raise GCCValueError(
                f"`{name}` must be strictly increasing {where} to be tuned; got {tn}"
            )
    if pinned:
        gaps = jnp.diff(t)
    else:
        one = jnp.ones((1,), t.dtype)
        gaps = jnp.diff(jnp.concatenate([-one, t, one]))
    logs = jnp.log(gaps)
    return logs - jnp.mean(logs)


@dataclasses.dataclass(frozen=True)
class SplineParams:
    """Unconstrained, differentiable parameters of a :class:`~gcc_jax.SplineCode`.

    A pytree whose leaves are the four parameter groups; optax optimisers act on it directly.
    Rebuilding it from leaves (``jax.tree.map``, ``tree_unflatten``) does not call ``__init__``:
    optax's ``partition`` and ``masked`` rebuild it with labels, booleans and ``MaskedNode``
    leaves, which are not parameter values.
    ``lam_enc = exp(log_lam_enc)``, ``lam_dec = exp(log_lam_dec)``, and the nodes are cumulative
    softmax gaps (module docstring), so every value of the leaves gives a valid code: λs
    positive, nodes strictly increasing inside ``[−1, 1]``.

    Attributes:
        log_lam_enc: ``log λ_enc`` (scalar).
        log_lam_dec: ``log λ_dec`` (scalar).
        alpha_logits: gap logits of the ``K`` input nodes (``K + 1``, or ``K − 1`` when pinned).
        beta_logits: gap logits of the ``N`` worker nodes (``N + 1``, or ``N − 1`` when pinned).
        pin_alpha: static; the input nodes' ends are fixed at ``±1``.
        pin_beta: static; the worker nodes' ends are fixed at ``±1`` (Chebyshev-2 default).
        solver: static; the :class:`~gcc_jax.SplineCode` solver of the code rebuilt.

    Example:
        >>> import gcc_jax as gcc
        >>> from gcc_jax.tuning import params_from_code
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=9, lam_dec=1e-6)
        >>> params = params_from_code(code)
        >>> params.pin_beta, params.beta_logits.shape, params.alpha_logits.shape
        (True, (8,), (5,))
        >>> back = params.to_code()
        >>> bool(abs(back.beta - code.beta).max() < 1e-6), round(float(back.lam_dec) * 1e6, 4)
        (True, 1.0)
    """

    log_lam_enc: Float[ArrayLike, ""]  # JAX or NumPy values
    log_lam_dec: Float[ArrayLike, ""]
    alpha_logits: Float[ArrayLike, " a"]
    beta_logits: Float[ArrayLike, " b"]
    pin_alpha: bool = dataclasses.field(default=False, metadata=dict(static=True))
    pin_beta: bool = dataclasses.field(default=True, metadata=dict(static=True))
    solver: str = dataclasses.field(default="kalman", metadata=dict(static=True))

    @property
    def lam_enc(self) -> Float[Array, ""]:
        return jnp.exp(self.log_lam_enc)

    @property
    def lam_dec(self) -> Float[Array, ""]:
        return jnp.exp(self.log_lam_dec)

    @property
    def alpha(self) -> Float[Array, " k"]:
        return nodes_from_logits(self.alpha_logits, pinned=self.pin_alpha)

    @property
    def beta(self) -> Float[Array, " n"]:
        return nodes_from_logits(self.beta_logits, pinned=self.pin_beta)

    def to_code(self) -> SplineCode:
        """The :class:`~gcc_jax.SplineCode` these parameters describe (differentiable)."""
        return SplineCode(
            alpha=self.alpha,
            beta=self.beta,
            lam_enc=self.lam_enc,
            lam_dec=self.lam_dec,
            solver=self.solver,
        )


_LEAVES = ("log_lam_enc", "log_lam_dec", "alpha_logits", "beta_logits")
_STATIC = ("pin_alpha", "pin_beta", "solver")


def _flatten_with_keys(params: SplineParams):
    keyed = tuple((jax.tree_util.GetAttrKey(name), getattr(params, name)) for name in _LEAVES)
    return keyed, tuple(getattr(params, name) for name in _STATIC)


def _unflatten(static: tuple, leaves) -> SplineParams:
    params = object.__new__(SplineParams)
    for name, value in zip((*_LEAVES, *_STATIC), (*leaves, *static), strict=True):
        object.__setattr__(params, name, value)
    return params


jax.tree_util.register_pytree_with_keys(SplineParams, _flatten_with_keys, _unflatten)


def params_from_code(
    code: SplineCode,
    *,
    lam_floor: float = 1e-12,
    pin_alpha: bool | None = None,
    pin_beta: bool | None = None,
) -> SplineParams:
    """The unconstrained parameters of ``code`` (the inverse of :meth:`SplineParams.to_code`).

    Args:
        code: a :class:`~gcc_jax.SplineCode` with nodes inside ``[−1, 1]``.
        lam_floor: a λ below this (in particular λ = 0, which ``log`` cannot represent) starts
            at ``lam_floor``. The default ``1e-12`` is far below any useful smoothing for
            ``N ≲ 10³`` (the equivalent kernel's width ``(2λ)^{1/4} ≈ 1.2e-3``), so the loss
            there equals the loss at λ = 0 to many digits.
        pin_alpha, pin_beta: keep a node set's ends fixed at ``±1``. ``None`` (default): pinned
            exactly when the nodes already start at ``−1`` and end at ``1`` (Chebyshev-2
            workers); free otherwise (Chebyshev-1 inputs lie strictly inside).

    Returns:
        :class:`SplineParams`.

    Raises:
        TypeError: ``code`` is not a :class:`~gcc_jax.SplineCode`.
        GCCValueError: nodes outside ``[−1, 1]``, or pinning requested for nodes whose ends are
            not ``±1``.
    """
    if not isinstance(code, SplineCode):
        raise TypeError(
            f"`code` must be a gcc_jax.SplineCode (its λs and nodes are tuned); "
            f"got {type(code).__name__}"
        )
    if not (np.isfinite(lam_floor) and lam_floor > 0):
        raise ValueError(f"`lam_floor` must be a positive number; got {lam_floor}")
    dtype = float_dtype(code.alpha, code.beta)

    def ends_at_pm1(t):
        if not is_concrete(t):
            return False
        tn = np.asarray(t)
        return bool(tn[0] == -1.0 and tn[-1] == 1.0)

    pin_alpha = ends_at_pm1(code.alpha) if pin_alpha is None else bool(pin_alpha)
    pin_beta = ends_at_pm1(code.beta) if pin_beta is None else bool(pin_beta)
    floor = jnp.asarray(lam_floor, dtype)

    def log_lam(lam):
        return jnp.log(jnp.maximum(jnp.asarray(lam, dtype), floor))

    return SplineParams(
        log_lam_enc=log_lam(code.lam_enc),
        log_lam_dec=log_lam(code.lam_dec),
        alpha_logits=logits_from_nodes(code.alpha.astype(dtype), pinned=pin_alpha, name="alpha"),
        beta_logits=logits_from_nodes(code.beta.astype(dtype), pinned=pin_beta, name="beta"),
        pin_alpha=pin_alpha,
        pin_beta=pin_beta,
        solver=code.solver,
    )
