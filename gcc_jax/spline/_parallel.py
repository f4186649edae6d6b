"""Parallel-in-time smoothing spline (``solver="parallel"``): O(log n) depth, values and slopes.

Same objective and convention as :mod:`gcc_jax.spline._fit`: minimise
``Σ_i w_i (y_i − s(t_i))² + λ' ∫ s''²`` with ``w_i ≥ 0`` and ``λ' = (Σw) λ``; the minimiser is
the natural cubic spline with knots at the live (``w_i > 0``) nodes. :func:`solve_parallel`
returns its values and slopes at every node, like the sequential ``"kalman"`` solver
(:mod:`gcc_jax.spline._kalman`), so :class:`gcc_jax.Spline` evaluates both the same way.

Model (Wahba 1978). The state ``x = (s, s')`` is an integrated Wiener process,
``x_k = F_k x_{k−1} + ε_k`` with ``F_k = [[1, h_k], [0, 1]]`` and
``Var ε_k = q [[h³/3, h²/2], [h²/2, h]]`` (``h_k = t_k − t_{k−1}``), observed as
``y_k = s_k + δ_k`` with ``Var δ_k = r / w_k``; only ``r/q = λ'`` matters. A virtual node
``x_0`` one step before ``t_1`` carries the diffuse (flat) prior; the posterior mean of ``x``
is the smoothing spline.

Method (Särkkä & García-Fernández 2021, "Temporal parallelization of Bayesian smoothers",
IEEE TAC 66(1)). Everything is first computed *conditional on* ``x_0``, which makes every
distribution proper:

* Filter. Each node ``k`` is an element ``(A, b, C, η, J)``:
  ``p(x_k | y_k, x_{k−1}) = N(A x_{k−1} + b, C)`` and
  ``p(y_k | x_{k−1}) ∝ exp(−½ x_{k−1}ᵀ J x_{k−1} + ηᵀ x_{k−1})``. With
  ``g = w/(w Q_00 + r)`` (0 for a straggler), ``K = g Q e_0``:
  ``A = (I − K e_0ᵀ) F``, ``b = K y``, ``C = Q − g Q e_0 e_0ᵀ Q``, ``η = g Fᵀ e_0 y``,
  ``J = g Fᵀ e_0 e_0ᵀ F``. Two elements (``i`` before ``j``) combine associatively:
  ``A = A_j X⁻¹ A_i``, ``b = A_j X⁻¹ (b_i + C_i η_j) + b_j``, ``C = A_j X⁻¹ C_i A_jᵀ + C_j``,
  ``η = A_iᵀ X⁻ᵀ (η_j − J_j b_i) + η_i``, ``J = A_iᵀ X⁻ᵀ J_j A_i + J_i`` with
  ``X = I + C_i J_j``. A prefix scan (depth O(log n), :func:`_prefix_scan`) gives
  ``p(x_k | y_{1:k}, x_0) = N(A⁽ᵏ⁾ x_0 + b⁽ᵏ⁾, C⁽ᵏ⁾)``; the last prefix's ``(η, J)`` is the
  likelihood of all data in ``x_0``, so the diffuse posterior mean of ``x_0`` is
  ``β = J⁻¹ η`` (the de Jong 1991 GLS step; ``J`` is definite with 2 live nodes).
* Smoother. Node ``k < n`` is the affine map ``m^s_k = E_k m^s_{k+1} + g_k`` with
  ``E_k = P_k Fᵀ (F P_k Fᵀ + Q)⁻¹`` (``F, Q`` of the step ``k → k+1``, ``P_k = C⁽ᵏ⁾``) and
  ``g_k = m_k − E_k F m_k``; node ``n`` is ``(0, m_n)``. Maps compose associatively; a reverse
  prefix scan gives every smoothed mean. The means are affine in ``x_0``: they are carried as
  ``[A⁽ᵏ⁾ | b⁽ᵏ⁾]`` (two ``x_0`` columns beside the data columns), and the answer is
  ``E[x_k | y] = D_k β + d_k`` for ``m^s_k = [D_k | d_k]``.

Scaling (as the sequential solver, so float32 keeps its digits): time is mapped to
``τ = (t − t_c)/L`` (``λ' → λ'/L³``); ``(q, r) = (1, λ')`` for ``λ' ≤ 1`` else ``(1/λ', 1)``;
the slope is held in units of the local spacing ``ρ_k = max(h_k, h_{k+1})`` (a change of
variables per node, which the element algebra respects); each data column is divided by its
largest live ``|y|``. Depth O(log n), work O(n log n) (Hillis–Steele rounds), meant for many
cores (GPU/TPU); on a CPU it pays for one data column up to moderate ``n``
(:data:`gcc_jax.spline.AUTO_PARALLEL_MAX_N_CPU`, ``bench/parallel.py``).

Accuracy: equal to ``"kalman"`` to about 1e-12 relative in float64 on Chebyshev and equispaced
nodes; at λ = 0 on clustered random nodes the 2×2 solves lose digits when a gap is followed by
a near-duplicate node. In float32 within 1e-4 of float64 (the tests' tolerance at n = 300);
figures in ``bench/README.md``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.types import Array, Float
from ._kalman import noise_split, scale_free

__all__ = ["solve_parallel"]


def _mm(a: Array, b: Array) -> Array:
    """Batched ``a @ b`` for ``a (…, 2, 2)`` and ``b (…, 2, c)``, elementwise (fuses on CPU)."""
    return a[..., :, 0:1] * b[..., None, 0, :] + a[..., :, 1:2] * b[..., None, 1, :]


def _tr(a: Array) -> Array:
    return jnp.swapaxes(a, -1, -2)


def _inv(a: Array) -> Array:
    """Batched inverse of ``(…, 2, 2)`` matrices: the adjugate, scaled so ``det`` can't overflow."""
    s = lax.stop_gradient(jnp.max(jnp.abs(a), axis=(-2, -1), keepdims=True))
    s = jnp.where(s > 0, s, 1.0)
    a = a / s
    a00, a01, a10, a11 = a[..., 0, 0], a[..., 0, 1], a[..., 1, 0], a[..., 1, 1]
    det = a00 * a11 - a01 * a10
    adj = jnp.stack([jnp.stack([a11, -a01], -1), jnp.stack([-a10, a00], -1)], -2)
    return adj / (det[..., None, None] * s)


def _prefix_scan(combine, elems, identity, *, reverse: bool = False):
    """Inclusive scan ``out_i = e_1 ∘ … ∘ e_i`` of an associative ``combine(earlier, later)``.

    Hillis–Steele: ``⌈log₂ n⌉`` rounds of ``out_i ← combine(out_{i−s}, out_i)`` for
    ``s = 1, 2, 4, …`` (``identity`` where ``i < s``), written as one ``lax.fori_loop``, so the
    compiled program does not grow with ``n`` (``lax.associative_scan`` unrolls its recursion, which
    compiles far slower). Depth O(log n), work O(n log n). ``reverse=True`` scans
    from the end, calling ``combine(later, earlier)``.
    """
    n = jax.tree_util.tree_leaves(elems)[0].shape[0]
    if reverse:
        elems = jax.tree_util.tree_map(lambda a: jnp.flip(a, 0), elems)
    index = jnp.arange(n)

    def round_(k, x):
        s = jnp.left_shift(1, k)
        take = index >= s

        def shifted(a, e):
            return jnp.where(take.reshape((n,) + (1,) * (a.ndim - 1)), jnp.roll(a, s, axis=0), e)

        return combine(jax.tree_util.tree_map(shifted, x, identity), x)

    out = lax.fori_loop(0, max(1, (n - 1).bit_length()), round_, elems)
    if reverse:
        out = jax.tree_util.tree_map(lambda a: jnp.flip(a, 0), out)
    return out


class FilterElement(NamedTuple):
    """One node's filtering element, or a combination of consecutive ones (conditional on
    ``x_0``): ``p(x_k | y, x_{k−1}) = N(A x_{k−1} + b, C)`` and
    ``p(y | x_{k−1}) ∝ exp(−½ x_{k−1}ᵀ J x_{k−1} + ηᵀ x_{k−1})``."""

    a: Float[Array, "*n 2 2"]
    b: Float[Array, "*n 2 r"]
    c: Float[Array, "*n 2 2"]
    eta: Float[Array, "*n 2 r"]
    j: Float[Array, "*n 2 2"]


class SmootherElement(NamedTuple):
    """The affine map ``m ↦ E m + g`` from a later smoothed mean to an earlier one."""

    e: Float[Array, "*n 2 2"]
    g: Float[Array, "*n 2 c"]


def _filter_combine(first: FilterElement, second: FilterElement) -> FilterElement:
    """Combine filtering elements: ``first`` covers earlier nodes than ``second``."""
    a_i, b_i, c_i, eta_i, j_i = first
    a_j, b_j, c_j, eta_j, j_j = second
    eye = jnp.eye(2, dtype=a_i.dtype)
    x_inv = _inv(eye + _mm(c_i, j_j))
    ax = _mm(a_j, x_inv)
    a = _mm(ax, a_i)
    b = _mm(ax, b_i + _mm(c_i, eta_j)) + b_j
    c = _mm(ax, _mm(c_i, _tr(a_j))) + c_j
    ay = _mm(_tr(a_i), _tr(x_inv))
    eta = _mm(ay, eta_j - _mm(j_j, b_i)) + eta_i
    j = _mm(ay, _mm(j_j, a_i)) + j_i
    return FilterElement(a, b, 0.5 * (c + _tr(c)), eta, 0.5 * (j + _tr(j)))


def _smoother_combine(later: SmootherElement, earlier: SmootherElement) -> SmootherElement:
    """Compose affine maps ``m ↦ E m + g``: ``later`` covers later nodes than ``earlier``."""
    return SmootherElement(_mm(earlier.e, later.e), _mm(earlier.e, later.g) + earlier.g)


def solve_parallel(
    t: Float[Array, " n"], w: Float[Array, " n"], lam: Float[Array, ""], y: Float[Array, "n r"]
) -> tuple[Float[Array, "n r"], Float[Array, "n r"]]:
    """Values and slopes ``(n, r)`` of the smoothing spline at all nodes, by associative scans.

    No validation (the callers in :mod:`gcc_jax.spline._fit` check and guard): ``t`` strictly
    increasing, at least 2 positive weights, ``y`` finite, ``λ ≥ 0``. ``w = 0`` is a straggler
    (a missing observation); ``λ' = (Σw) λ``, noise variance ``λ'/w_i``. Differentiable in
    ``t``, ``w``, ``λ`` and ``y``; the maths is in the module docstring.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from scipy.interpolate import CubicSpline
        >>> t = jnp.linspace(0.0, 3.0, 9)
        >>> w = jnp.ones(9).at[4].set(0.0)  # node 4 is a straggler
        >>> solve = jax.jit(solve_parallel)  # one program (eagerly, each scan level is an op)
        >>> values, slopes = solve(t, w, jnp.asarray(0.0), jnp.sin(t)[:, None])
        >>> live = w > 0
        >>> ref = CubicSpline(t[live], jnp.sin(t[live]), bc_type="natural")
        >>> bool(jnp.allclose(values[:, 0], ref(t)) and jnp.allclose(slopes[:, 0], ref(t, 1)))
        True
    """
    dtype = t.dtype
    w = jnp.asarray(w).astype(dtype)
    y = jnp.asarray(y, dtype)
    # time τ = (t − t_c)/L and λ' → λ'/L³
    center, half, lam_eff = scale_free(t, lam, jnp.sum(w))
    tau = (t - center) / half
    q, r = noise_split(lam_eff, dtype)
    # per-column data scale (the fit is linear in y): largest live |y|
    ymax = jnp.max(jnp.where(w[:, None] > 0, jnp.abs(y), 0.0), axis=0)
    ymax = lax.stop_gradient(jnp.where((ymax > 0) & jnp.isfinite(ymax), ymax, 1.0))
    ys = y / ymax
    # steps h_k = τ_k − τ_{k−1}, k = 1..n, the virtual x_0 one first spacing before τ_1
    h = jnp.diff(tau)
    h = jnp.concatenate([h[:1], h])  # (n,)
    # slope units ρ_k (k = 0..n); the result does not depend on them (a change of variables)
    floor = jnp.asarray(1e-30 if dtype == jnp.float64 else 1e-18, dtype)
    rho = jnp.maximum(
        jnp.concatenate([h[:1], jnp.maximum(h, jnp.concatenate([h[1:], h[-1:]]))]), floor
    )
    rho = lax.stop_gradient(rho)
    u = h / rho[:-1]  # F̃_k = [[1, u_k], [0, v_k]] in the scaled state (s, ρ_k s')
    v = rho[1:] / rho[:-1]
    rk = rho[1:]
    q00, q01, q11 = q * h**3 / 3.0, q * h**2 * rk / 2.0, q * h * rk**2
    zero, one = jnp.zeros_like(h), jnp.ones_like(h)
    f_mat = jnp.stack([jnp.stack([one, u], -1), jnp.stack([zero, v], -1)], -2)  # (n, 2, 2)
    q_mat = jnp.stack([jnp.stack([q00, q01], -1), jnp.stack([q01, q11], -1)], -2)

    # filtering elements; g = 1/(Q00 + r/w), smooth in w down to 0 when r > 0
    f = w * q00 + r
    live = f > 0  # False only for w = 0 at λ = 0
    f_safe = jnp.where(live, f, 1.0)
    g = jnp.where(live, w / f_safe, 0.0)
    keep = jnp.where(live, r / f_safe, 1.0)  # 1 − g Q00, written to stay ≥ 0
    k0, k1 = g * q00, g * q01
    a_el = jnp.stack(
        [jnp.stack([keep, u * keep], -1), jnp.stack([-k1, v - k1 * u], -1)], -2
    )  # (I − K e0ᵀ) F
    b_el = jnp.stack([k0[:, None] * ys, k1[:, None] * ys], 1)  # (n, 2, r)
    c_el = jnp.stack(
        [jnp.stack([q00 * keep, q01 * keep], -1), jnp.stack([q01 * keep, q11 - k1 * q01], -1)], -2
    )
    eta_el = jnp.stack([g[:, None] * ys, (g * u)[:, None] * ys], 1)
    j_el = g[:, None, None] * jnp.stack([jnp.stack([one, u], -1), jnp.stack([u, u * u], -1)], -2)
    eye, z2, zr = (
        jnp.eye(2, dtype=dtype),
        jnp.zeros((2, 2), dtype),
        jnp.zeros((2, y.shape[1]), dtype),
    )
    filtered = _prefix_scan(
        _filter_combine,
        FilterElement(a_el, b_el, c_el, eta_el, j_el),
        FilterElement(eye, zr, z2, zr, z2),
    )
    a_f, b_f, c_f = filtered.a, filtered.b, filtered.c

    # β = J⁻¹ η for the diffuse x_0, J equilibrated (unit diagonal) before the solve
    j_n, eta_n = filtered.j[-1], filtered.eta[-1]
    tiny = jnp.finfo(dtype).tiny
    d = 1.0 / jnp.sqrt(jnp.maximum(jnp.diagonal(j_n), tiny))
    beta = d[:, None] * _mm(_inv(j_n * d[:, None] * d[None, :]), d[:, None] * eta_n)  # (2, r)

    # smoothing elements (E_k, g_k) on the means [A | b] (2, 2 + r), conditional on x_0
    mean = jnp.concatenate([a_f, b_f], -1)  # (n, 2, 2 + r)
    f_next, q_next = f_mat[1:], q_mat[1:]
    p_k = c_f[:-1]
    pf = _mm(p_k, _tr(f_next))  # P Fᵀ
    m_mat = _mm(f_next, pf) + q_next
    scale = jnp.maximum(jnp.max(jnp.abs(m_mat), axis=(-2, -1)), tiny)[:, None, None]
    m_s = m_mat / scale
    det = m_s[:, 0, 0] * m_s[:, 1, 1] - m_s[:, 0, 1] * m_s[:, 1, 0]
    ok = det > 0  # 0 only where P = Q = 0 (λ' = ∞): then the state is x_0's and E = 0
    m_s = jnp.where(ok[:, None, None], m_s, eye)
    e_k = jnp.where(ok[:, None, None], _mm(pf / scale, _inv(m_s)), 0.0)
    g_k = mean[:-1] - _mm(e_k, _mm(f_next, mean[:-1]))
    e_sm = jnp.concatenate([e_k, jnp.zeros((1, 2, 2), dtype)])
    g_sm = jnp.concatenate([g_k, mean[-1:]])
    identity = SmootherElement(eye, jnp.zeros((2, 2 + y.shape[1]), dtype))
    smoothed = _prefix_scan(
        _smoother_combine, SmootherElement(e_sm, g_sm), identity, reverse=True
    ).g
    state = _mm(smoothed[..., :2], beta) + smoothed[..., 2:]  # (n, 2, r)
    values = state[:, 0] * ymax
    slopes = state[:, 1] * ymax / (rho[1:, None] * half)
    return values, slopes
