"""Choosing GCC's smoothing parameters and nodes: defaults, grid CV, GCV, gradient tuning.

For each workload (a worker function ``f`` and a distribution of inputs) and each straggler
regime (worst case with ``S`` stragglers; iid with probability ``p``) six ways of setting up a
:class:`~gcc_jax.SplineCode` are compared on **held-out jobs** (inputs never used for tuning)
and **held-out patterns** (a fresh key for the random patterns; a fresh worst-case search):

* ``default`` — ``λ_enc = λ_dec = 0`` (natural interpolation: the noiseless theory's choice)
  at the papers' nodes (Chebyshev-1 inputs, Chebyshev-2 workers);
* ``grid-CV`` — the papers' procedure: ``(λ_enc, λ_dec)`` picked on a log grid by the loss on
  the training jobs (:func:`gcc_jax.tuning.grid_search`);
* ``GCV`` — ``λ_enc = 0``, and ``λ_dec`` chosen per pattern and job from the live workers'
  outputs alone by generalised cross-validation (:func:`gcc_jax.tuning.gcv_lam_dec`);
* ``CV`` — the same with 5-fold cross-validation over the live workers
  (:func:`gcc_jax.tuning.cv_lam_dec`);
* ``tuned λ`` — both λs tuned by Adam on the end-to-end loss (:func:`gcc_jax.tuning.tune`),
  starting from the grid-CV choice (from λ = 0 the log-λ gradient ``λ ∂L/∂λ`` vanishes);
* ``tuned λ+nodes`` — the λs and the node positions of ``alpha`` and ``beta`` tuned together,
  from the same start.

The loss is the paper's ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` averaged over the held-out jobs; a
random regime averages it over patterns, the worst case takes the largest over patterns of
exactly ``S`` stragglers — all ``C(N, S)`` when few, otherwise the contiguous blocks plus a local
search (:func:`gcc_jax.worst_case_mask`'s), which gives a lower bound; every code is also scored
on the worst patterns found for the other codes, and the per-pattern rules (GCV, CV, costlier to
decode) are searched more lightly from those.

Workloads: the papers' ``x·sin(x)`` (scalar inputs ``U(−3, 3)``), a smooth map ℝ² → ℝ³
(:func:`gcc_jax.experiments.rates.vector_map`, inputs ``U(−1, 1)²``) and LeNet-5 on the 8x8
digits (the worker returns the softmax vector; trained once through the checkpoint cache; jobs
of training images for tuning, of test images for evaluation; the code acts on the flattened
images). Everything runs in float64.
"""

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.memory import release_memory
from .._core.precision import Float32PrecisionWarning
from .._core.scalars import as_choice
from .._core.types import Array
from ..codes import SplineCode
from ..evaluation import ratio_ci
from ..tuning import (
    StragglerModel,
    cv_lam_dec,
    evaluate,
    gcv_lam_dec,
    grid_search,
    tune,
)
from ._command import StopOnInterrupt
from ._commands.tune import REGIMES, WORKLOADS
from ._io import ExperimentResult, new_figure, save_report, warn_float32
from ._plots import legend_outside, log_errorbar, log_ticks
from .rates import vector_map, xsinx

__all__ = [
    "METHODS",
    "WORKLOADS",
    "Workload",
    "format_tune_table",
    "plot_tune",
    "report",
    "run",
    "run_tune",
    "save",
    "save_tune",
    "toy_config",
]

METHODS = ("default", "grid-CV", "GCV", "CV", "tuned λ", "tuned λ+nodes")


@dataclasses.dataclass(frozen=True)
class Workload:
    """Sizes of one workload: ``K`` inputs per job, ``N`` workers, ``S`` worst-case stragglers,
    iid probability ``p``, and the numbers of training and held-out jobs."""

    name: str
    num_inputs: int
    num_workers: int
    stragglers: int
    p: float
    train_jobs: int
    test_jobs: int
    jobs_per_step: int | None = None


FULL = {
    "xsinx": Workload("xsinx", 10, 40, 4, 0.1, 64, 128),
    "vector_map": Workload("vector_map", 10, 40, 4, 0.1, 64, 128),
    "lenet5": Workload("lenet5", 30, 60, 10, 0.1, 40, 12, jobs_per_step=8),
}
#: toy sizes share compiled evaluators between stages: as many held-out jobs as the tuning's
#: validation split of the 10 training jobs (2), and 128 patterns wherever a stage draws random
#: ones, the block the exhaustive worst case over C(16, 2) = 120 patterns decodes
TOY = {
    "xsinx": Workload("xsinx", 5, 16, 2, 0.15, 10, 2),
    "vector_map": Workload("vector_map", 5, 16, 2, 0.15, 10, 2),
    "lenet5": Workload("lenet5", 5, 16, 2, 0.15, 10, 2),
}

#: tuning settings of a full run and of a toy run
FULL_TUNE = dict(steps=500, eval_every=10, patience=8, num_masks=32, val_masks=256)
TOY_TUNE = dict(steps=8, eval_every=4, patience=2, num_masks=15, val_masks=128)
#: grid-CV grids (``None``: :func:`gcc_jax.tuning.grid_search`'s defaults)
FULL_GRID = dict(lam_enc_grid=None, lam_dec_grid=None)
TOY_GRID = dict(lam_enc_grid=(0.0, 1e-8, 1e-6, 1e-4), lam_dec_grid=(0.0, 1e-8, 1e-6, 1e-4, 1e-2))
#: evaluation settings: random patterns per held-out evaluation; the light search of the rules
FULL_EVAL = dict(num_masks=512, rule_search=dict(restarts=2, proposals=32, max_iters=5))
TOY_EVAL = dict(num_masks=128, rule_search=dict(restarts=2, proposals=16, max_iters=2))


METRICS = {
    "loss": "held-out loss (1/K) Σ_k ‖f^(x_k) − f(x_k)‖², mean over the held-out jobs; iid: "
    "also the mean over held-out random patterns; worst: the largest over the patterns of "
    "exactly S stragglers searched (exact when exhaustive, else a lower bound)",
    "ci95": "iid only: 95% half-width of the mean over held-out patterns",
    "ratio": "summary: tuned loss / grid-CV loss on held-out data (< 1: tuning helped)",
    "ratio_ci95": "paired 95% half-width of that ratio over the held-out patterns (iid only)",
}


def toy_config() -> bool:
    """True when ``GCC_JAX_TOY=1`` (tests and notebooks run at toy sizes)."""
    return os.environ.get("GCC_JAX_TOY") == "1"


def _lenet_worker(toy: bool, progress: bool) -> tuple[Callable, np.ndarray, np.ndarray, float]:
    """LeNet-5 on digits (cached): the worker function, train and test images, test accuracy."""
    from ..nn.data import load_digits
    from ..nn.training import train_classifier

    ds = load_digits()
    tm = train_classifier("lenet5", ds, epochs=2 if toy else 10, progress=progress)
    return tm.worker_fn(), ds.x_train, ds.x_test, float(tm.test_accuracy)


def _inputs(name: str, w: Workload, key, toy: bool, progress: bool):
    """``(f, x_train, x_test, info)``: jobs of shape ``(B, K, ...)`` in float64."""
    k_train, k_test = jax.random.split(key)
    if name in ("xsinx", "vector_map"):
        f, dim, half = (xsinx, 1, 3.0) if name == "xsinx" else (vector_map, 2, 1.0)
        shape = (w.num_inputs, dim)
        x_train = jax.random.uniform(k_train, (w.train_jobs, *shape), minval=-half, maxval=half)
        x_test = jax.random.uniform(k_test, (w.test_jobs, *shape), minval=-half, maxval=half)
        return f, x_train, x_test, {}
    f, img_train, img_test, acc = _lenet_worker(toy, progress)
    k = w.num_inputs
    for split, imgs, jobs in (("train", img_train, w.train_jobs), ("test", img_test, w.test_jobs)):
        if jobs * k > imgs.shape[0]:
            raise ValueError(
                f"lenet5: {jobs} {split} jobs of K={k} need {jobs * k} images; the digits "
                f"{split} split has {imgs.shape[0]}"
            )
    pick_train = np.asarray(jax.random.permutation(k_train, img_train.shape[0]))
    pick_test = np.asarray(jax.random.permutation(k_test, img_test.shape[0]))
    x_train = img_train[pick_train[: w.train_jobs * k]].reshape(w.train_jobs, k, 8, 8, 1)
    x_test = img_test[pick_test[: w.test_jobs * k]].reshape(w.test_jobs, k, 8, 8, 1)
    info = dict(model="lenet5", dataset="digits", test_accuracy=acc)
    return f, jnp.asarray(x_train, jnp.float64), jnp.asarray(x_test, jnp.float64), info


#: the per-pattern rules: λ_dec on a log grid (GCV: 4 points per decade; CV, five refits per
#: point: 2 per decade) from 1e-12 to 1, without golden-section refinement — so the smoother
#: matrices of a pattern are shared by all jobs (one object each: one compilation per shape)
GCV_GRID = np.logspace(-12, 0, 49)
CV_GRID = np.logspace(-12, 0, 25)
RULES: dict[str, Callable] = {
    "GCV": functools.partial(gcv_lam_dec, grid=GCV_GRID, refine=0),
    "CV": functools.partial(cv_lam_dec, grid=CV_GRID, refine=0, folds=5),
}
#: toy sizes: one point per decade (GCV) and per two decades (CV)
TOY_GCV_GRID = np.logspace(-12, 0, 13)
TOY_CV_GRID = np.logspace(-12, 0, 7)
TOY_RULES: dict[str, Callable] = {
    "GCV": functools.partial(gcv_lam_dec, grid=TOY_GCV_GRID, refine=0),
    "CV": functools.partial(cv_lam_dec, grid=TOY_CV_GRID, refine=0, folds=5),
}


class _Plan(NamedTuple):
    """The sizes and settings of a full or a toy run."""

    toy: bool
    sizes: dict  # workload name → Workload
    tune: dict  # tuning settings (FULL_TUNE / TOY_TUNE, ``steps`` overridden)
    evaluation: dict  # FULL_EVAL / TOY_EVAL
    grid: dict  # grid-CV grids (FULL_GRID / TOY_GRID)
    rules: dict  # the per-pattern λ rules (RULES / TOY_RULES)
    gcv_grid: np.ndarray
    cv_grid: np.ndarray
    adversarial: int  # adversarial patterns per tuning step


class _Job(NamedTuple):
    """One workload's worker function, training and held-out jobs and default code."""

    name: str
    sizes: Workload
    f: Callable
    x_train: Array  # (B_train, K, ...): the only inputs tuning sees
    x_test: Array  # (B_test, K, ...): every evaluation's inputs
    code0: SplineCode


class _Stage(NamedTuple):
    """One regime of one workload: its straggler model and keys."""

    regime: str
    model: StragglerModel
    k_grid: Array
    k_tune: Array
    k_test: Array  # every held-out evaluation of the regime uses it


def _check(workloads, regimes, steps) -> None:
    """``ValueError`` for an unknown workload or regime or a negative ``steps``."""
    if steps is not None and steps < 0:
        raise ValueError(f"`steps` must be >= 0; got {steps}")
    for name in workloads:
        as_choice(name, "workloads", WORKLOADS)
    for regime in regimes:
        as_choice(regime, "regimes", REGIMES)


def _plan(toy: bool, steps: int | None) -> _Plan:
    """The settings of a toy or a full run; ``steps`` (when given) caps the tuning steps."""
    tcfg = dict(TOY_TUNE if toy else FULL_TUNE)
    if steps is not None:
        tcfg["steps"] = int(steps)
    return _Plan(
        toy=toy,
        sizes=TOY if toy else FULL,
        tune=tcfg,
        evaluation=TOY_EVAL if toy else FULL_EVAL,
        grid=TOY_GRID if toy else FULL_GRID,
        rules=TOY_RULES if toy else RULES,
        gcv_grid=TOY_GCV_GRID if toy else GCV_GRID,
        cv_grid=TOY_CV_GRID if toy else CV_GRID,
        adversarial=2 if toy else 8,
    )


def _stage(job: _Job, k_w: Array, ri: int, regime: str) -> _Stage:
    """Regime ``ri`` of a workload: its straggler model and its grid, tuning and test keys."""
    w = job.sizes
    model = StragglerModel.worst(w.stragglers) if regime == "worst" else StragglerModel.iid(w.p)
    k_r = jax.random.fold_in(jax.random.fold_in(k_w, 100), ri)
    return _Stage(regime, model, *jax.random.split(k_r, 3))


def _timed(fn: Callable, code, job: _Job, x: Array, key: Array, st: _Stage, /, **options):
    """``fn(code, job.f, x, key=key, straggler_model=st.model, **options)`` and its wall time
    in seconds; the stage's compilations free their temporaries after it."""
    t0 = time.perf_counter()
    out = fn(code, job.f, x, key=key, straggler_model=st.model, **options)
    release_memory()
    return out, time.perf_counter() - t0


def _tuned(plan: _Plan, job: _Job, st: _Stage, start, trainable: tuple, progress: bool):
    """:func:`gcc_jax.tuning.tune` from ``start`` on the training jobs: the code and its
    record (seconds, steps, validation curve, nodes)."""
    w = job.sizes
    # iid steps draw as many patterns as a worst-case step decodes (blocks, random, searched
    # pool), so both regimes of a workload share one compiled step
    n_masks = plan.tune["num_masks"]
    if st.regime == "iid":
        n_masks += w.num_workers - w.stragglers + 1 + plan.adversarial
    res, seconds = _timed(
        tune,
        start,
        job,
        job.x_train,
        st.k_tune,
        st,
        **plan.tune | dict(num_masks=n_masks),
        trainable=trainable,
        jobs_per_step=w.jobs_per_step,
        adversarial=plan.adversarial,
        progress=progress,
    )
    return res.code, dict(
        seconds=seconds,
        best_step=res.best_step,
        steps_run=int(res.history.train_loss.size),
        initial_val_loss=res.initial_val_loss,
        best_val_loss=res.best_val_loss,
        stopped_early=res.stopped_early,
        val_step=res.history.val_step.tolist(),
        val_loss=res.history.val_loss.tolist(),
        alpha=np.asarray(res.code.alpha).tolist(),
        beta=np.asarray(res.code.beta).tolist(),
    )


def _train_codes(plan: _Plan, job: _Job, st: _Stage, progress: bool) -> tuple[dict, dict]:
    """The default, grid-CV and tuned codes of one regime, tuned on the training jobs only, and
    each one's record."""
    codes, meta = {"default": job.code0}, {"default": dict(seconds=0.0)}
    grid, seconds = _timed(
        grid_search,
        job.code0,
        job,
        job.x_train,
        st.k_grid,
        st,
        progress=progress,
        num_masks=plan.tune["val_masks"],
        **plan.grid,
    )
    codes["grid-CV"] = grid.code
    meta["grid-CV"] = dict(seconds=seconds, train_loss=grid.loss)
    for method, trainable in (
        ("tuned λ", ("lam_enc", "lam_dec")),
        ("tuned λ+nodes", ("lam_enc", "lam_dec", "alpha", "beta")),
    ):
        codes[method], meta[method] = _tuned(plan, job, st, grid.code, trainable, progress)
    return codes, meta


def _evaluate_codes(plan: _Plan, job: _Job, st: _Stage, codes: dict) -> tuple[dict, list]:
    """Every code on the held-out jobs and patterns: ``method → (evaluation, seconds)``, and
    the worst patterns found (worst case)."""
    results, found = {}, []
    for method, code in codes.items():
        ev, seconds = _timed(
            evaluate, code, job, job.x_test, st.k_test, st, num_masks=plan.evaluation["num_masks"]
        )
        results[method] = (ev, seconds)
        if ev.worst_mask is not None:
            found.append(ev.worst_mask)
    if found:  # worst case: every code also meets the worst patterns found for the others
        candidates = np.unique(np.stack(found), axis=0)
        for method, code in codes.items():
            results[method] = _cross_check(job, st, code, results[method], candidates)
    return results, found


def _cross_check(job: _Job, st: _Stage, code, result: tuple, candidates: np.ndarray) -> tuple:
    """A code's worst-case evaluation raised to its loss on the other codes' worst patterns."""
    ev, seconds = result
    cross, more = _timed(
        evaluate,
        code,
        job,
        job.x_test,
        st.k_test,
        st,
        search=dict(max_iters=0, restarts=1),
        candidates=candidates,
    )
    if cross.loss > ev.loss:
        ev = ev._replace(loss=cross.loss, worst_mask=cross.worst_mask)
    return ev, seconds + more


def _evaluate_rules(
    plan: _Plan, job: _Job, st: _Stage, found: list, codes: dict, meta: dict, results: dict
) -> None:
    """The per-pattern λ rules (GCV, CV) on the default code, held out; ``codes``, ``meta``
    and ``results`` gain one entry per rule."""
    for method, select in plan.rules.items():
        ev, seconds = _timed(
            evaluate,
            job.code0,
            job,
            job.x_test,
            st.k_test,
            st,
            num_masks=plan.evaluation["num_masks"],
            select_lam_dec=select,
            search=plan.evaluation["rule_search"],
            candidates=np.unique(np.stack(found), axis=0) if found else None,
        )
        results[method] = (ev, seconds)
        codes[method] = job.code0
        meta[method] = dict(seconds=0.0, lam_dec_rule=method)


def _stage_rows(
    plan: _Plan, job: _Job, st: _Stage, codes: dict, meta: dict, results: dict, progress: bool
) -> list[dict]:
    """One row per method (:data:`METHODS` order), with its paired ratio to grid-CV."""
    rows = []
    grid_losses = results["grid-CV"][0].losses
    for method in METHODS:
        ev, seconds = results[method]
        code = codes[method]
        if ev.losses is not None and grid_losses is not None:
            # paired: the same held-out jobs and patterns for every method
            ratio, half = ratio_ci(ev.losses, grid_losses)
            meta[method] = meta[method] | dict(vs_grid=ratio, vs_grid_ci95=half)
        rows.append(
            dict(
                workload=job.name,
                regime=st.regime,
                method=method,
                stragglers=st.model.describe(),
                loss=ev.loss,
                ci95=ev.ci95,
                failed=ev.failed,
                patterns=ev.num_patterns,
                exhaustive=bool(ev.exhaustive),
                lam_enc=float(code.lam_enc),
                lam_dec=None if method in plan.rules else float(code.lam_dec),
                eval_seconds=seconds,
            )
            | meta[method]
        )
        if progress:
            print(
                f"{job.name:>10} {st.regime:>5} {method:>14}: held-out loss {ev.loss:.4e}",
                file=sys.stderr,
                flush=True,
            )
    return rows


def _job(plan: _Plan, name: str, k_w: Array, progress: bool) -> tuple[_Job, dict]:
    """Workload ``name``'s inputs and default code, and its record for the config."""
    w = plan.sizes[name]
    f, x_train, x_test, info = _inputs(name, w, k_w, plan.toy, progress)
    code0 = SplineCode.chebyshev(num_inputs=w.num_inputs, num_workers=w.num_workers)
    return _Job(name, w, f, x_train, x_test, code0), dataclasses.asdict(w) | info


def _config_record(plan: _Plan, infos: dict, regimes, interrupted: bool) -> dict:
    """The ``config`` block of the JSON record."""
    gcfg, ecfg = plan.grid, plan.evaluation
    return dict(
        interrupted=interrupted,
        toy=plan.toy,
        workloads=infos,
        regimes=list(regimes),
        methods=list(METHODS),
        tune=plan.tune,
        evaluation=dict(num_masks=ecfg["num_masks"], rule_search=ecfg["rule_search"]),
        grid_cv=dict(
            lam_enc=None if gcfg["lam_enc_grid"] is None else list(gcfg["lam_enc_grid"]),
            lam_dec=None if gcfg["lam_dec_grid"] is None else list(gcfg["lam_dec_grid"]),
        ),
        gcv_grid=[float(plan.gcv_grid[0]), float(plan.gcv_grid[-1]), len(plan.gcv_grid)],
        cv_grid=[float(plan.cv_grid[0]), float(plan.cv_grid[-1]), len(plan.cv_grid)],
        dtype=str(jnp.zeros(()).dtype),
    )


def run_tune(
    *,
    workloads: Sequence[str] = WORKLOADS,
    regimes: Sequence[str] = REGIMES,
    toy: bool | None = None,
    steps: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Compare the six methods of the module docstring on held-out jobs and patterns.

    Args:
        workloads: names from :data:`WORKLOADS`.
        regimes: ``"worst"`` and/or ``"iid"``.
        toy: tiny sizes (seconds); default: ``GCC_JAX_TOY=1``.
        steps: maximum tuning steps (default 500; 8 at toy sizes).
        seed: seeds the inputs, the patterns and the searches.
        progress: progress bars and one line per method.

    Returns:
        An :class:`ExperimentResult`; its ``results`` hold ``rows`` (one per workload, regime
        and method, with the held-out loss, the chosen λs and the seconds spent) and
        ``summary`` (the tuned codes' held-out loss relative to grid-CV).
    """
    t_start = time.perf_counter()
    toy = toy_config() if toy is None else bool(toy)
    _check(workloads, regimes, steps)
    warn_float32(
        "run_tune in float32: smoothing with λ > 0 is inaccurate on clustered nodes; enable "
        'x64 (jax.config.update("jax_enable_x64", True))',
        Float32PrecisionWarning,
    )
    plan = _plan(toy, steps)
    key = jax.random.key(seed)
    rows, infos = [], {}
    with StopOnInterrupt() as stop:
        for wi, name in enumerate(workloads):
            k_w = jax.random.fold_in(key, wi)
            job, infos[name] = _job(plan, name, k_w, progress)
            for ri, regime in enumerate(regimes):
                st = _stage(job, k_w, ri, regime)
                # Tuning sees x_train only; every evaluation below uses x_test and k_test.
                codes, meta = _train_codes(plan, job, st, progress)
                results, found = _evaluate_codes(plan, job, st, codes)
                _evaluate_rules(plan, job, st, found, codes, meta, results)
                rows += _stage_rows(plan, job, st, codes, meta, results, progress)
            if wi + 1 < len(workloads):
                # the next workload's f compiles anew: free this one's executables (peak
                # memory); the last one's stay cached for a later run of the same shapes
                jax.clear_caches()
            release_memory()
    config = _config_record(plan, infos, regimes, stop.interrupted)
    payload = dict(rows=rows)
    payload["summary"] = _summary(config | payload)
    return stop.finish(
        ExperimentResult.of_run("tune", config, seed, METRICS, payload, t_start=t_start)
    )


run = run_tune


def _view(result: ExperimentResult) -> dict:
    """Configuration and results in one dict (what the report functions read)."""
    return {**result.config, **result.results}


def _find(result: dict, workload: str, regime: str, method: str) -> dict | None:
    for r in result["rows"]:
        if (r["workload"], r["regime"], r["method"]) == (workload, regime, method):
            return r
    return None


def _loss(result: dict, workload: str, regime: str, method: str) -> float:
    row = _find(result, workload, regime, method)
    return float("nan") if row is None else row["loss"]


def _summary(result: dict) -> list[dict]:
    """Held-out loss of each tuned code relative to grid-CV (ratio < 1: tuned is better)."""
    out = []
    for name in result["workloads"]:
        for regime in result["regimes"]:
            grid = _loss(result, name, regime, "grid-CV")
            for method in ("tuned λ", "tuned λ+nodes"):
                tuned = _loss(result, name, regime, method)
                row = _find(result, name, regime, method) or {}
                out.append(
                    dict(
                        workload=name,
                        regime=regime,
                        method=method,
                        grid_cv=grid,
                        tuned=tuned,
                        ratio=tuned / grid,
                        ratio_ci95=row.get("vs_grid_ci95"),
                        improvement_pct=100.0 * (1.0 - tuned / grid),
                        not_worse=bool(tuned <= grid),
                    )
                )
    return out


def format_tune_table(result: ExperimentResult) -> str:
    """The table of held-out losses (rows: workload and regime; columns: methods)."""
    result = _view(result)
    width = 13
    head = f"{'workload':>10} {'stragglers':>11} " + " ".join(f"{m:>{width}}" for m in METHODS)
    lines = [
        "Held-out loss (1/K) Σ‖f^ − f‖², mean over held-out jobs "
        f"({'toy sizes' if result['toy'] else 'full sizes'}, {result['dtype']})",
        head,
    ]
    if result.get("interrupted"):
        lines.insert(1, "INTERRUPTED (Ctrl-C): only the workloads and regimes finished are below.")
    for name in result["workloads"]:
        for regime in result["regimes"]:
            row = [r for r in result["rows"] if r["workload"] == name and r["regime"] == regime]
            label = row[0]["stragglers"] if row else regime
            vals = " ".join(f"{_loss(result, name, regime, m):>{width}.4e}" for m in METHODS)
            lines.append(f"{name:>10} {label:>11} {vals}")
    lines.append("\ntuned vs grid-CV on held-out data (ratio < 1: tuned better)")
    for s in result["summary"]:
        verdict = "better" if s["ratio"] < 1 else ("equal" if s["ratio"] == 1 else "WORSE")
        ci = s.get("ratio_ci95")
        ci = f" ± {ci:.4f}" if ci is not None and s["ratio"] != 1 else ""
        lines.append(
            f"  {s['workload']:>10} {s['regime']:>5} {s['method']:>14}: ratio {s['ratio']:.4f}"
            f"{ci} ({s['improvement_pct']:+.1f}% lower loss, {verdict})"
        )
    lines.append(
        "(± : paired 95% interval over the held-out patterns, iid only; worst-case losses are "
        "the largest found by the search, a lower bound unless exhaustive)"
    )
    return "\n".join(lines)


report = format_tune_table


def plot_tune(result: ExperimentResult):
    """Held-out loss per method (log scale), one panel per workload and regime.

    Points are the held-out losses, with 95% intervals for the random regime; the dashed
    horizontal line repeats grid-CV's loss (the papers' procedure), so a point below it beat
    grid-CV. Methods whose loss cannot be drawn on a log axis (zero or failed) are named in the
    panel instead of silently left out.
    """
    result = _view(result)
    names = list(result["workloads"])
    regimes = result["regimes"]
    fig, axes = new_figure(
        len(names), len(regimes), figsize=(5.8 * len(regimes), 3.9 * len(names)), squeeze=False
    )
    for i, name in enumerate(names):
        for j, regime in enumerate(regimes):
            ax = axes[i, j]
            rows = {
                r["method"]: r
                for r in result["rows"]
                if r["workload"] == name and r["regime"] == regime
            }
            missing = []
            for x, method in enumerate(METHODS):
                r = rows.get(method)
                if r is None or r["loss"] is None or not np.isfinite(r["loss"]) or r["loss"] <= 0:
                    missing.append(method)
                    continue
                if r["ci95"]:
                    log_errorbar(
                        ax, [x], [r["loss"]], [r["ci95"]], method, fmt="o", ms=7, color=f"C{x}"
                    )
                else:  # the worst case is one number (the largest loss found), no interval
                    ax.plot([x], [r["loss"]], "o", ms=7, color=f"C{x}", label=method)
            ax.set_yscale("log")
            ax.set_xticks(np.arange(len(METHODS)), METHODS, rotation=30, ha="right", fontsize=8)
            ax.set_xlim(-0.5, len(METHODS) - 0.5)
            label = next(iter(rows.values()))["stragglers"] if rows else regime
            if regime == "worst" and rows:
                exact = all(r.get("exhaustive") for r in rows.values())
                label += " (all patterns)" if exact else " (worst found: lower bounds)"
            ax.set_title(f"{name}: {label}", fontsize=10)
            ax.set_ylabel("held-out loss (1/K) Σ‖f̂ − f‖²")
            ax.grid(True, axis="y", which="major", alpha=0.3)
            grid = _loss(result, name, regime, "grid-CV")
            if np.isfinite(grid):
                ax.axhline(grid, color="0.3", lw=0.8, ls="--", label="grid-CV level (reference)")
            if missing:
                ax.text(
                    0.01,
                    0.02,
                    "not drawn (zero/failed): " + ", ".join(missing),
                    transform=ax.transAxes,
                    fontsize=7,
                )
            log_ticks(ax)
            legend_outside(ax, fontsize=7)
    fig.suptitle("Held-out loss of GCC per way of choosing its λs (and nodes); lower is better")
    fig.tight_layout()
    return fig


save = save_tune = save_report(format_tune_table, plot_tune)
"""Write ``tune.json``, ``tune.txt`` and ``tune.png`` into the folder ``out``."""
