"""Many masks over one set of outputs: each mask's smoothing spline as a rank-S downdate of one fit.

Same objective and convention as :mod:`gcc_jax.spline._kalman`. In Monte Carlo one set of worker
outputs ``y`` is decoded under many masks, typically all with the same number ``S`` of
stragglers. Then every mask's fit has the same ``λ' = (n − S) λ``, and each is a rank-``S`` change
of one fit that gives every worker weight 1. With ``Ω`` the roughness matrix of the nodes
(``gᵀ Ω g = ∫ s''²`` for the natural cubic spline through the values ``g``) and ``c = λ'``, that
fit has node values ``B y``, ``B = (I + cΩ)⁻¹``, and values ``G y`` at the query points. A mask
with dead set ``d`` removes ``S`` unit weights, ``A = I + cΩ − U_d U_dᵀ``; the Woodbury identity
and ``I − B = c P``, ``P = (I + cΩ)⁻¹ Ω``, give

    ``ŝ(tq) = G y − G[:, d] (P_dd)⁻¹ (P y)_d``

— the stragglers' ``y_d`` drop out exactly, and ``P_dd`` is positive definite whenever at least
two workers are live. Per mask that is one ``S × S`` inverse and a ``K × S`` product, after one
precomputation of ``G``, ``P``, ``G y`` and ``P y`` per call (``O(n³)``), instead of a pass over
all ``n`` nodes: at ``N = 100, S = 10`` about 3x fewer operations than applying a precomputed
``K × N`` decoder matrix. ``G`` and ``P`` do not depend on ``y``: a caller that decodes many
batches with one code and one ``S`` computes them once (:func:`downdate_plan`, a
:class:`DowndatePlan`; :meth:`gcc_jax.SplineCode.decode_init` keeps it per code object) and
passes them in.

``P`` (any positive multiple of it gives the same ``ŝ``) is formed in whichever of two forms is
accurate for the given ``c``:

* ``P = Q (R + c QᵀQ)⁻¹ Qᵀ``, with Reinsch's band matrices (``Ω = Q R⁻¹ Qᵀ``; a Cholesky solve):
  exact as ``c → 0`` (``P → Ω``: interpolation, λ = 0 included), ill-conditioned for large ``c``;
* ``c P = I − B``, with ``B`` from the Kalman pass (:func:`gcc_jax.spline._kalman.smooth_nodes`)
  of the identity: accurate for large ``c``, but it cancels as ``c → 0``.

The first is used when ``c ≤ h̄³`` (``h̄`` the mean node spacing, time normalised to [−1, 1]),
the second otherwise (at the crossover both agree with the Kalman pass to ~1e-14).

When it applies (:func:`gcc_jax.spline.decode_path` decides statically; the rest is checked per
chunk of masks, and a chunk that fails goes through the Kalman pass, the same values to
rounding):

* ``64 ≤ n ≤ 1024`` workers and chunks of at least 32 masks (static: below them the O(n) pass
  is cheap and the extra compilation does not pay);
* every mask whose status is OK has the base's ``S ≤ 24`` stragglers;
* in every output column at least ``S + 1`` workers have ``|y|`` within a factor ``SPREAD`` of
  the column's largest (else ``S`` or fewer workers, perhaps the stragglers, hold the column's
  largest values: a straggler's huge output would dominate the shared ``P y``, and its exact
  cancellation would cost digits);
* every ``P_dd`` is well conditioned: ``κ∞(P̃_dd) ≤ 1/RCOND`` for its Jacobi scaling
  ``P̃_dd = D^{-1/2} P_dd D^{-1/2}`` (``D = diag P``; unit diagonal), computed exactly from the
  inverse (:func:`downdate`). Contiguous blocks of stragglers at small λ make ``P_dd``
  ill-conditioned (a discrete fourth difference); those chunks fall back.

The scaling is done once, in the base: the masks gather from ``P̃ = D^{-1/2} P D^{-1/2}``,
``G D^{-1/2}`` and ``D^{-1/2} P y``, which give the same ``ŝ``. It matters at small λ: there
``P → Ω``, whose diagonal spans the node spacing's range cubed, so the unscaled ``κ∞(P_dd)``
grows with ``n`` while the scaled one stays small, and the error follows the scaled one
(about ``11 ε κ̃`` in float64).

``SPREAD`` and ``RCOND`` depend on the precision: ``1e3`` and ``1e-6`` in float64; ``10`` and
``1e-2`` (``κ̃ ≤ 100``) in float32, where the error grows like ``κ`` times float32's rounding.
On what passes the gates the downdate agrees with the float64 Kalman pass to about 3e-11
relative in float64 and 3e-5 in float32, no worse than the float32 Kalman pass itself
(``bench/downdate_error.py``; the tables are in ``bench/README.md``).

The per-mask solves are sized by the smallest of ``SIZES`` that holds ``S`` (the number of
stragglers is a value, not a shape: a new ``S`` never recompiles); unused slots are identity.
"""

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.checks import map_chunks
from .._core.sanitise import Sanitised, sanitise
from .._core.types import Array, Bool, Float, Int
from ._decode import MAX_STRAGGLERS, DecodePath, decode_path
from ._kalman import finish, scale_free, smooth_batch_with_status, smooth_nodes

__all__ = [
    "SIZES",
    "DowndatePlan",
    "dead_workers",
    "downdate",
    "downdate_chunks",
    "downdate_plan",
    "interpolation_matrix",
    "operator",
    "prepare",
    "reinsch_p",
    "smooth_chunks",
    "solvable",
    "sweep_inverse",
]

# static solve sizes, S up to MAX_STRAGGLERS: each size is a branch compiled into every program
# that uses the downdate (tens of MB more peak memory each), so there are few
SIZES = (0, 12, MAX_STRAGGLERS)
UNROLL = 12  # solve sizes up to this are swept in straight-line code, larger ones in a loop
# per float width (bits): at least S + 1 workers must have |y| >= (largest of the column) / SPREAD,
# and the smallest accepted reciprocal condition number 1/κ∞ of P_dd. float32 keeps 7 digits,
# so it accepts less cancellation and less amplification (module docstring)
SPREAD = {32: 1e1, 64: 1e3}
RCOND = {32: 1e-2, 64: 1e-6}
HIGHEST = lax.Precision.HIGHEST
_mm = functools.partial(jnp.matmul, precision=HIGHEST)  # full precision on every backend


def solvable(dead: Int[Array, ""], n: int) -> Bool[Array, ""]:
    """Whether the downdate's solves hold ``dead`` stragglers of ``n`` workers (run time: the
    static choice is :func:`gcc_jax.spline.decode_path`'s)."""
    return (dead >= 0) & (dead <= MAX_STRAGGLERS) & (dead <= n - 2)


class Base(NamedTuple):
    """The shared full fit for masks with ``dead`` stragglers (see the module docstring)."""

    g: Float[Array, "q n1"]  # G D^{-1/2} (D = diag P), with a zero column for unused solve slots
    p: Float[Array, "n n"]  # D^{-1/2} P D^{-1/2}: unit diagonal
    gy: Float[Array, "q r"]  # G y (y divided by scale)
    py: Float[Array, "n1 r"]  # D^{-1/2} P y, with a zero row for unused slots
    scale: Float[Array, " r"]  # per-column data scale
    dead: Int[Array, ""]  # S
    ok: Bool[Array, ""]  # S ≤ max(SIZES), live ≥ 2, spread and finiteness checks passed


class BandRow(NamedTuple):
    """Row ``j`` of the banded Cholesky factor ``L`` (lower bandwidth 2)."""

    l0: Float[Array, "*j"]  # L[j, j]
    l1: Float[Array, "*j"]  # L[j, j − 1]
    l2: Float[Array, "*j"]  # L[j, j − 2]


class FactorCarry(NamedTuple):
    """What row ``j`` of the factor needs of rows ``j − 1`` and ``j − 2``."""

    diag_1: Float[Array, ""]  # L[j − 1, j − 1]
    sub_1: Float[Array, ""]  # L[j − 1, j − 2]
    diag_2: Float[Array, ""]  # L[j − 2, j − 2]


class Recent(NamedTuple):
    """The two most recent rows of a banded substitution."""

    last: Float[Array, " n"]
    before: Float[Array, " n"]


def reinsch_p(tau: Float[Array, " n"], c: Float[Array, ""]) -> Float[Array, "n n"]:
    """``Q (R + c QᵀQ)⁻¹ Qᵀ = (I + cΩ)⁻¹ Ω`` for strictly increasing nodes ``tau`` (``n ≥ 3``).

    ``Q`` (``n × (n−2)``) holds the second divided differences, ``R`` (``(n−2)²``, tridiagonal)
    the integrals of products of hat functions, so that ``Ω = Q R⁻¹ Qᵀ`` (Green & Silverman
    1994, §2.1). ``A = R + c QᵀQ`` is symmetric positive definite for every ``c ≥ 0`` and
    pentadiagonal, so it is factored as ``A = L Lᵀ`` with ``L`` of lower bandwidth 2 (the
    Cholesky factor of the dense matrix, without its zeros), ``X = A⁻¹ Qᵀ`` comes from one
    forward and one backward substitution over the rows, and ``P = Q X`` from three shifted rows
    per row: ``O(n²)`` in all, against ``O(n³)`` for dense Cholesky (equal to it to 1e-14
    relative for ``c ≤ h̄³``, where the base uses it).
    """
    n = tau.shape[0]
    dtype = tau.dtype
    h = jnp.diff(tau)
    qa, qc = 1.0 / h[:-1], 1.0 / h[1:]  # column j of Q: qa_j, qb_j, qc_j at rows j, j+1, j+2
    qb = -qa - qc
    zero, one = jnp.zeros((1,), dtype), jnp.ones((), dtype)
    diag = (h[:-1] + h[1:]) / 3.0 + c * (qa * qa + qb * qb + qc * qc)  # A[j, j]
    sub1 = h[1:-1] / 6.0 + c * (qb[:-1] * qa[1:] + qc[:-1] * qb[1:])  # A[j + 1, j]
    sub2 = c * qc[:-2] * qa[2:]  # A[j + 2, j]

    def factor(carry: FactorCarry, row) -> tuple[FactorCarry, BandRow]:  # row j of L
        d_j, e_j, f_j = row
        l2 = f_j / carry.diag_2
        l1 = (e_j - l2 * carry.sub_1) / carry.diag_1
        l0 = jnp.sqrt(d_j - l1 * l1 - l2 * l2)
        return FactorCarry(diag_1=l0, sub_1=l1, diag_2=carry.diag_1), BandRow(l0, l1, l2)

    rows = (diag, jnp.concatenate([zero, sub1]), jnp.concatenate([zero, zero, sub2]))
    _, band = lax.scan(factor, FactorCarry(diag_1=one, sub_1=0 * one, diag_2=one), rows)
    cols = jnp.arange(n)

    def forward(carry: Recent, row) -> tuple[Recent, Array]:  # L Z = Qᵀ
        j, a_j, b_j, c_j, l_j = row
        q_j = jnp.where(
            cols == j, a_j, jnp.where(cols == j + 1, b_j, jnp.where(cols == j + 2, c_j, 0))
        )
        z = (q_j - l_j.l1 * carry.last - l_j.l2 * carry.before) / l_j.l0
        return Recent(last=z, before=carry.last), z

    zeros_n = jnp.zeros((n,), dtype)
    _, z = lax.scan(forward, Recent(zeros_n, zeros_n), (jnp.arange(n - 2), qa, qb, qc, band))

    def backward(carry: Recent, row) -> tuple[Recent, Array]:  # Lᵀ X = Z
        z_j, l0_j, l1_next, l2_next = row
        x = (z_j - l1_next * carry.last - l2_next * carry.before) / l0_j
        return Recent(last=x, before=carry.last), x

    l0, l1, l2 = band
    below = (z, l0, jnp.concatenate([l1[1:], zero]), jnp.concatenate([l2[2:], zero, zero]))
    _, x = lax.scan(backward, Recent(zeros_n, zeros_n), below, reverse=True)
    pad = jnp.zeros((2, n), dtype)
    x = jnp.concatenate([pad, x, pad])  # row i + 2 holds X_i
    a = jnp.concatenate([qa, zero, zero])[:, None]  # Q[i, i]
    b = jnp.concatenate([zero, qb, zero])[:, None]  # Q[i, i − 1]
    c_ = jnp.concatenate([zero, zero, qc])[:, None]  # Q[i, i − 2]
    return a * x[2 : n + 2] + b * x[1 : n + 1] + c_ * x[:n]


def interpolation_matrix(tau: Float[Array, " n"], x: Float[Array, " q"]) -> Float[Array, "q n"]:
    """``E`` with ``E g`` the natural cubic spline through the node values ``g`` at ``tau``
    (strictly increasing, ``n ≥ 3``), evaluated at ``x``; linear beyond the end nodes.

    On the interval ``[τ_i, τ_{i+1}]`` (``h = τ_{i+1} − τ_i``, ``a = (τ_{i+1} − x)/h``,
    ``b = 1 − a``) the spline is ``a g_i + b g_{i+1} + ((a³ − a) γ_i + (b³ − b) γ_{i+1}) h²/6``,
    its second derivatives ``γ = (0, R⁻¹Qᵀ g, 0)`` (Green & Silverman 1994, §2.1; ``Q``, ``R``
    as in :func:`reinsch_p`); beyond an end node the cubes drop out (the natural spline's linear
    continuation). ``E = A + C R⁻¹ Qᵀ``, with ``A`` and ``C`` two entries per row: one
    tridiagonal solve with ``q`` right-hand sides (``O(n q)``). The downdate's base takes the
    fit at the query points as ``G = E B`` from its node values ``B``: one Kalman pass fewer per
    base than smoothing the identity at the query points (equal to 1.8e-12 relative up to
    n = 1024, float64).
    """
    n, q = tau.shape[0], x.shape[0]
    dtype = tau.dtype
    h = jnp.diff(tau)
    i = jnp.clip(jnp.searchsorted(tau, x, side="right") - 1, 0, n - 2)  # interval of each x
    hi = h[i]
    a = (tau[i + 1] - x) / hi
    b = (x - tau[i]) / hi
    ca = (jnp.where(x > tau[-1], 0.0, a**3) - a) * hi**2 / 6.0
    cb = (jnp.where(x < tau[0], 0.0, b**3) - b) * hi**2 / 6.0
    rows = jnp.arange(q)
    lin = jnp.zeros((q, n), dtype).at[rows, i].add(a).at[rows, i + 1].add(b)
    cub = jnp.zeros((q, n), dtype).at[rows, i].add(ca).at[rows, i + 1].add(cb)[:, 1:-1]
    zero = jnp.zeros((1,), dtype)
    sub = h[1:-1] / 6.0  # R[j + 1, j]
    v = lax.linalg.tridiagonal_solve(  # R⁻¹ Cᵀ, (n − 2, q)
        jnp.concatenate([zero, sub]), (h[:-1] + h[1:]) / 3.0, jnp.concatenate([sub, zero]), cub.T
    )
    qa, qc = 1.0 / h[:-1], 1.0 / h[1:]  # Q's columns, as in reinsch_p
    qb = -qa - qc
    pad = jnp.zeros((2, q), dtype)
    v = jnp.concatenate([pad, v, pad])  # row r + 2 holds (R⁻¹ Cᵀ)_r
    qv = (
        jnp.concatenate([qa, zero, zero])[:, None] * v[2 : n + 2]
        + jnp.concatenate([zero, qb, zero])[:, None] * v[1 : n + 1]
        + jnp.concatenate([zero, zero, qc])[:, None] * v[:n]
    )  # Q R⁻¹ Cᵀ, (n, q)
    return lin + qv.T


class DowndatePlan(NamedTuple):
    """What a :class:`Base` takes from the nodes, ``λ`` and ``S`` only (not the outputs ``y``):
    computed once per code and straggler count by :func:`downdate_plan`, or per call of
    :func:`downdate_chunks`.

    It keeps the nodes, ``λ`` and query points it was computed from, so a plan passed to
    :func:`smooth_chunks` is used only when they are the ones decoded with (and ``S`` is the
    base's); otherwise it is recomputed."""

    g: Float[Array, "q n1"]  # G D^{-1/2} (D = diag P), with a zero column for unused solve slots
    p: Float[Array, "n n"]  # D^{-1/2} P D^{-1/2}: unit diagonal
    root: Float[Array, " n"]  # D^{1/2}
    ok: Bool[Array, ""]  # P and G finite, diag P > 0
    t: Float[Array, " n"]  # the nodes, λ, query points and S it was computed for
    lam: Float[Array, ""]
    tq: Float[Array, " q"]
    dead: Int[Array, ""]


def operator(
    t: Float[Array, " n"], lam: Float[Array, ""], tq: Float[Array, " q"], dead: Int[Array, ""]
) -> DowndatePlan:
    """The part of the base that does not depend on ``y``: ``G̃``, ``P̃`` and ``D^{1/2}`` for
    masks with ``dead`` stragglers (sanitised ``t``, ``lam``)."""
    dtype = t.dtype
    n = t.shape[0]
    eye = jnp.eye(n, dtype=dtype)
    ones = jnp.ones((n,), dtype)
    live = (n - dead).astype(dtype)
    lam_fit = lam * live / n  # the Kalman passes use λ' = (Σw) λ = n · lam_fit
    mid, half, c = scale_free(t, lam, live)
    tau = (t - mid) / half
    small_c = c * ((n - 1) / 2.0) ** 3 <= 1.0  # c ≤ h̄³

    def from_reinsch():
        p = reinsch_p(tau, c)
        return p, eye - c * p

    def from_kalman():
        b = smooth_nodes(t, ones, lam_fit, eye)[0]
        return eye - b, b

    # only the accurate form of P is computed, with the fit's node values B = I − cP
    p, b = lax.cond(small_c, from_reinsch, from_kalman)
    g = _mm(interpolation_matrix(tau, (tq - mid) / half), b)  # (q, n): the fit at the query points
    # Jacobi scaling, once for every mask: with D = diag(P), P_dd⁻¹ = D_d^{-1/2} P̃_dd⁻¹ D_d^{-1/2}
    # for P̃ = D^{-1/2} P D^{-1/2}, so the masks use P̃ and G D^{-1/2}, D^{-1/2} P y instead
    diag = jnp.diagonal(p)
    root = jnp.sqrt(jnp.where(diag > 0, diag, 1.0))
    ok = jnp.all(diag > 0) & jnp.all(jnp.isfinite(p)) & jnp.all(jnp.isfinite(g))
    zero_col = jnp.zeros((g.shape[0], 1), dtype)
    return DowndatePlan(
        g=jnp.concatenate([g / root[None, :], zero_col], axis=1),
        p=p / (root[:, None] * root[None, :]),
        root=root,
        ok=ok,
        t=t,
        lam=lam,
        tq=tq,
        dead=jnp.asarray(dead, jnp.int32),
    )


@jax.jit
def downdate_plan(
    t: Float[Array, " n"], lam: Float[Array, ""], tq: Float[Array, " q"], dead: Int[Array, ""]
) -> DowndatePlan:
    """:func:`operator` as its own compiled call, to be passed to :func:`smooth_chunks` by a
    caller that decodes many batches with the same nodes, ``λ``, query points and ``S``
    (:meth:`gcc_jax.SplineCode.decode_init`). Only valid ``t`` and ``λ ≥ 0`` make a plan that
    is used (a plan for others does not match the sanitised ones and is recomputed)."""
    return operator(t, lam, tq, dead)


def prepare(plan: DowndatePlan, y: Float[Array, "n r"]) -> Base:
    """The base for masks with ``plan.dead`` stragglers: the ``y``-independent ``plan``
    (:func:`operator` of the sanitised nodes, ``λ``, query points and ``S``) applied to the
    finite data ``y``."""
    dtype = plan.t.dtype
    n = plan.t.shape[0]
    dead = plan.dead
    mag = jnp.abs(y)
    top = jnp.max(mag, axis=0)
    # the (S+1)-th largest |y| of each column is within SPREAD of its largest exactly when at
    # least S + 1 of them are (a count, cheaper than sorting the column)
    near = jnp.sum(mag * SPREAD[jnp.finfo(dtype).bits] >= top, axis=0)
    scale = jnp.where(top > 0, top, 1.0)
    ys = y / scale
    # D^{1/2} y: G y = (G D^{-1/2}) D^{1/2} y and D^{-1/2} P y = P̃ D^{1/2} y
    yr = ys * plan.root[:, None]
    gy, py = _mm(plan.g[:, :n], yr), _mm(plan.p, yr)
    ok = solvable(dead, n) & jnp.all(near >= dead + 1) & plan.ok
    zero_row = jnp.zeros((1, y.shape[1]), dtype)
    return Base(
        g=plan.g,
        p=plan.p,
        gy=gy,
        py=jnp.concatenate([py, zero_row], axis=0),
        scale=scale,
        dead=dead,
        ok=ok,
    )


def dead_workers(masks: Bool[Array, "p n"], size: int) -> Int[Array, "size p"]:
    """The first ``size`` dead workers of each mask in increasing order, ``n`` in unused slots.

    Each mask's dead workers are packed into ``⌈n/32⌉`` 32-bit words (bit ``i`` of word ``w``
    is worker ``32w + i``), with the masks as the vector axis; slot ``k`` then takes the lowest
    set bit of the first non-zero word (``31 − clz(v & −v)``) and clears it (``v & (v − 1)``).
    That is ``O(size · n/32)`` integer operations a mask, against ``O(size · n)`` for counting
    the dead workers below each position (``bench/dead_workers.py`` times the two).

    The indices are int32 whatever the precision (int64 indices are markedly slower).
    """
    num, n = masks.shape
    words_per_mask = -(-n // 32)
    dead = jnp.pad(~masks, ((0, 0), (0, 32 * words_per_mask - n)))  # (p, 32 · words)
    bits = jnp.arange(32, dtype=jnp.uint32)
    words = jnp.sum(  # distinct bits: the sum is their OR
        dead.reshape(num, words_per_mask, 32).astype(jnp.uint32) << bits, axis=2, dtype=jnp.uint32
    ).T  # (words, p)
    which = jnp.arange(words_per_mask, dtype=jnp.int32)[:, None]
    one = jnp.uint32(1)
    slots = []
    for _ in range(size):
        first = jnp.min(jnp.where(words != 0, which, words_per_mask), axis=0)  # (p,)
        at = which == first[None]
        word = jnp.sum(jnp.where(at, words, 0), axis=0, dtype=jnp.uint32)
        bit = 31 - lax.clz(word & (~word + one)).astype(jnp.int32)  # its lowest set bit
        slots.append(jnp.where(first < words_per_mask, 32 * first + bit, n))
        words = jnp.where(at, words & (words - one), words)  # clear that bit
    return jnp.stack(slots).astype(jnp.int32)


def sweep_inverse(a: Float[Array, "s s p"]) -> tuple[Float[Array, "s s p"], Float[Array, "s p"]]:
    """Inverses of symmetric positive definite ``a[:, :, i]``, and the pivots met on the way.

    Goodnight's sweep of every index in turn (Gauss–Jordan in place, no pivoting, which positive
    definiteness makes unnecessary): sweeping ``k`` maps ``a_ij ↦ a_ij − a_ik a_kj / a_kk``
    (``i, j ≠ k``), ``a_kj ↦ a_kj / a_kk``, ``a_ik ↦ a_ik / a_kk``, ``a_kk ↦ −1 / a_kk``; after
    all ``s`` sweeps ``a`` is ``−a⁻¹``. Symmetry keeps row ``k`` equal to column ``k``, so each
    sweep is one rank-1 update and two slice writes over the masks as the vector axis (on CPU 2.2x
    faster than masking the row and column with ``where``; LAPACK's batched LU on ``p`` tiny
    matrices is slower still). A non-positive pivot means ``a`` is not numerically positive
    definite.
    """

    def sweep(a, k):
        row = lax.dynamic_index_in_dim(a, k, 0, keepdims=False)
        pivot = lax.dynamic_index_in_dim(row, k, 0, keepdims=False)
        inv = 1.0 / pivot
        scaled = row * inv
        a = a - row[:, None] * scaled[None]
        scaled = lax.dynamic_update_index_in_dim(scaled, -inv, k, 0)
        a = lax.dynamic_update_index_in_dim(a, scaled, k, 0)
        return lax.dynamic_update_index_in_dim(a, scaled, k, 1), pivot

    size = a.shape[0]
    if size <= UNROLL:  # static indices: faster straight-line code for small sizes
        pivots = []
        for k in range(size):
            a, pivot = sweep(a, k)
            pivots.append(pivot)
        return -a, jnp.stack(pivots)

    def body(k, carry):  # larger sizes: a loop compiles in a fraction of the time
        a, pivots = carry
        a, pivot = sweep(a, k)
        return a, lax.dynamic_update_index_in_dim(pivots, pivot, k, 0)

    a, pivots = lax.fori_loop(0, size, body, (a, jnp.zeros((size, *a.shape[2:]), a.dtype)))
    return -a, pivots


def downdate(
    base: Base, masks: Bool[Array, "p n"], size: int
) -> tuple[Float[Array, "q r p"], Bool[Array, " p"]]:
    """``G y − G[:, d] (P_dd)⁻¹ (P y)_d`` for masks with at most ``size`` stragglers (static),
    and whether each ``P_dd`` is well enough conditioned for it.

    The base holds the Jacobi-scaled ``P̃`` (unit diagonal) with ``G`` and ``P y`` scaled to
    match, so the masks invert ``P̃_dd``, outright (:func:`sweep_inverse`), which gives its
    condition number ``κ∞ = ‖P̃_dd‖∞ ‖P̃_dd⁻¹‖∞`` exactly: a mask passes when
    ``κ∞ ≤ 1/RCOND`` and every pivot is positive. Unused slots (fewer than ``size`` stragglers)
    are identity rows and columns with a zero right-hand side, so they contribute nothing (and
    are left out of the norms). The masks are the last (vector) axis of every intermediate
    array and of the values ``(q, r, p)``: the caller moves them first after its conditional
    (with the Kalman pass's values, also masks last), where XLA fuses the transposition into
    what reads them (faster than moving them here).
    """
    num, n = masks.shape
    if size == 0:
        return jnp.broadcast_to(
            (base.gy * base.scale)[:, :, None], (*base.gy.shape, num)
        ), jnp.ones(num, bool)
    dead = dead_workers(masks, size)  # (size, p)
    unused = dead == n
    idx = jnp.where(unused, 0, dead)
    a = base.p[idx[:, None, :], idx[None, :, :]]  # (size, size, p)
    eye = jnp.eye(size, dtype=a.dtype)[:, :, None]
    a = jnp.where(unused[:, None, :] | unused[None, :, :], eye, a)
    inv, pivots = sweep_inverse(a)
    # both matrices' absolute row sums in one pass: a two-operand reduction, which XLA's CPU
    # backend emits itself (two single sums would be two library calls per chunk)
    zero = jnp.zeros((), a.dtype)
    rows, rows_inv = lax.reduce(
        (jnp.abs(a), jnp.abs(inv)), (zero, zero), lambda x, y: (x[0] + y[0], x[1] + y[1]), (1,)
    )
    norm = jnp.max(jnp.where(unused, 0.0, rows), axis=0)  # over the used rows
    norm_inv = jnp.max(jnp.where(unused, 0.0, rows_inv), axis=0)
    rcond = RCOND[jnp.finfo(a.dtype).bits]
    good = (norm * norm_inv * rcond <= 1.0) & jnp.all(pivots > 0, axis=0)
    rhs = base.py.T[:, dead]  # (r, size, p); zero in unused slots
    # two batched products (batch axis last); written as sums of broadcast products they run 1.8x
    # slower inside the conditional that selects this solve size
    z = jnp.einsum("ijp,rjp->rip", inv, rhs, precision=HIGHEST)  # P_dd⁻¹ (P y)_d
    corr = jnp.einsum("qjp,rjp->qrp", base.g[:, dead], z, precision=HIGHEST)
    return (base.gy[:, :, None] - corr) * base.scale[None, :, None], good


def _first_ok_dead(s: Sanitised) -> Int[Array, ""]:
    """Stragglers in the first mask whose status is OK (0 if none)."""
    first = jnp.argmax(s.status == 0)
    return jnp.where(s.status[first] == 0, s.dead[first], 0).astype(jnp.int32)


def smooth_chunks(
    t: Float[Array, " n"],
    lam: Float[Array, ""],
    y: Float[Array, "n r"],
    tq: Float[Array, " q"],
    chunks: Bool[Array, "g p n"],
    then: Callable[[Float[Array, "p q r"], Int[Array, " p"]], Any],
    plan: DowndatePlan | None = None,
):
    """``then(values, status)`` of every chunk of masks, stacked over the chunks.

    ``values`` ``(p, q, r)`` and ``status`` ``(p,)`` equal (to rounding)
    :func:`gcc_jax.spline._kalman.smooth_batch_with_status` of the chunk. When ``n`` and the
    chunk width pass the static gates, every chunk is first downdated from one base
    (:func:`downdate_chunks`); the chunks whose masks did not fit it, if any, then take the Kalman
    pass, so the control flow is decided once per call, not per chunk (a conditional per chunk
    choosing between the two is slower). ``plan`` (:func:`downdate_plan`) saves the base's
    ``y``-independent part (see :func:`downdate_chunks`).
    """
    num, n = chunks.shape[1:]

    def kalman(masks):
        return then(*smooth_batch_with_status(t, masks, lam, y, tq))

    if decode_path("kalman", n, masks=num) is not DecodePath.DOWNDATE:
        return map_chunks(kalman, chunks)
    out, fast = downdate_chunks(t, lam, y, tq, chunks, then, plan)

    def redo(out):  # the Kalman pass for the chunks the downdate did not take
        def one(xs):
            fast_i, masks, out_i = xs
            return lax.cond(fast_i, lambda o: o, lambda o: kalman(masks), out_i)

        return map_chunks(one, (fast, chunks, out))

    # XLA copies ``out`` through this conditional (cheap for the mask evaluator's per-chunk
    # losses, a few hundred bytes)
    return lax.cond(jnp.all(fast), lambda o: o, redo, out)


def downdate_chunks(
    t: Float[Array, " n"],
    lam: Float[Array, ""],
    y: Float[Array, "n r"],
    tq: Float[Array, " q"],
    chunks: Bool[Array, "g p n"],
    then: Callable[[Float[Array, "p q r"], Int[Array, " p"]], Any],
    plan: DowndatePlan | None = None,
) -> tuple[Any, Bool[Array, " g"]]:
    """``then(values, status)`` of every chunk downdated from one base, and whether each chunk's
    values stand (else they are to be replaced by the Kalman pass's).

    The base is the full fit for the number of stragglers of the first chunk's first valid mask,
    computed once (only when every valid mask of that chunk has that number and the solves can
    hold it: otherwise, e.g. S = n/10 at n = 1000, it would cost more than the Kalman pass of a
    whole block). A chunk's values stand when the base is usable, each of its valid masks has the
    base's number of stragglers, and each such mask's ``P_dd`` passed the condition check
    (:func:`downdate`). Masks that are not valid or have another number of stragglers are
    decoded as the mask whose first ``S`` workers straggle (finite, discarded), so nothing
    undefined enters the arithmetic. The solve size is chosen once for all chunks.

    ``plan``: a :class:`DowndatePlan` from :func:`downdate_plan`, used for the base's
    ``y``-independent part (its Kalman pass of the identity, most of the base's cost) when its
    nodes, ``λ``, query points and ``S`` equal the (sanitised) ones of this call, else
    recomputed here; one of another dtype or shape is not used. Derivatives do not flow through
    a plan's arrays.
    """
    num, n = chunks.shape[1:]
    s0 = sanitise(t, lam, y, chunks[0])
    dead = _first_ok_dead(s0)
    same = jnp.all((s0.dead == dead) | (s0.status != 0))
    usable = same & solvable(dead, n)
    expected = jax.eval_shape(operator, s0.t, s0.lam, tq, dead)
    shapes = jax.eval_shape(prepare, expected, s0.y)
    unused = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)  # ok = False
    # static: a plan of another structure, shape or dtype is not used
    fits = (
        plan is not None
        and jax.tree.structure(plan) == jax.tree.structure(expected)
        and all(
            (jnp.shape(a), jnp.result_type(a)) == (b.shape, b.dtype)
            for a, b in zip(jax.tree.leaves(plan), jax.tree.leaves(expected), strict=True)
        )
    )

    def build():
        def fresh():
            return operator(s0.t, s0.lam, tq, dead)

        if not fits:
            return prepare(fresh(), s0.y)
        matches = (
            (plan.dead == dead)
            & (plan.lam == s0.lam)
            & jnp.all(plan.t == s0.t)
            & jnp.all(plan.tq == tq)
        )
        return prepare(lax.cond(matches, lambda: plan, fresh), s0.y)

    base = lax.cond(usable, build, lambda: unused)
    fill = jnp.arange(n, dtype=jnp.int32)[None, :] >= base.dead  # a mask with S stragglers

    def sized(size):
        def one(masks):
            s = sanitise(t, lam, y, masks)
            bad = s.status != 0
            other = s.dead != base.dead
            values, good = downdate(base, jnp.where((bad | other)[:, None], fill, s.masks), size)
            fast = ~jnp.any(other & ~bad) & jnp.all(good | bad)
            return then(*finish(values, s.status)), fast

        return lambda: map_chunks(one, chunks)

    branches = [sized(size) for size in SIZES]
    shapes = jax.eval_shape(branches[0])
    size_index = jnp.minimum(jnp.searchsorted(jnp.asarray(SIZES), base.dead), len(SIZES) - 1)
    return lax.cond(
        base.ok,
        lambda: lax.switch(size_index, branches),
        lambda: jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes),  # fast: False
    )
