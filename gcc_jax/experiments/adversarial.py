"""Byzantine workers: the adversarial GCC paper's rate experiment and a decoder × adversary table.

Setting (Moradi, Akbarinodehi & Maddah-Ali, arXiv 2502.08058): ``γ`` of the ``N`` workers are
adversarial and return anything within ``[−M, M]^m``. Two parts:

**Rates** (the paper's experiment). ``γ = ⌈N^a⌉`` for ``a`` in ``exponents``, ``N`` log-spaced
(20 … 640 at full size), ``K`` fixed. The decoder is the paper's: GCC's smoothing spline with
``λ_dec = c (γM/N)^{8/5}`` (:func:`gcc_jax.adversarial_lam_dec`; the constant ``c`` is chosen on a
*calibration* job with its own inputs, never on the measured ones). The error of one job is the
worst over the adversaries this library has: the fixed strategies at random positions (the
``"bias"`` one on a contiguous block) and the gradient attack (``"pgd"``) at the worst positions
found by :func:`gcc_jax.worst_case_adversaries`. Reported: the mean over ``trials`` jobs per
``N`` and the fitted log-log slope in ``N``, beside the paper's ``6/5 (a − 1)``.

**Table**. At one ``(N, γ)``, every decoder against every adversary, each cell the mean over
``trials`` jobs of the loss: GCC with the paper's λ, GCC with ``λ = 0`` (what a straggler-only
deployment uses), the robust decoders (:class:`gcc_jax.RobustSplineCode`: Huber, Tukey, trimming
``γ``; residual-scale floor ``10⁻³ M``), BACC without error location, ApproxIFER
(:class:`gcc_jax.ApproxIFERCode`, ``A = γ``) and, for the polynomial job only, LCC with error
correction (:class:`gcc_jax.LagrangeECCode`).

Functions: ``xsinx`` (``x·sin x``, ``x_k ~ U(−3, 3)``, ``M = 2``), ``cubic`` (``x³ − 3x``,
``x_k ~ U(−2, 2)``, ``M = 2``; degree 3 so LCC-EC applies) and ``lenet5`` (LeNet-5 logits on
scikit-learn digits images, trained by :func:`gcc_jax.nn.training.train_classifier` and cached;
``M`` = 1.25 × the largest honest |logit| of a calibration batch; the calibration of ``M`` and
of ``c`` uses the model's held-out *training* images, the scored jobs test images) and ``zero``
(``f ≡ 0``, ``M = 2``: no smoothing bias, so the loss is the adversaries' influence alone — the
adversarial term of the paper's bound, whose exponent is exactly ``6/5 (a − 1)`` for
``λ_dec ∝ (γ/N)^{8/5}``).

Loss: ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` (the GCC papers' squared error).
"""

import itertools
import math
import sys
import time
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.scalars import as_choice
from .._core.types import ArrayLike, Real
from ..codes import (
    ApproxIFERCode,
    BerrutCode,
    LagrangeCode,
    LagrangeECCode,
    RobustSplineCode,
    SplineCode,
    adversarial_lam_dec,
)
from ..evaluation import (
    Adversary,
    adversary_positions,
    attack_losses,
    targeted_attack,
    worst_case_adversaries,
)
from ._command import StopOnInterrupt, from_arguments
from ._commands.adversarial import (
    DECODERS,
    DEFAULTS,
    FULL,
    STRATEGIES,
    TOY,
    VALUE_STRATEGIES,
)
from ._io import ExperimentResult, new_figure, save_report
from ._plots import annotate_cells, integer_ticks, log_ticks
from ._summary import MIN_FIT_POINTS, fit_interval
from .rates import fit_slope

__all__ = [
    "DECODERS",
    "DEFAULTS",
    "FULL",
    "STRATEGIES",
    "TOY",
    "format_adversarial_table",
    "plot_adversarial",
    "report",
    "run",
    "run_adversarial",
    "save",
    "save_adversarial",
]


METRICS = {
    "loss": "(1/K) Σ_k ‖f^(x_k) − f(x_k)‖² of one coded job after the attack",
    "worst": "largest loss over the strategies (max, sign_flip, random, bias on a contiguous "
    "block, the gradient attack at the worst of four sampled position sets, the targeted attack "
    "of gcc_jax.targeted_attack; in the table also each value strategy at the worst positions "
    "found by gcc_jax.worst_case_adversaries, the '@worst' columns): a lower bound on the "
    "supremum over all adversaries",
    "slope": "least-squares slope of log(mean worst loss) against log N",
    "slope_ci": "95% bootstrap interval of the slope (jobs resampled with replacement, 2000 "
    "draws); null with fewer than three N",
    "slope_upper": "the slope fitted on the upper half of the N values only (closer to the "
    "asymptotic regime the theory describes), with its bootstrap interval",
    "theory_slope": "the paper's rate exponent 6/5 (a − 1) for γ = N^a",
}


# ------------------------------------------------------------------------------------------------
# jobs


def _xsinx(v):
    return v * jnp.sin(v)


def _cubic(v):
    return v**3 - 3.0 * v


def _zero(v):
    return 0.0 * v


_ANALYTIC = {
    "xsinx": (_xsinx, 3.0, 2.0, 1),  # f, input half-range, bound M, (degree: None)
    "cubic": (_cubic, 2.0, 2.0, 3),
    "zero": (_zero, 1.0, 2.0, 1),
}


class _Job:
    """One worker function: inputs per trial, its bound ``M`` and polynomial degree."""

    def __init__(self, name: str, num_inputs: int, seed: int, lenet_epochs: int, progress: bool):
        self.name = name
        self.k = num_inputs
        if name in _ANALYTIC:
            f, half, bound, degree = _ANALYTIC[name]
            self.f, self.bound = f, bound
            self.degree = degree if name == "cubic" else None
            self._half = half
            self._images = None
            return
        if name != "lenet5":
            raise ValueError(f"unknown function {name!r}; use xsinx, cubic, zero or lenet5")
        from ..nn.data import load_dataset
        from ..nn.training import train_classifier

        ds = load_dataset("digits")
        trained = train_classifier("lenet5", ds, epochs=lenet_epochs, seed=seed, progress=progress)
        self.f = trained.worker_fn(output="logits")
        self._images = np.asarray(ds.x_test)  # scored jobs (purpose 0)
        # M and the constant c are calibrated on held-out *training* images (the model's
        # validation images), never on test images
        self._tune_images = np.asarray(ds.x_train[trained.validation_indices(ds.num_train)])
        self.degree = None
        calib = np.random.default_rng((seed, 7)).choice(len(self._tune_images), 64, replace=False)
        honest = np.asarray(jax.vmap(self.f)(jnp.asarray(self._tune_images[calib])))
        self.bound = float(1.25 * np.abs(honest).max())
        self.test_accuracy = float(trained.test_accuracy)

    def inputs(self, seed: int, trial: int, purpose: int) -> np.ndarray:
        """``K`` inputs: test images for the scored jobs (``purpose=0``), held-out training
        images for the calibration (``purpose ≥ 1``); uniform draws for the analytic jobs."""
        rng = np.random.default_rng((seed, trial, purpose))
        if self._images is None:
            return rng.uniform(-self._half, self._half, size=(self.k, 1))
        images = self._images if purpose == 0 else self._tune_images
        return images[rng.choice(len(images), self.k, replace=False)]


def _make_decoder(
    name: str, k: int, n: int, gamma: int, lam: float, degree: int | None, bound: float = 1.0
):
    """``(decoder, linear surrogate)``: the surrogate is the decoder itself when it is linear,
    else its plain counterpart (the targeted attack's positions and values come from it)."""
    base = SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=lam)
    if name == "gcc":
        return base, base
    if name == "gcc-lam0":
        code = SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=0.0)
        return code, code
    if name in ("huber", "tukey", "trim"):
        robust = RobustSplineCode.from_spline(
            base, loss=name, iterations=10, trim=gamma, min_scale=1e-3 * bound
        )
        return robust, base
    if name == "bacc":
        code = BerrutCode.chebyshev(num_inputs=k, num_workers=n)
        return code, code
    if name == "approxifer":
        code = ApproxIFERCode.chebyshev(num_inputs=k, num_workers=n, num_adversaries=gamma)
        return code, BerrutCode.chebyshev(num_inputs=k, num_workers=n)
    if name == "lcc-ec":
        if degree is None:
            return None, None  # LCC needs a polynomial f
        code = LagrangeECCode.chebyshev(
            num_inputs=k, num_workers=n, degree=degree, num_adversaries=gamma
        )
        return code, LagrangeCode.chebyshev(num_inputs=k, num_workers=n, degree=degree)
    raise ValueError(f"unknown decoder {name!r}; use {DECODERS}")


def _worst_at(code, yt, fx, sets, adversary, key, chunk=None) -> float:
    """The largest loss of ``adversary`` over position sets ``sets`` (``(p, n)``; ``inf``: a
    failed decode), batched through :func:`gcc_jax.attack_losses` in chunks of ``chunk`` masks
    (default that of the position search, so the two share one compiled program per code)."""
    chunk = _CHUNK if chunk is None else chunk
    loss, status = attack_losses(code, yt, fx, sets, adversary, key=key, chunk_size=chunk)
    return float(np.max(np.where(status == 0, loss, np.inf)))


_CHUNK = 16
"""Masks per chunk of the attack evaluations (one compiled shape for all of them), except the
gradient attack's four position sets when it is not also searched: padding them to 16 would
run 12 needless gradient attacks."""


def _losses(
    code, surrogate, f, x, gamma, bound, strategies, key, pgd_steps, search, searched=(),
    clean=False,
) -> dict[str, float]:  # fmt: skip
    """Loss after each strategy. Fixed strategies at random positions (``"bias"``: a random
    contiguous block); ``"pgd"`` at the worst of four sampled position sets (two random, a
    random block, the block at the end); ``"targeted"`` at its own positions
    (:func:`gcc_jax.targeted_attack` on ``surrogate``). Each value strategy in ``searched``
    also at the worst positions found by :func:`gcc_jax.worst_case_adversaries` (key
    ``"<strategy>@worst"``). ``clean``: also the loss with no adversary (key ``"clean"``)."""
    xj = jnp.asarray(x)
    yt, fx = code.worker_outputs(f, xj), jax.vmap(f)(xj)
    n = code.num_workers
    out = {}
    k_pos, k_block, k_att = jax.random.split(key, 3)

    for s in strategies:
        if s == "targeted":
            res = targeted_attack(code, yt, fx, bound, gamma, surrogate=surrogate)
            out[s] = res.loss if res.status == 0 else float("inf")
            continue
        adversary = Adversary(bound, s, steps=pgd_steps)
        if s == "pgd":
            keys = jax.random.split(k_pos, 3)
            sets = [
                adversary_positions(keys[0], n, gamma),
                adversary_positions(keys[1], n, gamma),
                adversary_positions(keys[2], n, gamma, kind="contiguous"),
                jnp.arange(n) >= n - gamma,
            ]
        else:
            kind = "contiguous" if s == "bias" else "random"
            sets = [adversary_positions(k_block if s == "bias" else k_pos, n, gamma, kind=kind)]
        # pgd not searched (the rates): a chunk of exactly its sets, no padded gradient attacks
        chunk = len(sets) if s == "pgd" and s not in searched else None
        out[s] = _worst_at(code, yt, fx, np.stack(sets), adversary, k_att, chunk)
    for s in searched:
        res = worst_case_adversaries(
            code, yt, fx, Adversary(bound, s, steps=pgd_steps), gamma, key=k_att,
            chunk_size=_CHUNK, search=search,
        )  # fmt: skip
        out[f"{s}@worst"] = res.loss
    if clean:  # no adversary: the "max" program at an empty position set
        out["clean"] = _worst_at(code, yt, fx, np.zeros((1, n), bool), Adversary(bound, "max"),
                                 k_att)  # fmt: skip
    return out


def slope_with_ci(
    n: Sequence[float] | Real[ArrayLike, " i"],
    trials: Sequence[Sequence[float]] | Real[ArrayLike, "t i"],
    *,
    draws: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Log-log slope of the mean-over-jobs curve and its 95% bootstrap interval.

    ``trials[t][i]`` is job ``t``'s loss at ``n[i]``; each draw resamples the jobs with
    replacement, averages them per ``N`` and refits (:func:`gcc_jax.experiments.rates.fit_slope`).
    """
    vals = np.asarray(trials, float)  # (trials, len(n))
    slope = fit_slope(n, vals.mean(axis=0))[0]
    if vals.shape[0] < 2:
        return slope, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boot = [
        fit_slope(n, vals[rng.integers(0, len(vals), len(vals))].mean(axis=0))[0]
        for _ in range(draws)
    ]
    lo, hi = np.nanpercentile(boot, [2.5, 97.5])
    return slope, float(lo), float(hi)


def _trial_losses(
    code,
    surrogate,
    job,
    gamma,
    strategies,
    trials,
    seed,
    pgd_steps,
    search,
    searched,
    clean=False,
) -> list[dict[str, float]]:
    """:func:`_losses` on each trial's own inputs (``purpose=0``) and attack key."""
    return [
        _losses(
            code, surrogate, job.f, job.inputs(seed, trial, purpose=0), gamma, job.bound,
            strategies, jax.random.key(seed * 1000 + trial), pgd_steps, search, searched=searched,
            clean=clean,
        )
        for trial in range(trials)
    ]  # fmt: skip


def _log(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


class _Attack(NamedTuple):
    """The knobs every measurement shares: sizes, adversaries, trials and search settings."""

    num_inputs: int
    strategies: Sequence[str]
    trials: int
    seed: int
    pgd_steps: int
    search: dict
    rate_searched: tuple[str, ...]  # strategies the rates also run at the searched positions
    progress: bool


def _gamma(n: int, a: float) -> int:
    """``γ = ⌈N^a⌉`` (at least 1)."""
    return max(1, math.ceil(n**a - 1e-9))


def _calibrate(at: _Attack, job: _Job, n_cal: int, a_cal: float, constants) -> dict:
    """``c`` of the λ rule for one function: the constant with the smallest worst loss on a
    calibration job (own inputs) at ``N = n_cal``, ``γ = ⌈n_cal^a_cal⌉``."""
    g_cal = _gamma(n_cal, a_cal)
    cal_strategies = [s for s in ("max", "bias", "pgd", "targeted") if s in at.strategies]
    cal_strategies = cal_strategies or list(at.strategies)
    x = job.inputs(at.seed, 0, purpose=1)
    scores = {}
    for c in constants:
        lam = adversarial_lam_dec(n_cal, g_cal, job.bound, constant=c)
        code, sur = _make_decoder("gcc", at.num_inputs, n_cal, g_cal, lam, None)
        losses = _losses(
            code, sur, job.f, x, g_cal, job.bound, cal_strategies, jax.random.key(at.seed + 1),
            at.pgd_steps, at.search, searched=at.rate_searched,
        )  # fmt: skip
        scores[c] = max(losses.values())
        _log(
            at.progress,
            f"calibrate {job.name}: N={n_cal} γ={g_cal} c={c:g} worst={scores[c]:.3e}",
        )
    best = min(scores, key=lambda c: scores[c])
    return dict(
        constant=best, N=n_cal, gamma=g_cal, a=a_cal, scores={str(c): scores[c] for c in scores}
    )


def _rate_row(at: _Attack, job: _Job, constant: float, a: float, n: int) -> dict:
    """One point of the rates: GCC with the calibrated λ rule at ``N = n``, ``γ = ⌈n^a⌉``."""
    gamma = _gamma(n, a)
    lam = adversarial_lam_dec(n, gamma, job.bound, constant=constant)
    code, sur = _make_decoder("gcc", at.num_inputs, n, gamma, lam, None)
    per_trial = _trial_losses(
        code, sur, job, gamma, at.strategies, at.trials, at.seed, at.pgd_steps, at.search,
        searched=at.rate_searched,
    )  # fmt: skip
    worst = [max(t.values()) for t in per_trial]
    _log(at.progress, f"rates {job.name}: a={a:g} N={n} γ={gamma} worst={np.mean(worst):.3e}")
    return dict(
        function=job.name, a=a, N=n, gamma=gamma, lam_dec=lam,
        worst=float(np.mean(worst)), worst_trials=worst,
        by_strategy={s: float(np.mean([t[s] for t in per_trial])) for s in per_trial[0]},
    )  # fmt: skip


def _table_row(at: _Attack, job: _Job, dname: str, n: int, gamma: int, lam: float):
    """One row of the decoder table (``None`` when the decoder does not apply)."""
    code, sur = _make_decoder(dname, at.num_inputs, n, gamma, lam, job.degree, job.bound)
    if code is None:
        return None
    per_trial = _trial_losses(
        code, sur, job, gamma, at.strategies, at.trials, at.seed, at.pgd_steps, at.search,
        searched=[s for s in at.strategies if s in VALUE_STRATEGIES], clean=True,
    )  # fmt: skip
    clean = [t.pop("clean") for t in per_trial]
    cells = {s: float(np.mean([t[s] for t in per_trial])) for s in per_trial[0]}
    _log(
        at.progress,
        f"table {job.name}: {dname:>10} clean={np.mean(clean):.2e} "
        + " ".join(f"{c}={v:.2e}" for c, v in cells.items()),
    )
    return dict(
        function=job.name, decoder=dname, N=n, gamma=gamma, clean=float(np.mean(clean)),
        worst=max(cells.values()), **cells,
    )  # fmt: skip


def _fit(rows: list[dict], name: str, a: float, workers, trials: int, seed: int) -> dict | None:
    """The slope of one series (function, ``a``) in ``N``, over all ``N`` and the upper half,
    with bootstrap intervals (``None`` when fewer than two ``N`` were measured)."""
    sel = [r for r in rows if r["function"] == name and r["a"] == a]
    if len(sel) < 2:  # an interrupted run did not reach this series
        return None
    upper = sorted(workers)[len(workers) // 2 :] if len(workers) >= 4 else sorted(workers)
    n = [r["N"] for r in sel]
    per = [[r["worst_trials"][t] for r in sel] for t in range(trials)]
    slope, lo, hi = slope_with_ci(n, per, seed=seed)
    up = [i for i, v in enumerate(n) if v in upper]
    s_up, lo_up, hi_up = slope_with_ci(
        [n[i] for i in up], [[p[i] for i in up] for p in per], seed=seed
    )
    return dict(
        function=name, a=a, slope=slope, slope_ci=fit_interval(len(n), [lo, hi]),
        slope_upper=s_up, slope_upper_ci=fit_interval(len(up), [lo_up, hi_up]),
        upper_workers=[n[i] for i in up], theory_slope=1.2 * (a - 1.0),
        trial_slopes=[fit_slope(n, p)[0] for p in per],
    )  # fmt: skip


def _slope_ci(ci) -> str:
    """A slope's interval as ``[lo, hi]``, or why there is none (fewer than three ``N``)."""
    if ci is None:
        return f"(< {MIN_FIT_POINTS} N: no CI)"
    lo, hi = (np.nan if v is None else v for v in ci)
    return f"[{lo:.2f}, {hi:.2f}]"


def _check(decoders, strategies) -> None:
    """``ValueError`` for an unknown decoder or strategy."""
    for d in decoders:
        as_choice(d, "decoders", DECODERS)
    for s in strategies:
        as_choice(s, "strategies", STRATEGIES)


def run_adversarial(
    *,
    workers: Sequence[int] = DEFAULTS["workers"],
    exponents: Sequence[float] = DEFAULTS["exponents"],
    num_inputs: int = DEFAULTS["num_inputs"],
    functions: Sequence[str] = DEFAULTS["functions"],
    table_functions: Sequence[str] = DEFAULTS["table_functions"],
    table_workers: int = DEFAULTS["table_workers"],
    table_adversaries: int = DEFAULTS["table_adversaries"],
    decoders: Sequence[str] = DECODERS,
    strategies: Sequence[str] = STRATEGIES,
    trials: int = DEFAULTS["trials"],
    constants: Sequence[float] = DEFAULTS["constants"],
    pgd_steps: int = DEFAULTS["pgd_steps"],
    search: dict | None = None,
    lenet_epochs: int = DEFAULTS["lenet_epochs"],
    rate_positions: str = DEFAULTS["rate_positions"],
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """The adversarial experiment (module docstring): rates in ``N`` and the decoder table.

    Args:
        workers: ``N`` values of the rate experiment.
        exponents: ``a`` values, ``γ = ⌈N^a⌉``.
        num_inputs: ``K``.
        functions: worker functions of the rate experiment (``xsinx``, ``cubic``, ``lenet5``).
        table_functions: worker functions of the table.
        table_workers, table_adversaries: ``(N, γ)`` of the table.
        decoders: table rows (subset of :data:`DECODERS`).
        strategies: adversaries (subset of :data:`STRATEGIES`).
        trials: jobs (independent inputs) per cell.
        constants: grid for ``c`` of the λ rule, chosen per function on a calibration job
            (own inputs, ``N`` = the middle of ``workers``, ``a`` = the middle exponent) by the
            smallest worst loss.
        pgd_steps: gradient steps of each ``"pgd"`` start.
        search: worst-case position search settings (``restarts``, ``proposals``,
            ``max_iters``, ``patience``).
        lenet_epochs: training epochs of LeNet-5 (cached).
        rate_positions: ``"sample"`` (the rates' gradient attack at the worst of four sampled
            position sets only) or ``"search"`` (also at the worst positions of the search,
            ``"pgd@worst"``, as in the table; much slower at large ``N``).
        seed: seeds inputs, positions, attacks and training.
        progress: one line per measurement on stderr.

    Returns:
        An :class:`ExperimentResult` with ``results = {"calibration", "rows", "fits",
        "table"}``.
    """
    search = dict(DEFAULTS["search"] if search is None else search)
    _check(decoders, strategies)
    workers = tuple(int(n) for n in workers)
    t_start = time.perf_counter()
    rate_searched = ("pgd",) if rate_positions == "search" and "pgd" in strategies else ()
    at = from_arguments(_Attack, locals())
    jobs, calibration, rows, table, timing = {}, {}, [], [], {}
    # Ctrl-C keeps what finished: whole calibrations, rate rows and table rows
    with StopOnInterrupt() as stop:
        t0 = time.perf_counter()
        for name in dict.fromkeys((*functions, *table_functions)):
            jobs[name] = _Job(name, num_inputs, seed, lenet_epochs, progress)
        timing["setup"] = time.perf_counter() - t0

        t0 = time.perf_counter()  # calibration of c (own inputs: purpose 1)
        n_cal = workers[len(workers) // 2]
        a_cal = sorted(exponents)[len(exponents) // 2]
        for name, job in jobs.items():
            calibration[name] = _calibrate(at, job, n_cal, a_cal, constants)
        timing["calibration"] = time.perf_counter() - t0

        t0 = time.perf_counter()  # rates
        for name, a, n in itertools.product(functions, exponents, workers):
            rows.append(_rate_row(at, jobs[name], calibration[name]["constant"], a, n))
        timing["rates"] = time.perf_counter() - t0

        t0 = time.perf_counter()  # table
        n, gamma = int(table_workers), int(table_adversaries)
        for name in table_functions:
            job = jobs[name]
            lam = adversarial_lam_dec(n, gamma, job.bound, constant=calibration[name]["constant"])
            for dname in decoders:
                if (row := _table_row(at, job, dname, n, gamma, lam)) is not None:
                    table.append(row)
        timing["table"] = time.perf_counter() - t0

    # the series with at least two N values measured
    fits = [_fit(rows, name, a, workers, trials, seed) for name in functions for a in exponents]
    fits = [fit for fit in fits if fit is not None]
    config = dict(
        interrupted=stop.interrupted,
        workers=list(workers), exponents=list(exponents), num_inputs=num_inputs,
        functions=list(functions), table_functions=list(table_functions),
        table_workers=int(table_workers), table_adversaries=int(table_adversaries),
        decoders=list(decoders),
        strategies=list(strategies), trials=trials, constants=list(constants),
        pgd_steps=pgd_steps, search=search, lenet_epochs=lenet_epochs,
        rate_positions=rate_positions,
        bounds={name: job.bound for name, job in jobs.items()},
        dtype=str(jnp.zeros(()).dtype),
    )  # fmt: skip
    if "lenet5" in jobs:
        config["lenet5_test_accuracy"] = jobs["lenet5"].test_accuracy
    return stop.finish(
        ExperimentResult.of_run(
            "adversarial",
            config,
            seed,
            METRICS,
            dict(calibration=calibration, rows=rows, fits=fits, table=table),
            t_start=t_start,
            phases=timing,
        )
    )


run = run_adversarial


# ------------------------------------------------------------------------------------------------
# report


def _table_columns(table: list[dict]) -> list[str]:
    """The adversary columns of the table rows, in strategy order (random positions first)."""
    keys = {k for r in table for k in r}
    order = [*STRATEGIES, *(f"{s}@worst" for s in VALUE_STRATEGIES)]
    return [c for c in order if c in keys]


def format_adversarial_table(result: ExperimentResult) -> str:
    """Plain text: calibrated constants, worst loss per ``N``, slopes vs ``6/5 (a−1)``, table."""
    cfg, res = result.config, result.results
    lines = [
        f"Adversarial GCC: K={cfg['num_inputs']}, λ_dec = c (γM/N)^(8/5), "
        f"{cfg['trials']} job(s) per cell, {cfg['dtype']}"
    ]
    if cfg.get("interrupted"):
        lines.insert(
            0, "INTERRUPTED (Ctrl-C): only the calibrations, rate rows and table rows finished."
        )
    for name, cal in res["calibration"].items():
        lines.append(
            f"  c for {name}: {cal['constant']:g} (calibration job: N={cal['N']}, γ={cal['gamma']},"
            f" M={cfg['bounds'][name]:.3g})"
        )
    for name in cfg["functions"]:
        lines.append(f"\n{name}: worst loss over the adversaries, γ = ⌈N^a⌉")
        lines.append(
            f"{'N':>6} " + " ".join(f"{'a=' + format(a, 'g'):>11}" for a in cfg["exponents"])
        )
        for n in cfg["workers"]:
            vals = []
            for a in cfg["exponents"]:
                r = [
                    r for r in res["rows"] if r["function"] == name and r["a"] == a and r["N"] == n
                ]
                vals.append(f"{r[0]['worst']:>11.3e}" if r else f"{'-':>11}")
            lines.append(f"{n:>6} " + " ".join(vals))
    lines.append(
        "\nfitted log-log slopes of the mean worst loss in N, [95% bootstrap CI over jobs], vs the "
        "paper's 6/5 (a − 1)"
    )
    for fit in res["fits"]:
        up = fit["upper_workers"]
        lines.append(
            f"  {fit['function']:>7} a={fit['a']:<5g}: all N {fit['slope']:6.2f} "
            f"{_slope_ci(fit['slope_ci'])}   N>={up[0]}: {fit['slope_upper']:6.2f} "
            f"{_slope_ci(fit['slope_upper_ci'])}   theory {fit['theory_slope']:.2f}"
        )
    cols = _table_columns(res["table"])
    lines.append(
        f"\ndecoder × adversary (N={cfg['table_workers']}, γ={cfg['table_adversaries']}): "
        "mean loss; 'clean' = no adversary; '@worst' = at the searched worst positions"
    )
    w = {c: max(9, len(c)) for c in cols}
    head = f"{'function':>8} {'decoder':>10} {'clean':>9} " + " ".join(f"{c:>{w[c]}}" for c in cols)
    lines.append(head + f" {'worst':>9}")
    for r in res["table"]:
        lines.append(
            f"{r['function']:>8} {r['decoder']:>10} {r['clean']:>9.2e} "
            + " ".join(f"{r[c]:>{w[c]}.2e}" if c in r else f"{'-':>{w[c]}}" for c in cols)
            + f" {r['worst']:>9.2e}"
        )
    return "\n".join(lines)


report = format_adversarial_table


_HEATMAP_RANGE = 1e-12
"""Losses more than 12 decades below the heat map's largest are round-off (exact decoders)."""


def plot_adversarial(result: ExperimentResult):
    """Top row: log-log worst loss vs ``N`` per ``a``, with the paper's slope ``6/5 (a−1)``
    anchored at the smallest ``N`` (only the slope is theory), one panel per function. Bottom
    row: the decoder × adversary table as a heat map of ``log10`` loss, one panel per function."""
    from matplotlib.ticker import NullFormatter

    cfg, res = result.config, result.results
    rows, table = res["rows"], res["table"]
    funcs = list(cfg["functions"])
    tfuncs = [f for f in cfg["table_functions"] if any(r["function"] == f for r in table)]
    ncols = max(len(funcs), len(tfuncs), 1)
    nrows = 1 + bool(tfuncs)
    fig, axes = new_figure(nrows, ncols, figsize=(6.5 * ncols, 4.5 * nrows), squeeze=False)
    for i in range(ncols):
        if i >= len(funcs):
            axes[0, i].axis("off")
            continue
        name = funcs[i]
        ax = axes[0, i]
        for j, a in enumerate(cfg["exponents"]):
            sel = [r for r in rows if r["function"] == name and r["a"] == a]
            fit = [f for f in res["fits"] if f["function"] == name and f["a"] == a]
            if not fit:  # fewer than two N values measured (an interrupted run)
                continue
            fit = fit[0]
            n = np.array([r["N"] for r in sel], float)
            loss = np.array([r["worst"] for r in sel], float)
            ok = np.isfinite(loss) & (loss > 0)
            ax.loglog(
                n[ok], loss[ok], "o-", color=f"C{j}",
                label=f"a={a:g}: slope {fit['slope']:.2f} {_slope_ci(fit['slope_ci'])}",
            )  # fmt: skip
            if ok.any():
                first = np.flatnonzero(ok)[0]
                ax.loglog(
                    n, loss[first] * (n / n[first]) ** (1.2 * (a - 1)), "--", color=f"C{j}",
                    alpha=0.6, label=f"N^(6/5(a−1)) = N^{1.2 * (a - 1):.2f}",
                )  # fmt: skip
        measured = sorted({int(r["N"]) for r in rows if r["function"] == name})
        if measured:  # integer ticks at the measured N (every other one past 7), no 1.2×10¹
            integer_ticks(ax, measured[:: 1 + (len(measured) > 7)])
            ax.xaxis.set_minor_formatter(NullFormatter())
        log_ticks(ax)
        ax.set_xlabel("N (workers)")
        ax.set_ylabel("worst loss (1/K) Σ‖f^ − f‖²")
        ax.set_title(f"{name}: γ = ⌈N^a⌉ adversaries")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # none on an interrupted run's empty panel
            ax.legend(fontsize=7)
    if tfuncs:
        cols = ["clean", *_table_columns(table), "worst"]
        for i in range(ncols):
            ax = axes[1, i]
            if i >= len(tfuncs):
                ax.axis("off")
                continue
            sel = [r for r in table if r["function"] == tfuncs[i]]
            vals = np.array([[r.get(c, np.nan) for c in cols] for r in sel], float)
            # the colour scale spans the losses that are not round-off (within 12 decades of
            # the largest): an exact decoder's 0 or 1e-30 is drawn at the scale's floor, the
            # smallest real loss, and labelled with its value
            pos = vals[np.isfinite(vals) & (vals > 0)]
            top = pos.max() if pos.size else 1.0
            real = pos[pos >= top * _HEATMAP_RANGE]
            floor = real.min() if real.size and real.min() < top else top * 1e-3
            img = np.log10(np.clip(vals, floor, None))
            im = ax.imshow(
                img, aspect="auto", cmap="viridis", vmin=np.log10(floor), vmax=np.log10(top)
            )
            texts = [["0" if v == 0 else f"{v:.0e}" for v in row] for row in vals]
            annotate_cells(ax, img, texts, im)
            ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=6)
            ax.set_yticks(range(len(sel)), [r["decoder"] for r in sel], fontsize=7)
            ax.set_title(
                f"{tfuncs[i]}: decoder × adversary, N={cfg['table_workers']}, "
                f"γ={cfg['table_adversaries']} (log10 loss)",
                fontsize=8,
            )
            below = f" (below {floor:.0e}: at the floor)" if (vals < floor).any() else ""
            fig.colorbar(im, ax=ax, fraction=0.03).set_label(f"log10 loss{below}", fontsize=8)
    fig.tight_layout()
    return fig


save = save_adversarial = save_report(format_adversarial_table, plot_adversarial)
"""Write ``adversarial.json``, ``adversarial.txt`` and ``adversarial.png`` into ``out``."""
