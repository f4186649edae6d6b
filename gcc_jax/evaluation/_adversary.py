"""Byzantine workers: fixed corruption strategies, a gradient attack, worst-case positions.

The adversarial setting of GCC (arXiv 2502.08058): ``γ`` of the ``N`` workers are adversarial and
return anything within ``[−M, M]^m``; the others return ``f(x~_n)``. An *adversary* here is a
rule for those values (:class:`Adversary`), and a set of positions (a boolean mask,
``True`` = adversarial worker) from :func:`adversary_positions` or the worst-case search
:func:`worst_case_adversaries`.

Strategies (each keeps every corrupted coordinate within ``[−M, M]``):

* ``"max"``: the largest allowed value, ``+M`` everywhere;
* ``"sign_flip"``: ``clip(−y~_n, −M, M)``;
* ``"random"``: uniform on ``[−M, M]^m``;
* ``"bias"``: a constant bias ``clip(y~_n + b, −M, M)`` (``b = M`` by default), meant for a
  contiguous block of positions (``adversary_positions(..., kind="contiguous")``);
* ``"pgd"``: the strongest *value* attack this library can compute, because its decoders are
  differentiable: projected gradient ascent (Adam, projection = clipping to the box) on the
  decode loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` over the adversaries' outputs, from several
  starts (the honest values, the ``±M`` vertices by the sign of the honest values, random
  points), keeping the best iterate seen.

Positions and values together: :func:`targeted_attack` (for linear decoders, in closed form:
every adversary at the workers one estimate listens to most, pushing it one way) and
:func:`worst_case_adversaries` (positions by search, values by a strategy).
"""

import dataclasses
import math
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .._core.checks import (
    as_float_array,
    as_int,
    as_mask,
    as_masks,
    as_real,
    check_instance,
    check_key,
)
from .._core.types import Array, ArrayLike, Bool, Float, Int, PRNGKeyArray
from ..codes import AbstractCode, AbstractLinearCode, check_code
from ._evaluator import MaskEvaluator
from ._worst_case import LIGHT_SEARCH, SearchBudget, as_budget, search_worst_case

__all__ = [
    "Adversary",
    "AttackResult",
    "attack",
    "attack_loss",
    "attack_losses",
    "adversary_positions",
    "targeted_attack",
    "worst_case_adversaries",
]

_HIGHEST = jax.lax.Precision.HIGHEST
STRATEGIES = ("max", "sign_flip", "random", "bias", "pgd")
VALUE_STRATEGIES = STRATEGIES[:4]
"""The strategies that set values by a formula (no gradient): one compiled program for all four."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Adversary:
    """A rule for what adversarial workers return, within ``[−M, M]`` per coordinate.

    Attributes:
        bound: ``M > 0`` (array leaf: a new bound never recompiles).
        strategy: one of ``"max"``, ``"sign_flip"``, ``"random"``, ``"bias"``, ``"pgd"`` (static;
            see the module docstring).
        steps: gradient steps per start (``"pgd"``).
        learning_rate: Adam step size in units of ``M`` (``"pgd"``).
        restarts: number of starts (``"pgd"``): the honest values with steps of
            ``learning_rate / 100`` (to find the largest deviation a robust decoder still
            accepts), the vertex ``−M·sign(y~)``, the honest values with full steps, then random
            points in the box.
        bias: the constant of ``"bias"`` (``None``: ``M``).

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=20, lam_dec=1e-4)
        >>> x = jnp.linspace(-1.0, 1.0, 4)[:, None]
        >>> yt, fx = code.worker_outputs(jnp.sin, x), jnp.sin(x)
        >>> bad = jnp.zeros(20, bool).at[5].set(True)
        >>> y = gcc.attack(code, yt, fx, bad, gcc.Adversary(2.0, "max"), key=jax.random.key(0))
        >>> float(y[5, 0]), bool(jnp.all(y[:5] == yt[:5]))
        (2.0, True)
    """

    bound: Float[ArrayLike, ""]
    strategy: str = dataclasses.field(default="pgd", metadata=dict(static=True))
    steps: int = dataclasses.field(default=50, metadata=dict(static=True))
    learning_rate: float = dataclasses.field(default=0.1, metadata=dict(static=True))
    restarts: int = dataclasses.field(default=4, metadata=dict(static=True))
    bias: float | None = dataclasses.field(default=None, metadata=dict(static=True))

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"`strategy` must be one of {STRATEGIES}; got {self.strategy!r}")
        object.__setattr__(self, "steps", as_int(self.steps, "steps", 1))
        object.__setattr__(self, "restarts", as_int(self.restarts, "restarts", 1))
        as_real(self.learning_rate, "learning_rate", 0.0, lo_open=True)
        if isinstance(self.bound, int | float | np.number):
            bound = as_real(self.bound, "bound", 0.0, lo_open=True)
            object.__setattr__(self, "bound", jnp.asarray(bound))


def _check(code, yt, fx, adversaries, mask, adversary=None):
    """The checked arguments of the attack functions (``adversary`` too when given)."""
    code = check_code(code)
    n = code.num_workers
    yt = as_float_array(yt, "yt")
    fx = as_float_array(fx, "fx")
    if yt.ndim < 1 or yt.shape[0] != n:
        raise ValueError(f"`yt` must have one row per worker (n={n}); got shape {yt.shape}")
    if fx.shape != (code.num_inputs, *yt.shape[1:]):
        raise ValueError(
            f"`fx` must have shape ({code.num_inputs}, *m) matching `yt` {yt.shape}; got {fx.shape}"
        )
    adversaries = as_mask(adversaries, n, "adversaries")
    mask = as_mask(mask, n)
    if adversary is not None:
        check_instance(adversary, (Adversary, ValueRule), "adversary", "gcc_jax.Adversary")
    return code, yt, fx, adversaries, mask


def _loss(code, y, fx, mask):
    """``(1/K) Σ ‖f^ − f‖²`` and the status (the error of a failed decode is not used)."""
    dec = code.decode_with_status(y, mask)
    ok = dec.status == 0
    err = jnp.where(ok, dec.value - fx, 0.0).reshape(-1)
    return jnp.sum(err * err) / fx.shape[0], dec.status


def _pgd(code, yt, fx, adversaries, mask, adversary, key):
    n = yt.shape[0]
    shape = yt.shape
    y_flat = yt.reshape(n, -1)
    m_bound = adversary.bound.astype(y_flat.dtype)
    adv = adversaries[:, None]
    import optax  # the PGD adversary's optimiser; loaded only when one attacks

    opt = optax.scale_by_adam()

    def objective(z):
        y = jnp.where(adv, z, y_flat).reshape(shape)
        loss, _ = _loss(code, y, fx, mask)
        return loss

    value_and_grad = jax.value_and_grad(objective)

    def run(z0, lr):
        def step(carry, _):
            z, state, best_loss, best_z = carry
            loss, g = value_and_grad(z)
            better = loss > best_loss
            best_loss = jnp.where(better, loss, best_loss)
            best_z = jnp.where(better, z, best_z)
            g = jnp.where(jnp.isfinite(g), g, 0.0)
            upd, state = opt.update(g, state, z)
            z = jnp.clip(z + lr * upd, -m_bound, m_bound)  # ascent, then projection
            return (z, state, best_loss, best_z), None

        init = (z0, opt.init(z0), jnp.asarray(-jnp.inf, y_flat.dtype), z0)
        # steps + 1 evaluations: the last one scores the final iterate (its update is unused),
        # so the program holds one copy of the decoder and its gradient, not an extra forward
        (_, _, best_loss, best_z), _ = jax.lax.scan(step, init, None, length=adversary.steps + 1)
        return best_loss, best_z

    honest = jnp.clip(y_flat, -m_bound, m_bound)
    vertex = jnp.where(y_flat >= 0, -m_bound, m_bound)
    lr = adversary.learning_rate * m_bound
    # (start, step size): small steps from the honest values find the largest deviation a
    # robust decoder still accepts; large steps from vertices and random points the rest.
    starts = [(honest, lr * 0.01), (vertex, lr), (honest, lr)]
    keys = jr.split(key, max(adversary.restarts - 3, 1))
    for i in range(adversary.restarts - 3):
        starts.append((jr.uniform(keys[i], y_flat.shape, y_flat.dtype, -m_bound, m_bound), lr))
    starts = starts[: adversary.restarts]
    z0 = jnp.stack([s for s, _ in starts])
    lrs = jnp.stack([jnp.asarray(r, y_flat.dtype) for _, r in starts])
    losses, zs = jax.vmap(run)(z0, lrs)
    best = jnp.argmax(jnp.where(jnp.isfinite(losses), losses, -jnp.inf))
    return jnp.where(adv, zs[best], y_flat).reshape(shape)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ValueRule:
    """A value strategy (:data:`VALUE_STRATEGIES`) with the strategy as data, not structure.

    What compiled code receives in place of an :class:`Adversary` whose strategy is ``"max"``,
    ``"sign_flip"``, ``"random"`` or ``"bias"`` (:func:`compiled_rule`): the four strategies
    then share one compiled program per code, instead of one each. Index ``4`` returns
    ``values`` (the candidates of :func:`targeted_attack` use the same program).

    Attributes:
        bound: ``M`` (array leaf).
        index: the strategy's index in :data:`VALUE_STRATEGIES`, or ``4`` for ``values``
            (int32 array leaf).
        bias: the constant of ``"bias"`` (array leaf; ``M`` unless the adversary sets it).
        values: the adversaries' outputs of index ``4``, ``(n, r)`` (worker outputs flattened
            per worker; zeros otherwise).
    """

    bound: Float[Array, ""]
    index: Int[Array, ""]
    bias: Float[Array, ""]
    values: Float[Array, "n r"]


def compiled_rule(adversary: Adversary | ValueRule, yt: Array) -> Adversary | ValueRule:
    """``adversary`` as compiled code receives it for worker outputs ``yt``: a
    :class:`ValueRule` for the value strategies (one program for all four), the
    :class:`Adversary` itself for ``"pgd"``."""
    if isinstance(adversary, ValueRule) or adversary.strategy == "pgd":
        return adversary
    # the dtype of the outputs, never weakly typed: the ValueRules of targeted_attack (built
    # the same way) then share this program instead of compiling their own
    bound = jnp.asarray(adversary.bound, yt.dtype)
    bias = bound if adversary.bias is None else jnp.asarray(adversary.bias, yt.dtype)
    index = jnp.asarray(VALUE_STRATEGIES.index(adversary.strategy), jnp.int32)
    values = jnp.zeros((yt.shape[0], math.prod(yt.shape[1:])), yt.dtype)
    return ValueRule(bound, index, bias, values)


def attack_outputs(code, yt, fx, adversaries, mask, adversary, key) -> Array:
    """The jittable core of :func:`attack` (no argument checks); ``adversary`` is an
    :class:`Adversary` or a :class:`ValueRule`."""
    rule = compiled_rule(adversary, yt)
    if isinstance(rule, Adversary):  # "pgd"
        return _pgd(code, yt, fx, adversaries, mask, rule, key)
    shape = yt.shape
    n = shape[0]
    y_flat = yt.reshape(n, -1)
    m_bound = rule.bound.astype(y_flat.dtype)
    candidates = jnp.stack(
        [
            jnp.full_like(y_flat, m_bound),  # "max"
            jnp.clip(-y_flat, -m_bound, m_bound),  # "sign_flip"
            jr.uniform(key, y_flat.shape, y_flat.dtype, -m_bound, m_bound),  # "random"
            jnp.clip(y_flat + rule.bias.astype(y_flat.dtype), -m_bound, m_bound),  # "bias"
            rule.values.astype(y_flat.dtype),  # given values
        ]
    )
    z = candidates[rule.index]
    return jnp.where(adversaries[:, None], z, y_flat).reshape(shape)


def attack(
    code: AbstractCode,
    yt: Float[ArrayLike, "n *m"],
    fx: Float[ArrayLike, "k *m"],
    adversaries: Bool[ArrayLike, " n"],
    adversary: Adversary,
    *,
    mask: Bool[ArrayLike, " n"] | None = None,
    key: PRNGKeyArray,
) -> Float[Array, "n *m"]:
    """Worker outputs after the adversarial workers applied ``adversary``'s strategy.

    Rows where ``adversaries`` is True are replaced by values within ``[−M, M]``; the other rows
    are ``yt`` unchanged. ``"pgd"`` maximises the decode loss against ``fx`` under the straggler
    ``mask`` (default: all live), so it needs the true targets (an omniscient adversary, the
    paper's worst case). Pure and jittable (vmap over ``adversaries`` or ``mask`` for many).

    Args:
        code: any :class:`gcc_jax.AbstractCode` (its decoder is what ``"pgd"`` attacks).
        yt: honest worker outputs ``(n, *m)``.
        fx: targets ``f(x_k)`` ``(k, *m)``.
        adversaries: boolean ``(n,)``, True = adversarial worker.
        adversary: an :class:`Adversary`.
        mask: straggler mask (True = returned in time); default all live.
        key: PRNG key (``"random"`` values, ``"pgd"`` random starts).
    """
    return _checked_attack(code, yt, fx, adversaries, adversary, mask, key)[0]


def _checked_attack(code, yt, fx, adversaries, adversary, mask, key):
    """:func:`_attack_jit` after the argument checks of :func:`attack` and :func:`attack_loss`."""
    code, yt, fx, adversaries, mask = _check(code, yt, fx, adversaries, mask, adversary)
    rule = compiled_rule(adversary, yt)
    return _attack_jit(code, yt, fx, adversaries, mask, rule, check_key(key))


@jax.jit
def _attack_jit(code, yt, fx, adversaries, mask, rule, key):
    """The attacked outputs, their decode loss and status: one compiled program per code and
    rule structure serves :func:`attack` and :func:`attack_loss`."""
    y = attack_outputs(code, yt, fx, adversaries, mask, rule, key)
    loss, status = _loss(code, y, fx, mask)
    return y, loss, status


def attack_loss(
    code: AbstractCode,
    yt: Float[ArrayLike, "n *m"],
    fx: Float[ArrayLike, "k *m"],
    adversaries: Bool[ArrayLike, " n"],
    adversary: Adversary,
    *,
    mask: Bool[ArrayLike, " n"] | None = None,
    key: PRNGKeyArray,
) -> tuple[Float[Array, ""], Int[Array, ""]]:
    """``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` after :func:`attack`, and the decode status."""
    _, loss, status = _checked_attack(code, yt, fx, adversaries, adversary, mask, key)
    return loss, status


def adversary_positions(
    key: PRNGKeyArray, num_workers: int, num_adversaries: int, *, kind: str = "random"
) -> Bool[Array, " n"]:
    """A boolean ``(n,)`` mask with exactly ``γ`` True entries (the adversarial workers).

    ``kind="random"``: a uniformly random ``γ``-subset; ``"contiguous"``: a block of ``γ``
    consecutive workers (in node order) at a uniformly random start.

    Example:
        >>> import jax, gcc_jax as gcc
        >>> adv = gcc.adversary_positions(jax.random.key(0), 10, 3, kind="contiguous")
        >>> int(adv.sum()), [int(i) for i in jax.numpy.flatnonzero(adv, size=3)] == sorted(
        ...     int(i) for i in jax.numpy.flatnonzero(adv, size=3))
        (3, True)
    """
    key = check_key(key)
    n = as_int(num_workers, "num_workers", 1)
    g = as_int(num_adversaries, "num_adversaries", 0, n)
    idx = jnp.arange(n)
    if kind == "random":
        ranks = jnp.argsort(jnp.argsort(jr.uniform(key, (n,))))
        return ranks < g
    if kind == "contiguous":
        start = jr.randint(key, (), 0, n - g + 1)
        return (idx >= start) & (idx < start + g)
    raise ValueError(f"`kind` must be 'random' or 'contiguous'; got {kind!r}")


class AttackResult(NamedTuple):
    """Result of :func:`worst_case_adversaries`.

    Attributes:
        adversaries: the worst positions found, boolean ``(n,)`` (True = adversarial).
        outputs: the corrupted worker outputs at those positions ``(n, *m)``.
        loss: their decode loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` (``inf``: not decodable).
        status: the decode status at those positions.
        exhaustive: every ``γ``-subset was tried (the loss is the maximum over positions, for
            this strategy); otherwise a lower bound from the local search.
        num_evaluated: position sets tried.
    """

    adversaries: np.ndarray
    outputs: Array
    loss: float
    status: int
    exhaustive: bool
    num_evaluated: int


def attack_per_mask(code, yt, aux, honest):
    """MaskEvaluator hook: the attack with adversaries at ``~honest``: ``(loss, outputs,
    status)``; ``aux = (fx, straggler mask, compiled_rule(adversary, yt), key)``."""
    fx, live, rule, key = aux
    y = attack_outputs(code, yt, fx, ~honest, live, rule, key)
    loss, status = _loss(code, y, fx, live)
    return loss, y, status


def _attack_evaluator(code, yt, fx, adversary, mask, key, chunk_size) -> MaskEvaluator:
    """The one evaluator of attacks at batches of positions (its rows are *honest* masks)."""
    check_instance(adversary, (Adversary, ValueRule), "adversary", "gcc_jax.Adversary")
    aux = (fx, mask, compiled_rule(adversary, yt), key)
    return MaskEvaluator(code, yt, aux, per_mask=attack_per_mask, chunk_size=chunk_size)


def attack_losses(
    code: AbstractCode,
    yt: Float[ArrayLike, "n *m"],
    fx: Float[ArrayLike, "k *m"],
    adversaries: Bool[ArrayLike, "p n"],
    adversary: Adversary,
    *,
    mask: Bool[ArrayLike, " n"] | None = None,
    key: PRNGKeyArray,
    chunk_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`attack_loss` at each row of a batch of position sets, batched.

    Row ``i`` of ``adversaries`` marks the adversarial workers of one attack; the losses
    ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` after ``adversary``'s strategy and their decode statuses
    come from the one mask evaluator (:class:`gcc_jax.MaskEvaluator`), with the program of
    :func:`worst_case_adversaries`: with the same ``chunk_size`` the two share their
    compilation, and so do the four value strategies (only ``"pgd"`` compiles its own).

    Args:
        code: any :class:`gcc_jax.AbstractCode`.
        yt: honest worker outputs ``(n, *m)``; fx: targets ``f(x_k)`` ``(k, *m)``.
        adversaries: boolean ``(p, n)``, True = adversarial worker.
        adversary: an :class:`Adversary`.
        mask: straggler mask applied to every row (default all live).
        key: PRNG key (the same for every row).
        chunk_size: as :class:`gcc_jax.MaskEvaluator`.

    Returns:
        NumPy ``(loss (p,), status (p,))``.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=10, lam_dec=1e-4)
        >>> x = jnp.linspace(-1.0, 1.0, 3)[:, None]
        >>> yt, fx = code.worker_outputs(jnp.sin, x), jnp.sin(x)
        >>> sets = np.eye(10, dtype=bool)[:3]  # worker 0, 1 or 2 adversarial
        >>> loss, status = gcc.attack_losses(
        ...     code, yt, fx, sets, gcc.Adversary(1.0, "max"), key=jax.random.key(0))
        >>> one, _ = gcc.attack_loss(
        ...     code, yt, fx, sets[1], gcc.Adversary(1.0, "max"), key=jax.random.key(0))
        >>> loss.shape, status.tolist(), bool(np.isclose(loss[1], one, rtol=1e-10))
        ((3,), [0, 0, 0], True)
    """
    code, yt, fx, _, mask = _check(code, yt, fx, None, mask)
    adversaries = as_masks(adversaries, code.num_workers, "adversaries")
    ev = _attack_evaluator(code, yt, fx, adversary, mask, check_key(key), chunk_size)
    loss, _, status = ev(~adversaries)
    return loss, status


def worst_case_adversaries(
    code: AbstractCode,
    yt: Float[ArrayLike, "n *m"],
    fx: Float[ArrayLike, "k *m"],
    adversary: Adversary,
    num_adversaries: int,
    *,
    mask: Bool[ArrayLike, " n"] | None = None,
    key: PRNGKeyArray | None = None,
    search: SearchBudget | Mapping[str, int] | None = None,
    chunk_size: int = 64,
) -> AttackResult:
    """The ``γ`` adversary positions that maximise the decode loss under ``adversary``.

    The search of :func:`gcc_jax.worst_case_mask` (exhaustive over all ``C(N, γ)`` position sets
    when at most ``max_exhaustive``, else contiguous blocks plus local search by swaps), where a
    "pattern" marks the adversaries and its loss is the decode loss *after the attack* at those
    positions (for ``"pgd"``: a full gradient attack per candidate set, batched through the one
    mask evaluator, :class:`gcc_jax.MaskEvaluator`, with a ``per_mask`` that applies it).

    Args:
        code: any :class:`gcc_jax.AbstractCode`.
        yt: honest worker outputs ``(n, *m)``; fx: targets ``(k, *m)``.
        adversary: the value strategy.
        num_adversaries: ``γ``.
        mask: straggler mask applied on top (default all live).
        key: PRNG key (default ``jax.random.key(0)``).
        search: a :class:`gcc_jax.evaluation.SearchBudget`, or a mapping of the fields that
            differ from :data:`gcc_jax.evaluation.LIGHT_SEARCH` (the default: every candidate
            is a whole attack).
        chunk_size: position sets attacked per compiled call.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=10, lam_dec=1e-4)
        >>> x = jnp.linspace(-1.0, 1.0, 3)[:, None]
        >>> yt, fx = code.worker_outputs(jnp.sin, x), jnp.sin(x)
        >>> res = gcc.worst_case_adversaries(code, yt, fx, gcc.Adversary(1.0, "max"), 2)
        >>> res.exhaustive, int(res.adversaries.sum()), res.num_evaluated
        (True, 2, 45)
    """
    code, yt, fx, _, mask = _check(code, yt, fx, None, mask)
    n = code.num_workers
    g = as_int(num_adversaries, "num_adversaries", 0, n)
    budget = as_budget(search, LIGHT_SEARCH)
    key = jr.key(0) if key is None else check_key(key)
    ev = _attack_evaluator(code, yt, fx, adversary, mask, key, chunk_size)
    wc = search_worst_case(ev, n, g, key=key, search=budget)
    adversaries = ~np.asarray(wc.mask)
    # the outputs at the worst positions from the search's own program (no second compile)
    outputs = jnp.asarray(ev(np.asarray(wc.mask)[None])[1][0])
    return AttackResult(adversaries, outputs, wc.loss, wc.status, wc.exhaustive, wc.num_evaluated)


@jax.jit
def _targeted_candidates(surrogate, yt, fx, live, bound, gamma):
    """The ``2K`` candidate attacks of :func:`targeted_attack`, from ``surrogate``'s decoder
    matrix only: positions ``(2K, n)`` and outputs ``(2K, n, *m)``."""
    n = yt.shape[0]
    y_flat = yt.reshape(n, -1)
    f_flat = fx.reshape(fx.shape[0], -1)
    m_bound = jnp.asarray(bound, y_flat.dtype)
    d, _ = surrogate.decoder_matrix_with_status(live)  # (k, n), dead columns zero
    d = jnp.where(live[None, :], d, 0.0)
    y_live = jnp.where(live[:, None], y_flat, 0.0)
    err = jnp.matmul(d, y_live, precision=_HIGHEST) - f_flat  # the surrogate's honest error (k, m)

    def one(k, s):
        # worker n moves f^_k by D_kn (z − y~_n); pushing in direction s, its best value is
        # z = s·sign(D_kn)·M, worth |D_kn| M − s D_kn y~_n: take the γ live workers worth most
        sgn = jnp.where(d[k] >= 0, 1.0, -1.0)[:, None]
        worth = jnp.sum(jnp.abs(d[k])[:, None] * m_bound - s * d[k][:, None] * y_live, axis=1)
        ranks = jnp.argsort(jnp.argsort(-jnp.where(live, worth, -jnp.inf)))
        adv = (ranks < gamma) & live
        # per output coordinate, the direction that moves f^_kj furthest from f(x_k)_j
        up = jnp.matmul(
            d[k], jnp.where(adv[:, None], sgn * m_bound - y_live, 0.0), precision=_HIGHEST
        )
        down = jnp.matmul(
            d[k], jnp.where(adv[:, None], -sgn * m_bound - y_live, 0.0), precision=_HIGHEST
        )
        sj = jnp.where(jnp.abs(err[k] + up) >= jnp.abs(err[k] + down), 1.0, -1.0)
        return adv, jnp.where(adv[:, None], sj[None, :] * sgn * m_bound, y_flat)

    ks = jnp.repeat(jnp.arange(fx.shape[0]), 2)
    ss = jnp.tile(jnp.array([1.0, -1.0], y_flat.dtype), fx.shape[0])
    return jax.vmap(one)(ks, ss)


def targeted_attack(
    code: AbstractCode,
    yt: Float[ArrayLike, "n *m"],
    fx: Float[ArrayLike, "k *m"],
    bound: float,
    num_adversaries: int,
    *,
    mask: Bool[ArrayLike, " n"] | None = None,
    surrogate: AbstractLinearCode | None = None,
) -> AttackResult:
    """The strongest attack on one estimate of a linear decoder, at the workers it relies on.

    A linear decoder gives ``f^_k = Σ_n D_kn y~_n`` (``D`` from
    :meth:`gcc_jax.AbstractLinearCode.decoder_matrix_with_status`).
    An adversary at worker ``n`` returning ``z`` moves ``f^_k`` by ``D_kn (z − y~_n)``. For each
    target input ``k`` and direction ``s = ±1``, the ``γ`` live workers worth most,
    ``Σ_j (|D_kn| M − s D_kn y~_nj)``, become adversarial and return ``s_j · sign(D_kn) · M`` in
    output coordinate ``j`` (``s_j = s``, or its opposite where that moves ``f^_kj`` further
    from ``f(x_k)_j``). With one output coordinate this is the exact maximiser of
    ``|f^_k − f(x_k)|`` over every ``γ`` positions and every value in ``[−M, M]`` (a linear
    function of the values is largest at the vertex of its coefficients' signs, and the best
    positions are the ``γ`` largest terms). Of the ``2K`` candidates, the one with the largest
    decode loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` is returned: ``2K`` decodes, no search, no
    gradient, so it scales to any ``N``. This is the adversary of the
    worst-case analysis of the adversarial GCC paper (a block of liars next to one input
    node, all pushing one way).

    For a non-linear decoder (:class:`gcc_jax.RobustSplineCode`, ApproxIFER, LCC with error
    correction) pass a linear ``surrogate`` (its plain counterpart): positions and values are
    chosen on the surrogate's ``D`` and the loss is ``code``'s decode — a transfer attack.

    Args:
        code: the decoder attacked (any :class:`gcc_jax.AbstractCode`).
        yt: honest worker outputs ``(n, *m)``; fx: targets ``f(x_k)`` ``(k, *m)``.
        bound: ``M > 0``, the adversaries' range per coordinate.
        num_adversaries: ``γ``.
        mask: straggler mask (default all live); adversaries are live workers.
        surrogate: a :class:`gcc_jax.AbstractLinearCode` with ``code``'s sizes whose decoder
            matrix picks positions and values (default ``code`` itself, which must be linear).

    Returns:
        An :class:`AttackResult` (``exhaustive=False``, ``num_evaluated = 2K``).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=20, lam_dec=1e-4)
        >>> x = jnp.linspace(-1.0, 1.0, 3)[:, None]
        >>> yt, fx = code.worker_outputs(jnp.sin, x), jnp.sin(x)
        >>> res = gcc.targeted_attack(code, yt, fx, 1.0, 2)
        >>> int(res.adversaries.sum()), bool(jnp.abs(res.outputs[res.adversaries]).max() <= 1.0)
        (2, True)
    """
    code, yt, fx, _, mask = _check(code, yt, fx, None, mask)
    surrogate = code if surrogate is None else check_code(surrogate, "surrogate")
    if not isinstance(surrogate, AbstractLinearCode):
        raise TypeError(
            "`surrogate` must be a linear code (gcc_jax.AbstractLinearCode); "
            f"{type(surrogate).__name__} is not: pass its linear counterpart as `surrogate`"
        )
    if (surrogate.num_inputs, surrogate.num_workers) != (code.num_inputs, code.num_workers):
        raise ValueError(
            f"`surrogate` must have the sizes of `code` (k={code.num_inputs}, "
            f"n={code.num_workers}); got ({surrogate.num_inputs}, {surrogate.num_workers})"
        )
    m = as_real(bound, "bound", 0.0, lo_open=True)
    g = as_int(num_adversaries, "num_adversaries", 0, code.num_workers)
    advs, values = _targeted_candidates(surrogate, yt, fx, mask, m, g)
    advs = np.asarray(advs)
    # each candidate's decode loss through the program of the value strategies (shared with
    # attack_losses and worst_case_adversaries: no compilation of its own)
    bound, given = jnp.asarray(m, yt.dtype), jnp.asarray(4, jnp.int32)
    losses, statuses = np.empty(len(advs)), np.empty(len(advs), np.int32)
    for c in range(len(advs)):
        rule = ValueRule(bound, given, bound, values[c])
        ev = _attack_evaluator(code, yt, fx, rule, mask, jr.key(0), None)
        loss, _, status = ev(~advs[c][None])
        losses[c], statuses[c] = loss[0], status[0]
    best = int(np.argmax(np.where(statuses == 0, losses, -np.inf)))
    outputs = jnp.where(advs[best][:, None], values[best], yt.reshape(yt.shape[0], -1))
    return AttackResult(
        advs[best], outputs.reshape(yt.shape), float(losses[best]), int(statuses[best]), False,
        2 * code.num_inputs,
    )  # fmt: skip
