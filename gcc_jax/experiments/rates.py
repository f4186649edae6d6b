"""Convergence rates of GCC and BACC in the number of workers ``N`` (the papers' theorems).

For a fixed worker function, ``K`` inputs and ``draws`` independent input draws, the loss
``L = (1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` is measured as ``N`` grows (log-spaced) in two straggler
regimes and at each worker-noise level ``σ`` (``noise``):

* **worst case** with a fixed number ``S`` of stragglers: per draw, the loss of the worst pattern
  found by the local search of :func:`gcc_jax.worst_case_mask` (exact for small ``C(N, S)``, a
  lower bound otherwise);
* **probabilistic**: every worker straggles independently with probability ``p``; per draw,
  ``M`` random patterns (patterns a code cannot decode are counted apart in ``failed``).
* **noisy workers** (``σ > 0``): worker ``n`` returns ``f(x~_n) + ε_n`` with ``ε_n ~ N(0, σ² I)``
  independent across workers and draws (the papers' noisy model, LeTCC eq. 1); the target stays
  the noiseless ``f(x_k)``. GCC, BACC and both λ rules see the same noise (common random numbers).

Codes and λ rules (λ_enc = 0, the natural interpolating encoder of the rate proofs, App. B.5):

* ``GCC-interp``: ``λ_dec = 0``, the natural interpolating decoder. Without noise its slopes
  measure **cubic-spline interpolation accuracy** (typically steeper than the theorem's ``N⁻³``
  bound, which is an upper bound); with noise it interpolates the noise.
* ``GCC-cv``: ``λ_dec`` chosen **per N** (and per regime and σ) by cross-validation over
  ``lam_dec_grid`` (default ``{0} ∪ {10⁻¹⁴, …, 10⁰}``, from interpolation to the straight-line fit)
  on ``cv_draws`` held-out input draws — never the evaluation draws — with their own patterns:
  the mean loss over ``cv_masks`` random patterns (iid), or the mean over draws of the largest
  loss over all contiguous blocks of ``S`` and ``cv_masks`` random ``S``-subsets (worst case).
  Ties go to the smaller λ. With noise, λ_dec > 0 is necessary; the chosen λ and its log-log
  slope in ``N`` are reported (theory, LeTCC Thm 2: ``λ_d ∝ (σ²/(N−S))^{4/5}``).
* ``BACC``: Berrut's rational interpolant (no parameter).

Statistics over draws: for each ``N`` the **mean** and the **median** of the loss (iid: over all
draws × patterns; worst case: over the draws' worst losses), each with a 95% percentile
**bootstrap** CI (``bootstrap`` replicates; draws resampled with replacement, and for iid the
patterns within each draw too). The iid loss is heavy-tailed (a few patterns with gaps near the
ends dominate the mean), so the median is the more stable rate statistic.

Slopes: least-squares ``log stat = a + b log N`` over two stated ranges — ``all`` (every ``N``)
and ``upper`` (the upper half of the log-range of ``N``) — with bootstrap CIs (the same draw
resampling across ``N``). Theory (the rate theorems of the LeTCC and BACC papers): GCC
``O(S³ N⁻³)`` worst case and ``O(log³_{1/p}(N) N⁻³)`` iid without noise; with noise
``O((σ²/(N−S))^{3/5})``, slope ``−3/5``; the bound quoted for BACC is ``O(S⁴ N⁻²)``
(``O(log⁴_{1/p}(N) N⁻²)``), none with noise.

Functions: the papers' ``x·sin(x)`` (scalar inputs ``x_k ~ U(−3, 3)``) and a smooth vector map
ℝ² → ℝ³ (:func:`vector_map`, inputs ``x_k ~ U(−1, 1)²``).
"""

import dataclasses
import itertools
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.precision import Float32PrecisionWarning
from .._core.scalars import as_int
from .._core.types import Array, ArrayLike, Float, Real
from ..codes import BerrutCode, SplineCode
from ..evaluation import MaskEvaluator, outputs_and_targets, sample_masks, search_worst_case
from ._command import StopOnInterrupt, from_arguments
from ._commands.rates import DEFAULTS, TOY
from ._io import ExperimentResult, new_figure, save_report, warn_float32
from ._plots import legend_outside
from ._summary import MIN_FIT_POINTS, fit_interval

__all__ = [
    "DEFAULTS",
    "FUNCTIONS",
    "TOY",
    "bootstrap_stats",
    "fit_slope",
    "format_rates_table",
    "plot_rates",
    "report",
    "run",
    "run_rates",
    "save",
    "save_rates",
    "vector_map",
    "xsinx",
]


def xsinx(x: Float[Array, " 1"]) -> Float[Array, " 1"]:
    """The papers' test function ``f(x) = x · sin(x)`` (one scalar input, one output)."""
    return x * jnp.sin(x)


def vector_map(x: Float[Array, " 2"]) -> Float[Array, " 3"]:
    """A smooth map ℝ² → ℝ³: ``[sin(2x₀)·cos(x₁), x₀·x₁, exp(−‖x‖²/2)]``."""
    return jnp.stack(
        [jnp.sin(2.0 * x[0]) * jnp.cos(x[1]), x[0] * x[1], jnp.exp(-0.5 * jnp.sum(x * x))]
    )


#: name → (worker function, input dimension, input half-range)
FUNCTIONS: dict[str, tuple[Callable, int, float]] = {
    "xsinx": (xsinx, 1, 3.0),
    "vector_map": (vector_map, 2, 1.0),
}

CODES = ("GCC-interp", "GCC-cv", "BACC")
"""Rows of every table: GCC with λ_dec = 0, GCC with λ_dec by CV per N, BACC."""
#: theory exponents (of N, of the straggler term S or log_{1/p} N) per code family and regime
THEORY = {
    ("GCC", "worst"): (-3.0, 3.0),
    ("GCC", "iid"): (-3.0, 3.0),
    ("BACC", "worst"): (-2.0, 4.0),
    ("BACC", "iid"): (-2.0, 4.0),
}
NOISY_THEORY_SLOPE = -0.6
"""GCC's loss exponent of N with noisy workers: ``(σ²/(N−S))^{3/5}`` (LeTCC Thm 2)."""
DEFAULT_LAM_DEC_GRID = (0.0, *(10.0**e for e in range(-14, 1)))
"""λ_dec candidates of the CV: 0 and 10⁻¹⁴ … 10⁰."""


def _family(code: str) -> str:
    return "BACC" if code == "BACC" else "GCC"


def theory_slope(code: str, regime: str, sigma: float) -> float | None:
    """The theorem's exponent of ``N`` for a code, regime and noise level (None: no theory)."""
    if sigma > 0:
        return NOISY_THEORY_SLOPE if _family(code) == "GCC" else None
    return THEORY[(_family(code), regime)][0]


METRICS = {
    "loss": "(1/K) Σ_k ‖f^(x_k) − f(x_k)‖² for one input draw and straggler pattern (f noiseless)",
    "worst": "per draw, the loss of the worst pattern of S stragglers found by the local search "
    "of gcc_jax.worst_case_mask (exact when exhaustive, else a lower bound)",
    "iid": "each worker straggles independently with probability p; M patterns per draw "
    "(undecodable patterns are left out and counted in `failed`)",
    "mean/median": "mean and median of the loss over draws (worst) or draws × patterns (iid), "
    "with 95% percentile bootstrap CIs (draws resampled, iid patterns within draws too)",
    "slope": "least-squares slope b of log stat = a + b log N over the stated range of N "
    "('all', or 'upper' = the upper half of the log-range), 95% bootstrap CI (null with "
    "fewer than three N: a line through two points has no interval)",
    "lam_dec": "GCC-cv's decoder λ chosen per N by CV on held-out input draws",
    "ratio": "GCC-cv mean (median) loss / BACC mean (median) loss at the largest N",
}


def _make_code(name: str, k: int, n: int, lam_enc: float, lam_dec: float, solver: str):
    if name == "BACC":
        return BerrutCode.chebyshev(num_inputs=k, num_workers=n)
    return SplineCode.chebyshev(
        num_inputs=k, num_workers=n, lam_enc=lam_enc, lam_dec=lam_dec, solver=solver
    )


def pick_solver(solver: str) -> str:
    """``"auto"``: the O(N) Kalman solver when this SplineCode has it, else the kernel form."""
    if solver != "auto":
        return solver
    try:
        SplineCode.chebyshev(num_inputs=2, num_workers=4, solver="kalman")
    except (ValueError, TypeError):
        return "kernel"
    return "kalman"


def fit_slope(
    n: Sequence[float] | Real[ArrayLike, " i"], loss: Sequence[float] | Real[ArrayLike, " i"]
) -> tuple[float, float]:
    """Least-squares fit ``log L = a + b log N``; returns ``(b, a)`` (NaN if < 2 usable points)."""
    n = np.asarray(n, float)
    loss = np.asarray(loss, float)
    ok = np.isfinite(loss) & (loss > 0)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    b, a = np.polyfit(np.log(n[ok]), np.log(loss[ok]), 1)
    return float(b), float(a)


def _theory_curve(code: str, regime: str, n: np.ndarray, s: int, p: float, sigma: float):
    """The theory's rate without its constant (None where there is none)."""
    if sigma > 0:
        if _family(code) != "GCC":
            return None
        return (sigma**2 / (n - s)) ** 0.6
    b, a = THEORY[(_family(code), regime)]
    if regime == "worst":
        return float(max(s, 1)) ** a * n**b
    return (np.log(n) / np.log(1.0 / p)) ** a * n**b


def bootstrap_stats(
    losses: np.ndarray, draw_index: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap replicates of the mean and the median of a ``(D, M)`` table of losses.

    Replicate ``b`` takes the draws ``draw_index[b]`` (``(B, D)`` indices, shared across ``N`` so
    that slopes can be bootstrapped) and, when ``M > 1``, ``M`` patterns resampled with
    replacement within each chosen draw; NaN entries (undecodable patterns) are ignored.

    Returns:
        ``(means, medians)``, each of shape ``(B,)``.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> means, medians = bootstrap_stats(np.array([[1.0], [3.0]]), np.array([[0, 0], [0, 1]]),
        ...                                  rng)
        >>> means.tolist(), medians.tolist()
        ([1.0, 2.0], [1.0, 2.0])
    """
    losses = np.asarray(losses, float)
    d, m = losses.shape
    picked = losses[draw_index]  # (B, D, M)
    if m > 1:
        cols = rng.integers(m, size=picked.shape)
        picked = np.take_along_axis(picked, cols, axis=2)
    flat = picked.reshape(picked.shape[0], -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN replicates give NaN
        return np.nanmean(flat, axis=1), np.nanmedian(flat, axis=1)


def _ci(reps: np.ndarray) -> list[float]:
    reps = reps[np.isfinite(reps)]
    if reps.size < 2:
        return [float("nan"), float("nan")]
    return [float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5))]


def _slopes(n: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Least-squares slopes of ``log values`` on ``log n`` along the last axis (NaN if < 2)."""
    values = np.asarray(values, float)
    ok = np.isfinite(values) & (values > 0)
    x = np.where(ok, np.log(n), np.nan)
    y = np.where(ok, np.log(np.where(ok, values, 1.0)), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        xm = np.nanmean(x, axis=-1, keepdims=True)
        ym = np.nanmean(y, axis=-1, keepdims=True)
        slope = np.nansum((x - xm) * (y - ym), axis=-1) / np.nansum((x - xm) ** 2, axis=-1)
    return np.where(ok.sum(axis=-1) >= 2, slope, np.nan)


def _cv_lam_dec(code, f, xs, noise, candidates, grid, worst: bool) -> tuple[float, list[float]]:
    """λ_dec of ``grid`` with the lowest held-out score (mean over draws of the mean loss over
    ``candidates`` (iid) or of the largest (worst)); ties to the smaller λ. Also the CV curve."""
    evaluators = []
    for c in range(xs.shape[0]):
        yt, fx = outputs_and_targets(code, f, xs[c])
        evaluators.append((yt + noise[c].astype(yt.dtype), fx))
    curve = []
    for lam in grid:
        coded = dataclasses.replace(code, lam_dec=jnp.asarray(lam, code.alpha.dtype))
        score = 0.0
        for yt, fx in evaluators:
            loss, status = MaskEvaluator(coded, yt, fx, chunk_size=128)(candidates)
            if status.any():
                score = math.inf
                break
            score += float(np.max(loss) if worst else np.mean(loss)) / len(evaluators)
        curve.append(score)
    j = int(np.argmin(np.asarray(curve)))
    return float(grid[j]), curve


def _contiguous(n: int, s: int) -> np.ndarray:
    start = np.arange(n - s + 1)[:, None]
    idx = np.arange(n)[None, :]
    return ~((idx >= start) & (idx < start + s))


class _Settings(NamedTuple):
    """The checked arguments of :func:`run_rates`."""

    workers: tuple[int, ...]
    num_inputs: int
    stragglers: int
    p: float
    num_masks: int
    functions: Sequence[str]
    draws: int
    cv_draws: int
    cv_masks: int
    noise: tuple[float, ...]
    lam_dec_grid: tuple[float, ...]
    bootstrap: int
    solver: str
    search: dict
    progress: bool


class _Draws(NamedTuple):
    """One worker function's evaluation and CV input draws and its bootstrap resampling."""

    name: str
    f: Callable
    out_shape: tuple[int, ...]  # shape of one output f(x)
    key: Array  # the function's key; every N and σ folds its own from it
    xs: Array  # (draws, K, dim) evaluation inputs
    xs_cv: Array  # (cv_draws, K, dim) held-out inputs of GCC-cv's λ
    boot_rng: np.random.Generator
    draw_index: np.ndarray  # (bootstrap, draws): the draws of every replicate


class _Cell(NamedTuple):
    """One ``(σ, N)`` of one function: its key, codes, worker noise and straggler patterns."""

    sigma: float
    n: int
    key: Array
    gcc0: Any  # GCC at λ = 0 (also the base of the CV)
    bacc: Any
    eps: Array  # (draws, N, *m) worker noise of the evaluation draws
    eps_cv: Array  # (cv_draws, N, *m) worker noise of the CV draws
    iid_masks: list  # per evaluation draw, ``num_masks`` iid patterns


def _check(raw: _Settings) -> _Settings:
    """The arguments of :func:`run_rates`, checked; the solver and the search settings chosen."""
    workers = tuple(int(n) for n in raw.workers)
    s = raw.stragglers
    if len(workers) < 2 or any(n < s + 2 for n in workers):
        raise ValueError(f"`workers` needs >= 2 values, each >= S + 2 = {s + 2}")
    for name in raw.functions:
        if name not in FUNCTIONS:
            raise ValueError(f"unknown function {name!r}; choose from {sorted(FUNCTIONS)}")
    if not 0.0 < raw.p < 1.0:
        raise ValueError(f"`p` must be in (0, 1); got {raw.p}")
    draws = as_int(raw.draws, "draws", 2)
    cv_draws = as_int(raw.cv_draws, "cv_draws", 1)
    cv_masks = as_int(raw.cv_masks, "cv_masks", 1)
    bootstrap = as_int(raw.bootstrap, "bootstrap", 10)
    noise = tuple(float(v) for v in raw.noise)
    if not noise or any(not math.isfinite(v) or v < 0 for v in noise):
        raise ValueError(f"`noise` must be a non-empty list of σ >= 0; got {noise!r}")
    given = DEFAULT_LAM_DEC_GRID if raw.lam_dec_grid is None else raw.lam_dec_grid
    grid = tuple(float(v) for v in given)
    if not grid or any(not math.isfinite(v) or v < 0 for v in grid):
        raise ValueError(f"`lam_dec_grid` must be a non-empty list of λ >= 0; got {grid!r}")
    search = dict(max_exhaustive=10_000, restarts=8, proposals=128, max_iters=25, patience=3)
    return raw._replace(
        workers=workers,
        draws=draws,
        cv_draws=cv_draws,
        cv_masks=cv_masks,
        bootstrap=bootstrap,
        noise=noise,
        lam_dec_grid=grid,
        solver=pick_solver(raw.solver),
        search=search | dict(raw.search or {}),
    )


def _draws(s: _Settings, fi: int, fname: str, seed: int) -> _Draws:
    """Function ``fi``'s input draws (evaluation and CV) and its bootstrap resampling."""
    f, dim, half = FUNCTIONS[fname]
    kx = jax.random.fold_in(jax.random.key(seed), fi)
    shape = (s.num_inputs, dim)
    xs = jax.random.uniform(jax.random.fold_in(kx, 0), (s.draws, *shape), minval=-half, maxval=half)
    xs_cv = jax.random.uniform(
        jax.random.fold_in(kx, 1), (s.cv_draws, *shape), minval=-half, maxval=half
    )
    boot_rng = np.random.default_rng((seed, fi, 0xB007))
    draw_index = boot_rng.integers(s.draws, size=(s.bootstrap, s.draws))
    out_shape = jax.eval_shape(f, jax.ShapeDtypeStruct((dim,), xs.dtype)).shape
    return _Draws(fname, f, out_shape, kx, xs, xs_cv, boot_rng, draw_index)


def _cell(s: _Settings, dr: _Draws, si: int, sigma: float, ni: int, n: int) -> _Cell:
    """The codes, worker noise and iid patterns of one ``(σ, N)``."""
    km = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(dr.key, 2), si), ni)

    def noise_for(k, count):
        return sigma * jax.random.normal(k, (count, n, *dr.out_shape), dr.xs.dtype)

    iid_masks = [
        np.asarray(sample_masks(jax.random.fold_in(km, 100 + d), n, num=s.num_masks, p=s.p))
        for d in range(s.draws)
    ]
    return _Cell(
        sigma=sigma,
        n=n,
        key=km,
        gcc0=_make_code("GCC", s.num_inputs, n, 0.0, 0.0, s.solver),
        bacc=_make_code("BACC", s.num_inputs, n, 0.0, 0.0, s.solver),
        eps=noise_for(jax.random.fold_in(km, 1), s.draws),
        eps_cv=noise_for(jax.random.fold_in(km, 2), s.cv_draws),
        iid_masks=iid_masks,
    )


def _cross_validate(s: _Settings, dr: _Draws, c: _Cell) -> tuple[dict, dict]:
    """GCC-cv's λ_dec per regime (``{"worst", "iid"}``) and the CV curves (:func:`_cv_lam_dec`):
    worst case over the contiguous blocks and random ``S``-subsets, iid over random patterns."""
    n, km = c.n, c.key
    iid_cv = np.asarray(sample_masks(jax.random.fold_in(km, 3), n, num=s.cv_masks, p=s.p))
    random_s = sample_masks(jax.random.fold_in(km, 4), n, num=s.cv_masks, stragglers=s.stragglers)
    worst_cv = np.concatenate([_contiguous(n, s.stragglers), np.asarray(random_s)])
    lam, curves = {}, {}
    for regime, cands in (("worst", worst_cv), ("iid", iid_cv)):
        lam[regime], curves[regime] = _cv_lam_dec(
            c.gcc0, dr.f, dr.xs_cv, c.eps_cv, cands, s.lam_dec_grid, regime == "worst"
        )
    return lam, curves


def _noisy_outputs(s: _Settings, dr: _Draws, c: _Cell) -> dict:
    """``(family, draw) → (noisy worker outputs, targets)`` for GCC and BACC."""
    outputs = {}
    for d in range(s.draws):
        for cname, code in (("GCC", c.gcc0), ("BACC", c.bacc)):
            yt, fx = outputs_and_targets(code, dr.f, dr.xs[d])
            outputs[(cname, d)] = (yt + c.eps[d].astype(yt.dtype), fx)
    return outputs


def _worst_table(s: _Settings, c: _Cell, code, outputs: list) -> tuple[list, dict]:
    """Per draw, the loss of the worst pattern of ``S`` stragglers found; whether every search
    was exhaustive, and for draw 0 the heuristic search's loss over the exhaustive one."""
    table, extra = [], {"exhaustive": True}
    for d, (yt, fx) in enumerate(outputs):
        ev = MaskEvaluator(code, yt, fx, chunk_size=128)
        skey = jax.random.fold_in(c.key, 200 + d)
        wc = search_worst_case(ev, c.n, s.stragglers, key=skey, search=s.search)
        table.append([wc.loss])
        extra["exhaustive"] &= bool(wc.exhaustive)
        if d == 0 and wc.exhaustive:
            heuristic = s.search | dict(max_exhaustive=0)
            heur = search_worst_case(ev, c.n, s.stragglers, key=skey, search=heuristic)
            extra["heuristic_ratio"] = heur.loss / wc.loss
    return table, extra


def _iid_table(c: _Cell, code, outputs: list) -> tuple[list, dict]:
    """Per draw, the losses of its iid patterns (NaN where the decode failed) and the count
    of failed patterns."""
    table, failed = [], 0
    for d, (yt, fx) in enumerate(outputs):
        loss, status = MaskEvaluator(code, yt, fx, chunk_size=128)(c.iid_masks[d])
        table.append(np.where(status == 0, loss, np.nan))
        failed += int(np.sum(status != 0))
    return table, {"failed": failed}


def _record(
    s: _Settings, dr: _Draws, c: _Cell, regime: str, cname: str, table: np.ndarray, reps: dict
) -> dict:
    """One row: the mean and median loss over draws with bootstrap CIs (replicates stored in
    ``reps`` for the slopes' CIs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, median = float(np.nanmean(table)), float(np.nanmedian(table))
    rep_mean, rep_median = bootstrap_stats(table, dr.draw_index, dr.boot_rng)
    reps[(dr.name, c.sigma, regime, cname, c.n)] = (rep_mean, rep_median)
    return dict(
        function=dr.name,
        sigma=c.sigma,
        regime=regime,
        code=cname,
        N=c.n,
        K=s.num_inputs,
        mean=dict(value=mean, ci95=_ci(rep_mean)),
        median=dict(value=median, ci95=_ci(rep_median)),
        per_draw=np.nanmean(table, axis=1).tolist(),
    )


class _Measured(NamedTuple):
    """What one ``(σ, N)`` produced."""

    rows: list[dict]  # one per code and regime
    lam: dict  # GCC-cv's λ_dec per regime
    medians: list[str]  # "code regime median" per row, for the progress line
    cv_seconds: float  # time spent choosing λ_dec


def _measure_cell(s: _Settings, dr: _Draws, c: _Cell, reps: dict) -> _Measured:
    """Every code and regime at one ``(σ, N)`` (the rows' statistics: :func:`_record`)."""
    t0 = time.perf_counter()
    lam, curves = _cross_validate(s, dr, c)
    t_cv = time.perf_counter() - t0
    outputs = _noisy_outputs(s, dr, c)
    group, line = [], []
    for cname in CODES:
        fam = "BACC" if cname == "BACC" else "GCC"
        for regime in ("worst", "iid"):
            if cname == "BACC":
                code = c.bacc
            else:
                lam_dec = 0.0 if cname == "GCC-interp" else lam[regime]
                code = _make_code("GCC", s.num_inputs, c.n, 0.0, lam_dec, s.solver)
            t0 = time.perf_counter()
            per_draw = [outputs[(fam, d)] for d in range(s.draws)]
            if regime == "worst":
                table, extra = _worst_table(s, c, code, per_draw)
            else:
                table, extra = _iid_table(c, code, per_draw)
            row = _record(s, dr, c, regime, cname, np.asarray(table, float), reps)
            row |= dict(seconds=time.perf_counter() - t0) | extra
            row |= dict(S=s.stragglers) if regime == "worst" else dict(p=s.p, masks=s.num_masks)
            if cname == "GCC-cv":
                row |= dict(lam_dec=lam[regime], cv_curve=curves[regime])
            elif cname == "GCC-interp":
                row |= dict(lam_dec=0.0)
            group.append(row)
            line.append(f"{cname} {regime} {row['median']['value']:.2e}")
    return _Measured(group, lam, line, t_cv)


def _measure_function(s: _Settings, dr: _Draws, rows: list[dict], reps: dict) -> float:
    """Every ``(σ, N)`` of one function, its rows appended to ``rows`` one ``N`` at a time;
    returns the seconds spent on cross-validation."""
    t_cv = 0.0
    for si, sigma in enumerate(s.noise):
        for ni, n in enumerate(s.workers):
            got = _measure_cell(s, dr, _cell(s, dr, si, sigma, ni, n), reps)
            t_cv += got.cv_seconds
            rows.extend(got.rows)  # one N's rows, kept only once all are measured
            if s.progress:
                lam = got.lam
                print(
                    f"{dr.name:>10} σ={sigma:g} N={n:>5}: λ_cv worst {lam['worst']:g} iid "
                    f"{lam['iid']:g}; medians " + ", ".join(got.medians),
                    file=sys.stderr,
                    flush=True,
                )
    return t_cv


def _config_record(s: _Settings, interrupted: bool) -> dict:
    """The ``config`` block of the JSON record."""
    return dict(
        interrupted=interrupted,
        num_inputs=s.num_inputs,
        workers=list(s.workers),
        stragglers=s.stragglers,
        p=s.p,
        num_masks=s.num_masks,
        functions=list(s.functions),
        draws=s.draws,
        cv_draws=s.cv_draws,
        cv_masks=s.cv_masks,
        noise=list(s.noise),
        lam_enc=0.0,
        lam_dec_grid=list(s.lam_dec_grid),
        bootstrap=s.bootstrap,
        solver=s.solver,
        search=s.search,
        dtype=str(jnp.zeros(()).dtype),
    )


def _search_check(rows: list[dict]) -> dict:
    """How often the heuristic worst-case search matched the exhaustive one, and its worst ratio."""
    checked = [r["heuristic_ratio"] for r in rows if "heuristic_ratio" in r]
    return dict(
        cases=len(checked),
        equal=int(sum(q >= 1.0 - 1e-9 for q in checked)),
        min_ratio=float(min(checked)) if checked else float("nan"),
    )


def run_rates(
    *,
    workers: Sequence[int] = (20, 40, 80, 160, 320, 640),
    num_inputs: int = 10,
    stragglers: int = 3,
    p: float = 0.1,
    num_masks: int = 200,
    functions: Sequence[str] = ("xsinx", "vector_map"),
    draws: int = 5,
    cv_draws: int = 5,
    cv_masks: int = 64,
    noise: Sequence[float] = (0.0, 1e-3),
    lam_dec_grid: Sequence[float] | None = None,
    bootstrap: int = 1000,
    solver: str = "auto",
    search: dict | None = None,
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Measure the losses of GCC (λ = 0 and λ by CV) and BACC versus ``N`` (module docstring).

    Args:
        workers: the ``N`` values (log-spaced; every ``N ≥ S + 2``).
        num_inputs: ``K``.
        stragglers: ``S`` for the worst-case regime.
        p: straggling probability for the probabilistic regime.
        num_masks: random patterns ``M`` per draw and ``N`` in the probabilistic regime.
        functions: names from :data:`FUNCTIONS`.
        draws: independent evaluation input draws (``≥ 2``; 5 or more for the CIs).
        cv_draws: held-out input draws for GCC-cv's λ (disjoint from the evaluation draws).
        cv_masks: random patterns per held-out draw in the CV.
        noise: worker-noise levels ``σ ≥ 0`` (0 = noiseless).
        lam_dec_grid: GCC-cv's λ_dec candidates (default :data:`DEFAULT_LAM_DEC_GRID`).
        bootstrap: bootstrap replicates for the CIs.
        solver: SplineCode solver, ``"auto"`` = Kalman when available, else ``"kernel"``.
        search: keyword arguments of the worst-case local search.
        seed: seeds the draws, noise, patterns, search and bootstrap.
        progress: print one line per function, σ and ``N``.

    Returns:
        An :class:`ExperimentResult` whose ``results`` hold ``rows`` (one per function, σ,
        regime, code and ``N``), ``fits`` (slopes with CIs per statistic and range), ``lams``
        (GCC-cv's λ per ``N`` and its slope), ``ratios`` (GCC-cv/BACC at the largest ``N``) and
        ``search_check`` (heuristic vs exhaustive worst case).
    """
    t_start = time.perf_counter()
    s = _check(from_arguments(_Settings, locals()))
    warn_float32(
        "run_rates in float32: losses below ~1e-10 are round-off; enable x64 "
        '(jax.config.update("jax_enable_x64", True)) for the rates',
        Float32PrecisionWarning,
    )
    rows, reps = [], {}
    t_cv = 0.0
    with StopOnInterrupt() as stop:
        for fi, fname in enumerate(s.functions):
            t_cv += _measure_function(s, _draws(s, fi, fname, seed), rows, reps)
    config = _config_record(s, stop.interrupted)
    fits, lams, ratios = _summarise(rows, reps, config)
    result = ExperimentResult.of_run(
        "rates",
        config,
        seed,
        METRICS,
        dict(rows=rows, fits=fits, lams=lams, ratios=ratios, search_check=_search_check(rows)),
        t_start=t_start,
        phases={"cross_validation": t_cv},
    )
    return stop.finish(result)


run = run_rates


def _series(rows: list[dict], fname: str, sigma: float, regime: str, code: str, stat: str):
    sel = [
        r
        for r in rows
        if r["function"] == fname
        and r["sigma"] == sigma
        and r["regime"] == regime
        and r["code"] == code
    ]
    sel.sort(key=lambda r: r["N"])
    n = np.array([r["N"] for r in sel], float)
    value = np.array([np.nan if r[stat]["value"] is None else r[stat]["value"] for r in sel])
    lo = np.array([np.nan if r[stat]["ci95"][0] is None else r[stat]["ci95"][0] for r in sel])
    hi = np.array([np.nan if r[stat]["ci95"][1] is None else r[stat]["ci95"][1] for r in sel])
    return n, value, lo, hi, sel


def _ranges(n: np.ndarray) -> dict[str, np.ndarray]:
    """``all`` N, and ``upper`` (the upper half of the log-range) when it has >= 2 points."""
    upper = n >= np.sqrt(n.min() * n.max())
    return {"all": np.ones(n.shape, bool)} | ({"upper": upper} if upper.sum() >= 2 else {})


def _fits(rows: list[dict], reps: dict, fname: str, sigma: float, regime: str) -> list[dict]:
    """Slopes of every code's mean and median in ``N`` over each range, with bootstrap CIs."""
    fits = []
    for code, (stat, which) in itertools.product(CODES, (("mean", 0), ("median", 1))):
        n, value, _, _, _ = _series(rows, fname, sigma, regime, code, stat)
        if n.size == 0:  # an interrupted run never reached this series
            continue
        boot = np.stack([reps[(fname, sigma, regime, code, int(v))][which] for v in n], axis=1)
        note = None
        if code == "GCC-interp" and sigma == 0:
            note = "interpolation accuracy (λ = 0), not the theorem's bound"
        for rname, sel in _ranges(n).items():
            fits.append(
                dict(
                    function=fname,
                    sigma=sigma,
                    regime=regime,
                    code=code,
                    stat=stat,
                    range=rname,
                    N=[int(n[sel].min()), int(n[sel].max())],
                    slope=float(_slopes(n[sel], value[sel])),
                    ci95=fit_interval(int(sel.sum()), _ci(_slopes(n[sel], boot[:, sel]))),
                    theory_slope=theory_slope(code, regime, sigma),
                    note=note,
                )
            )
    return fits


def _lams_and_ratio(rows: list[dict], fname: str, sigma: float, regime: str):
    """GCC-cv's λ per ``N`` with its slope, and GCC-cv/BACC at the largest ``N`` (None, None
    when no GCC-cv row was measured)."""
    n, _, _, _, sel_rows = _series(rows, fname, sigma, regime, "GCC-cv", "mean")
    if n.size == 0:
        return None, None
    lam_values = np.array([r["lam_dec"] for r in sel_rows], float)
    lams = dict(
        function=fname,
        sigma=sigma,
        regime=regime,
        N=n.astype(int).tolist(),
        lam_dec=lam_values.tolist(),
        slope=float(_slopes(n, lam_values)) if np.all(lam_values > 0) else None,
    )
    ratio = dict(function=fname, sigma=sigma, regime=regime, N=int(n[-1]))
    for stat in ("mean", "median"):
        _, g, _, _, _ = _series(rows, fname, sigma, regime, "GCC-cv", stat)
        _, b, _, _, _ = _series(rows, fname, sigma, regime, "BACC", stat)
        ratio[stat] = dict(gcc=float(g[-1]), bacc=float(b[-1]), ratio=float(g[-1] / b[-1]))
    return lams, ratio


def _summarise(rows: list[dict], reps: dict, cfg: dict):
    """Slopes (:func:`_fits`), GCC-cv's λ per ``N`` and the GCC-cv/BACC ratios of every
    function, σ and regime."""
    fits, lams, ratios = [], [], []
    for fname, sigma, regime in itertools.product(cfg["functions"], cfg["noise"], ("worst", "iid")):
        fits += _fits(rows, reps, fname, sigma, regime)
        lam, ratio = _lams_and_ratio(rows, fname, sigma, regime)
        if lam is not None:
            lams.append(lam)
            ratios.append(ratio)
    return fits, lams, ratios


def _fmt_ci(ci) -> str:
    if ci is None:  # fewer than three N in the range
        return "(no CI)"
    lo, hi = (np.nan if v is None else v for v in ci)
    return f"[{lo:.2f}, {hi:.2f}]"


def format_rates_table(result: ExperimentResult) -> str:
    """Plain-text tables of a :func:`run_rates` result: medians (means) per ``N``, slopes with
    bootstrap CIs over stated ranges, GCC-cv's λ per ``N`` and the GCC/BACC ratios."""
    cfg, res = result.config, result.results
    rows = res["rows"]
    s, p = cfg["stragglers"], cfg["p"]
    lines = [
        f"Rates: K={cfg['num_inputs']}, worst case S={s}, iid p={p} ({cfg['num_masks']} patterns "
        f"per draw), {cfg['draws']} input draws (CIs: {cfg['bootstrap']} bootstrap replicates), "
        f"GCC λ_enc=0; GCC-interp λ_dec=0; GCC-cv λ_dec by CV per N on {cfg['cv_draws']} "
        f"held-out draws; {cfg['solver']} solver, {cfg['dtype']}"
    ]
    if cfg.get("interrupted"):
        lines.append("INTERRUPTED (Ctrl-C): only the values of N measured in full are below.")
    for fname in cfg["functions"]:
        for sigma in cfg["noise"]:
            noise = "noiseless workers" if sigma == 0 else f"noisy workers σ={sigma:g}"
            lines.append(f"\n{fname}, {noise}: median loss (mean)")
            head = f"{'N':>6}"
            cols = []
            for regime in ("worst", "iid"):
                for code in CODES:
                    head += f" {code + ' ' + regime:>25}"
                    cols.append(
                        (
                            _series(rows, fname, sigma, regime, code, "median")[1],
                            _series(rows, fname, sigma, regime, code, "mean")[1],
                        )
                    )
            lines.append(head)
            n = _series(rows, fname, sigma, "worst", "BACC", "mean")[0]
            for i, ni in enumerate(n):
                lines.append(
                    f"{int(ni):>6} "
                    + " ".join(f"{f'{med[i]:.2e} ({mean[i]:.2e})':>25}" for med, mean in cols)
                )
    lines.append(
        "\nfitted log-log slopes in N, median / mean, 95% bootstrap CIs from "
        f"{MIN_FIT_POINTS} or more N (range of N; theory)"
    )
    for fit in res["fits"]:
        if fit["stat"] != "median":
            continue
        mean = next(
            g
            for g in res["fits"]
            if g["stat"] == "mean"
            and all(g[k] == fit[k] for k in ("function", "sigma", "regime", "code", "range"))
        )
        theory = "none" if fit["theory_slope"] is None else f"{fit['theory_slope']:g}"
        lines.append(
            f"  {fit['function']:>10} σ={fit['sigma']:<6g} {fit['regime']:>5} {fit['code']:>10} "
            f"{fit['range']:>5} N {fit['N'][0]}-{fit['N'][1]}: {fit['slope']:6.2f} "
            f"{_fmt_ci(fit['ci95'])} / {mean['slope']:6.2f} {_fmt_ci(mean['ci95'])} "
            f"(theory {theory})" + (f"  [{fit['note']}]" if fit["note"] else "")
        )
    lines.append("\nGCC-cv: λ_dec chosen per N by cross-validation (log-log slope in N)")
    for lam in res["lams"]:
        slope = "—" if lam["slope"] is None else f"{lam['slope']:.2f}"
        lines.append(
            f"  {lam['function']:>10} σ={lam['sigma']:<6g} {lam['regime']:>5}: "
            + ", ".join(f"{n}:{v:g}" for n, v in zip(lam["N"], lam["lam_dec"], strict=True))
            + f"  (slope {slope})"
        )
    chk = res.get("search_check", {})
    if chk.get("cases"):
        lines.append(
            f"worst-case search vs exhaustive (where C(N,S) is small): {chk['equal']} of "
            f"{chk['cases']} equal, worst ratio {chk['min_ratio']:.4g}"
        )
    lines.append("GCC-cv/BACC loss ratio at the largest N (median; mean)")
    for r in res["ratios"]:
        lines.append(
            f"  {r['function']:>10} σ={r['sigma']:<6g} {r['regime']:>5} N={r['N']}: "
            f"{r['median']['ratio']:.3g}; {r['mean']['ratio']:.3g}"
        )
    return "\n".join(lines)


report = format_rates_table


def plot_rates(result: ExperimentResult):
    """Log-log loss versus ``N``: medians (solid, with bootstrap CI bands), means (dotted), and
    the theory lines (dashed, anchored at GCC-cv's/BACC's median at the smallest ``N``: only
    their *slopes* are theory). One row per function and σ, columns worst case and iid."""
    cfg, rows = result.config, result.results["rows"]
    panels = [(f, sigma) for f in cfg["functions"] for sigma in cfg["noise"]]
    fig, axes = new_figure(len(panels), 2, figsize=(15, 4 * len(panels)), squeeze=False)
    colors = {"GCC-interp": "C9", "GCC-cv": "C0", "BACC": "C3"}
    for i, (fname, sigma) in enumerate(panels):
        for j, regime in enumerate(("worst", "iid")):
            ax = axes[i, j]
            for code in CODES:
                n, med, lo, hi, _ = _series(rows, fname, sigma, regime, code, "median")
                _, mean, _, _, _ = _series(rows, fname, sigma, regime, code, "mean")
                ok = np.isfinite(med) & (med > 0)
                slope = float(_slopes(n, med))
                ax.loglog(
                    n[ok],
                    med[ok],
                    "o-",
                    color=colors[code],
                    label=f"{code} median (slope {slope:.2f})",
                )
                band = ok & np.isfinite(lo) & (lo > 0)
                ax.fill_between(n[band], lo[band], hi[band], color=colors[code], alpha=0.15)
                okm = np.isfinite(mean) & (mean > 0)
                ax.loglog(n[okm], mean[okm], ":", color=colors[code], alpha=0.8)
                shape = (
                    None
                    if code == "GCC-interp"
                    else _theory_curve(code, regime, n, cfg["stragglers"], cfg["p"], sigma)
                )
                if shape is not None and ok.any():
                    first = np.flatnonzero(ok)[0]
                    ax.loglog(
                        n,
                        med[first] / shape[first] * shape,
                        "--",
                        color=colors[code],
                        alpha=0.5,
                        label=f"theory slope {theory_slope(code, regime, sigma):g}",
                    )
            ax.fill_between([], [], [], color="0.5", alpha=0.3, label="95% bootstrap CI (median)")
            ax.plot([], [], ":", color="0.3", label="dotted: mean")
            ax.set_xticks(n, [str(int(v)) for v in n])
            ax.minorticks_off()
            if regime == "worst":
                exact = all(
                    r.get("exhaustive", False)
                    for r in rows
                    if r["function"] == fname and r["sigma"] == sigma and r["regime"] == "worst"
                )
                search = "all patterns" if exact else "worst found: a lower bound"
                title = f"worst case, S={cfg['stragglers']} ({search})"
            else:
                title = f"iid p={cfg['p']}"
            ax.set_title(f"{fname}, σ={sigma:g}: {title}", fontsize=10)
            ax.set_xlabel("N (workers)")
            ax.set_ylabel("loss (1/K) Σ‖f^ − f‖² (dotted: mean)")
            ax.grid(True, which="both", alpha=0.3)
            legend_outside(ax, fontsize=7)
    fig.tight_layout()
    return fig


save = save_rates = save_report(format_rates_table, plot_rates)
"""Write ``rates.json``, ``rates.txt`` and ``rates.png`` into the folder ``out``."""
