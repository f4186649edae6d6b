"""Coded inference of a neural network (LeTCC §5): GCC versus BACC versus uncoded, by S.

Protocol (LeTCC §5):

* **Worker function.** ``f(x) = softmax(apply(params, x))``: a classifier trained by
  :func:`gcc_jax.nn.training.train_classifier` (or loaded from its cache); the worker output is the
  softmax vector (``m`` = number of classes). With ``dataset="localization"`` the run is a
  regression: ``f(x) = g(x)``, the 4 box coordinates ``(x₀, y₀, x₁, y₁)/40`` that the small CNN
  localizer of :mod:`gcc_jax.experiments._localizer` predicts for a digit pasted on a 40×40
  canvas (images made offline; trained with the box MSE, seeded and cached: the model of the
  ``localization`` workload of ``gcc-jax regimes`` when the settings agree). Its model is that
  CNN (``model`` ``None`` or ``"cnn"``; ``data_path`` and ``model_kwargs`` are refused).
* **Batches** (:func:`gcc_jax.experiments.split_images`). Each batch of ``K`` images is one
  coded computation over ``N`` workers. The *evaluation* batches are the first
  ``num_batches·K`` images of the test split shuffled with the seed
  (``np.random.default_rng((seed, 0xD1A)).permutation``). The *cross-validation* batches
  (GCC's λ, and ``GCC-tuned``'s gradient steps) never see a test image: they are the first
  ``num_cv_batches·K`` of the model's held-out validation images — training-split images it was
  not trained on (:meth:`gcc_jax.nn.training.TrainedModel.validation_indices`) — shuffled with
  ``np.random.default_rng((seed, 0xC5)).permutation`` (all training images if the model was
  trained without a validation split; for the localizer, the training-split images held out
  from its training).
* **Straggler sets.** For every ``S`` and every batch, ``num_trials`` patterns with exactly ``S``
  dead workers, uniformly at random: with ``(k_cv, k_eval, k_worst) = split(key(seed), 3)``,
  batch ``b``'s patterns are ``sample_masks(fold_in(fold_in(k_eval, S), b), N,
  num=num_trials, stragglers=S)``, so adding an ``S`` value or a
  code changes no other pattern. GCC, BACC and replication (all on ``N`` workers) see the same
  patterns; uncoded runs on ``K`` of the ``N`` machines (worker ``k`` computes ``f(x_k)``) and
  reads its stragglers from the first ``K`` entries of the same pattern, so it loses on average
  ``S·K/N`` results. A missing result is the code's fill rule's estimate (``fill``, default
  ``"mean"``: the mean of the batch's results, :class:`gcc_jax.UncodedCode`): it enters the
  errors as ``‖fill − f(x_k)‖`` and counts as a wrong prediction in a classifier's accuracies.
* **GCC's λ** (as the papers choose it). ``GCC``: ``(λ_enc, λ_dec)`` for each ``S`` is the
  point of ``lam_enc_grid × lam_dec_grid`` (default ``λ_enc ∈ {0, 10⁻¹⁰, …, 10⁻²}``,
  ``λ_dec ∈ {0, 10⁻¹⁰, …, 10⁰}``: from interpolation to the straight-line fit) with the lowest
  mean loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` on the ``num_cv_batches`` (default 5) CV batches,
  over ``num_trials`` random patterns of their own (:func:`gcc_jax.tuning.grid_search`, seeded
  by ``fold_in(k_cv, S)``); the whole CV surface is saved (``cv``, ``cv.png``). Beside it,
  ``GCC-interp`` (``λ_enc = λ_dec = 0``, so each table shows what λ > 0 changes) and, on
  request, ``GCC-tuned`` (:func:`gcc_jax.tuning.tune` on the CV batches from the CV choice,
  ``tune_steps`` Adam steps on ``log λ``, held-out early stopping).
* **Worst case.** Where affordable (``worst_case=True``), :func:`gcc_jax.worst_case_mask` finds,
  for each code, ``S`` and each of the first ``worst_case_batches`` evaluation batches, the
  pattern of ``S`` stragglers with the largest MSE (exhaustive when ``C(N, S)`` is small, else a
  local search whose loss is a lower bound); the metrics at that pattern are reported. Uncoded's
  adversary kills ``min(S, K)`` of its ``K`` workers.

Metrics (``gcc.mse``, ``gcc.mean_l2_error``, ``gcc.rel_acc``), per
trial (one batch and one pattern) with ``ŷ_k`` the decoded estimate of ``f(x_k)``:

* ``mse`` = ``(1/K) Σ_k ‖f(x_k) − ŷ_k‖₂²`` (the papers' loss), ``rmse`` = √(mean MSE),
  ``mean_l2`` = ``(1/K) Σ_k ‖f(x_k) − ŷ_k‖₂`` (the mean L2 error; LeTCC calls it RMSE);
* a classifier's ``accuracy`` = fraction of ``argmax ŷ_k`` equal to the true label (missing =
  wrong); ``rel_acc_labels`` = decoded accuracy / base-model accuracy on the same images
  (pooled over trials); ``rel_acc_base`` = agreement of ``argmax ŷ_k`` with the base model's
  ``argmax f(x_k)``. A regression run (localization) reports the first three only
  (:data:`ERROR_METRICS`): its rows, worst cases, comparisons, summary and plot have no
  accuracy.

Every value comes with a 95% confidence half-width (``ci95``) from :func:`gcc_jax.mean_ci` /
:func:`gcc_jax.ratio_ci`, treating batches as clusters of trials (Student t, ``batches − 1``
degrees of freedom).

``run_dnn`` returns an :class:`~gcc_jax.experiments.ExperimentResult`, written by
:func:`save_dnn` as ``results.json`` in the common schema of :mod:`gcc_jax.experiments._io`
(``config`` = the run's settings, ``seeds`` = ``{"seed"}``, NaN written as ``null``), with::

    "config": {dataset, model, task: "classification" | "regression", interrupted, order,
               num_workers, num_inputs, stragglers: [S...], num_trials, num_batches,
               num_cv_batches, codes: [...], fill, lam_enc_grid, lam_dec_grid, worst_case,
               worst_case_batches, search: {...}, training: {...}, dtype},
    "results": {
      "model": {name, dataset, test_accuracy, val_accuracy, epochs, seed, num_params,
                params_fingerprint, from_cache, train_time_s},
                # pinned: seeded, cached by its hyper-parameters; params_fingerprint =
                # gcc_jax.nn.training.tree_fingerprint(params): equal on a rerun that retrains
                # localization: {name, dataset, test_mse, mean_iou, num_test, epochs,
                #   batch_size, lr, seed, num_train, num_held_out, num_params,
                #   params_fingerprint, from_cache, train_time_s}  (box MSE and IoU on the test
                #   split)
      "base": {accuracy, num_images},          # base model on the evaluation images
                # localization: {mse, mean_iou, num_images}: (1/n) Σ ‖g(x) − box‖₂², IoU
      "images": {"cv_split": "train", "cv_pool": "validation" | "train",
                 "cv": [[i...]...],            # training-split indices per CV batch
                 "eval_split": "test", "eval": [[i...]...]},   # test-split indices per batch
      "results": {CODE: [{"S": S,
                          "mse" | "rmse" | "mean_l2" | "accuracy" | "rel_acc_labels" |
                          "rel_acc_base":                  # the last three: classifiers
                              {"mean": float, "ci95": float},
                          "num_trials": int, "num_failed": int,
                          "lam_enc": float, "lam_dec": float,       # GCC rows only
                          "worst_case": null | {"mse", "rmse", "mean_l2", "accuracy",
                                                "rel_acc_labels",
                                                "rel_acc_base": {"mean", "ci95"},
                                                "exhaustive": bool, "num_evaluated": int}},
                         ...one row per S]},
      "gcc_vs_bacc": [{"S", "mean_l2_ratio": {"mean", "ci95"}, "mean_l2_gain_percent"}],
      "comparisons": [{"baseline": CODE, "S", "mse_ratio" | "mean_l2_ratio":    # GCC / CODE
                           {"mean", "ci95"},
                       "accuracy_diff_points": {"mean", "ci95"},    # GCC − CODE; classifiers
                       "worst_case_mse" | "worst_case_mean_l2": null | {"gcc", "baseline"}}],
      "summary": [str],                          # GCC vs every baseline in plain words
      "regime_map": str,                         # where to look for other N/K and fractions
      "tuning": [{"S", "lam_enc", "lam_dec", "best_step", "steps_run", "initial_val_loss",
                  "best_val_loss"}],             # GCC-tuned only
      "cv": {"stragglers": [S...], "lam_enc_grid", "lam_dec_grid",
             "mse": [[[...]]]}                  # [S][enc][dec] mean held-out loss
    },
    "timing_s": {training, cross_validation, evaluation, worst_case, total}

``CODE`` is one of :data:`CODES`.
"""

import functools
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from .._core.checks import check_inputs
from .._core.precision import Float32PrecisionWarning
from .._core.scalars import as_choice, as_int, as_real
from .._core.status import describe_status
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ..codes import AbstractCode, BerrutCode, ReplicationCode, SplineCode, UncodedCode, check_code
from ..evaluation import (
    MaskEvaluator,
    apply_workers,
    mean_ci,
    mean_l2_error,
    mse,
    ratio_ci,
    sample_masks,
    worst_case_mask,
)
from ..nn.data import Dataset, Localization, load_dataset
from ..nn.models import count_params
from ..nn.training import TrainedModel, train_classifier, tree_fingerprint
from ..tuning import StragglerModel, grid_search, tune
from ._command import Batches, StopOnInterrupt, check_batches
from ._commands.dnn import (
    CODES,
    DEFAULT_CODES,
    DEFAULT_LAM_DEC_GRID,
    DEFAULT_LAM_ENC_GRID,
    LOCALIZATION,
    RUN_SEARCH,
    is_localization,
    localization_conflict,
    toy_config,
)
from ._commands.regimes import FILLS, ORDERS
from ._images import ImageSplit, ordered, split_images
from ._io import ExperimentResult, json_clean, new_figure, save_result, warn_float32
from ._localizer import MODEL as LOCALIZER_MODEL
from ._localizer import Localizer, LocalizerSettings, box_metrics, train_localizer
from ._plots import (
    CODE_COLORS,
    bounded_errorbar,
    integer_ticks,
    legend_outside,
    log_errorbar,
    positive,
)
from ._summary import difference_verdict, format_bounded, ratio_verdict

__all__ = [
    "CODES",
    "DEFAULT_LAM_DEC_GRID",
    "DEFAULT_LAM_ENC_GRID",
    "ERROR_METRICS",
    "METRICS",
    "PatternMetrics",
    "evaluate_patterns",
    "format_dnn_table",
    "pattern_metrics",
    "plot_dnn",
    "report",
    "run",
    "run_dnn",
    "save",
    "save_dnn",
    "toy_config",
]

ERROR_METRICS = ("mse", "rmse", "mean_l2")
"""Metric keys of every result row: the errors of the decoded outputs (all a regression run
reports)."""
METRICS = (*ERROR_METRICS, "accuracy", "rel_acc_labels", "rel_acc_base")
"""Metric keys of a classifier's result rows."""


class PatternMetrics(NamedTuple):
    """Per-pattern metrics of one coded batch (NumPy arrays of shape ``(p,)``).

    Attributes:
        mean_l2: ``(1/K) Σ_k ‖ŷ_k − f(x_k)‖₂`` (the mean L2 error; LeTCC's "RMSE").
        mse: ``(1/K) Σ_k ‖ŷ_k − f(x_k)‖₂²``.
        correct: how many ``argmax ŷ_k`` equal the true label (missing/non-finite = wrong).
        agree: how many ``argmax ŷ_k`` equal the base model's ``argmax f(x_k)`` (same rule).
        base_correct: how many ``argmax f(x_k)`` equal the true label (one value per batch).
        status: :class:`gcc_jax.Status` of each decode (0 = valid).
    """

    mean_l2: Float[np.ndarray, " p"]
    mse: Float[np.ndarray, " p"]
    correct: Int[np.ndarray, " p"]
    agree: Int[np.ndarray, " p"]
    base_correct: int
    status: Int[np.ndarray, " p"]


def pattern_metrics(
    code: AbstractCode,
    yt: Float[Array, "n c"],
    targets: tuple[Float[Array, "k c"], Int[Array, " k"]],
    mask: Bool[Array, " n"],
) -> tuple[Array, Array, Array, Array, Array]:
    """Metrics of one straggler pattern: ``(mean_l2, mse, correct, agree, status)``.

    The ``per_mask`` function of :class:`gcc_jax.MaskEvaluator` for classifiers: ``targets`` is
    the pytree ``(f(x), labels)``. ``mean_l2``/``mse`` as :func:`gcc_jax.mean_l2_error` /
    :func:`gcc_jax.mse` of the decoded estimates against ``f(x)``; ``correct``/``agree``
    count the inputs whose ``argmax`` estimate equals the label / the base model's
    ``argmax f(x_k)``, a missing (``code.available(mask)`` False) or non-finite estimate
    counting as wrong.
    """
    fx, labels = targets
    dec = code.decode_with_status(yt, mask)
    base = jnp.argmax(fx, axis=-1)
    ok = code.available(mask) & jnp.all(jnp.isfinite(dec.value), axis=-1)
    pred = jnp.argmax(dec.value, axis=-1)
    return (
        mean_l2_error(dec.value, fx),
        mse(dec.value, fx),
        jnp.sum((pred == labels.astype(base.dtype)) & ok),
        jnp.sum((pred == base) & ok),
        dec.status,
    )


def _error_metrics(
    code: AbstractCode, yt: Float[Array, "n m"], fx: Float[Array, "k m"], mask: Bool[Array, " n"]
) -> tuple[Array, Array, Array]:
    """Errors of one straggler pattern: ``(mean_l2, mse, status)`` of the decoded estimates
    against ``f(x)`` (:func:`gcc_jax.mean_l2_error`, :func:`gcc_jax.mse`): the ``per_mask``
    function of :class:`gcc_jax.MaskEvaluator` for a regression output."""
    dec = code.decode_with_status(yt, mask)
    return mean_l2_error(dec.value, fx), mse(dec.value, fx), dec.status


@functools.partial(jax.jit, static_argnames="f")
def _targets(f: Callable, x: Array) -> Array:
    """``vmap(f)(x)``: the uncoded outputs ``f(x_k)`` of a batch (one compile per shape)."""
    return jax.vmap(f)(x)


def _metrics(
    code: AbstractCode, yt: Array, fx: Array, labels: Array | None, masks
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-pattern tables of every row of ``masks`` (NumPy) in one evaluator call, and the
    decode statuses: ``mean_l2`` and ``mse``, plus ``correct`` and ``agree``
    (:func:`pattern_metrics`) when ``labels`` are given (a classifier)."""
    num = np.shape(masks)[0]
    if labels is None:
        r, q, st = MaskEvaluator(code, yt, fx, per_mask=_error_metrics, chunk_size=num)(masks)
        return {"mean_l2": r, "mse": q}, st
    ev = MaskEvaluator(code, yt, (fx, labels), per_mask=pattern_metrics, chunk_size=num)
    r, q, cor, agr, st = ev(masks)
    return {"mean_l2": r, "mse": q, "correct": cor, "agree": agr}, st


def evaluate_patterns(
    code: AbstractCode,
    f: Callable[[Array], Array],
    x: Float[ArrayLike, "k *d"],
    labels: Int[ArrayLike, " k"],
    masks: Bool[ArrayLike, "p n"],
) -> PatternMetrics:
    """Metrics of one coded batch for every straggler pattern in ``masks``.

    The workers' outputs come from ``code.worker_outputs(f, x)``, the targets are ``f(x_k)``;
    every pattern is decoded by :class:`gcc_jax.MaskEvaluator` with :func:`pattern_metrics`
    and scored against ``f(x)`` and the true labels with the definitions of
    :func:`gcc_jax.mean_l2_error`, :func:`gcc_jax.mse` and :func:`gcc_jax.rel_acc` (a missing
    estimate — ``code.available(mask)`` False — or a non-finite one is a wrong prediction).

    Args:
        code: any :class:`gcc_jax.AbstractCode`.
        f: worker function, one input of shape ``x.shape[1:]`` → class scores ``(c,)``.
        x: the batch, shape ``(K, ...)``.
        labels: true integer labels ``(K,)``.
        masks: boolean ``(p, N)``; ``True`` = returned in time.

    Returns:
        A :class:`PatternMetrics` of ``(p,)`` arrays. Patterns that cannot be decoded have a
        non-zero ``status`` (and NaN errors).

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.experiments import evaluate_patterns
        >>> code = gcc.UncodedCode(num_inputs=2)
        >>> f = lambda v: jax.nn.softmax(v)
        >>> x = jnp.array([[2.0, 0.0], [0.0, 2.0]])
        >>> pm = evaluate_patterns(code, f, x, jnp.array([0, 1]), jnp.array([[True, False]]))
        >>> pm.correct.tolist(), pm.agree.tolist(), pm.base_correct
        ([1], [1], 2)
    """
    code = check_code(code)
    x = check_inputs(x, code.num_inputs)
    labels = jnp.asarray(labels)
    if labels.shape != (x.shape[0],) or not jnp.issubdtype(labels.dtype, jnp.integer):
        raise ValueError(f"`labels` must be integers of shape ({x.shape[0]},); got {labels.shape}")
    _, yt = apply_workers(code, f, x)
    fx = _targets(f, x)
    t, st = _metrics(code, yt, fx, labels, masks)
    base_correct = int(np.sum(np.argmax(np.asarray(fx), -1) == np.asarray(labels)))
    return PatternMetrics(t["mean_l2"], t["mse"], t["correct"], t["agree"], base_correct, st)


# -- helpers of run_dnn ---------------------------------------------------------------------------


def _canonical_codes(codes: Sequence[str]) -> tuple[str, ...]:
    lookup = {c.lower(): c for c in CODES}
    out = []
    for c in codes:
        key = str(c).lower()
        if key not in lookup:
            raise ValueError(f"unknown code {c!r}; choose from {CODES}")
        if lookup[key] not in out:
            out.append(lookup[key])
    if not out:
        raise ValueError("`codes` is empty")
    return tuple(out)


def _check_grid(name: str, grid) -> tuple[float, ...]:
    """A non-empty grid of smoothing parameters, each finite and ``>= 0``."""
    vals = tuple(as_real(v, name, 0.0) for v in grid)
    if not vals:
        raise ValueError(f"`{name}` must be a non-empty list of finite λ >= 0; got {grid!r}")
    return vals


def _stat(mean: float, ci: float) -> dict:
    return {"mean": float(mean), "ci95": float(ci)}


def _root_ci(m: float, ci: float) -> tuple[float, float]:
    """``√m`` and half the distance between the square roots of the CI's ends ``m ± ci``."""
    if not math.isfinite(ci):
        return math.sqrt(m), ci
    return math.sqrt(m), (math.sqrt(m + ci) - math.sqrt(max(m - ci, 0.0))) / 2


def _summarise(t: dict[str, np.ndarray], base: np.ndarray, k: int) -> dict:
    """Metric dict from ``(B, T)`` per-trial tables ``t`` (:func:`_metrics`'s keys) and the
    per-batch base-correct counts: :data:`ERROR_METRICS`, and the accuracies where ``t`` has
    the counts (a classifier)."""
    m, ci = mean_ci(t["mse"])
    out = {"mse": _stat(m, ci), "rmse": _stat(*_root_ci(m, ci))}
    out["mean_l2"] = _stat(*mean_ci(t["mean_l2"]))
    if "correct" in t:
        cor = t["correct"]
        base_bt = np.broadcast_to(base[:, None].astype(float), cor.shape)
        out["accuracy"] = _stat(*mean_ci(cor / k))
        out["rel_acc_labels"] = _stat(*ratio_ci(cor, base_bt))
        out["rel_acc_base"] = _stat(*mean_ci(t["agree"] / k))
    return out


class _Sizes(NamedTuple):
    """The checked sizes of a run: ``N``, ``K``, the batches of patterns, ``S`` values."""

    n: int
    k: int
    batches: Batches
    s_list: tuple[int, ...]
    codes: tuple[str, ...]
    lam_enc_grid: tuple[float, ...]
    lam_dec_grid: tuple[float, ...]
    fill: str = "mean"  # uncoded's and replication's fill rule for a lost result
    classify: bool = True  # class scores (accuracies reported) or a regression output


class _CrossValidation(NamedTuple):
    """GCC's λ per ``S`` chosen on the held-out batches (and the gradient-tuned codes)."""

    table: np.ndarray  # (len(S), len(λ_enc grid), len(λ_dec grid)) held-out losses
    lams: dict  # (code name, S) -> (λ_enc, λ_dec)
    tuned: dict  # S -> the gradient-tuned SplineCode
    tuning: list  # one record per tuned S


class _RandomPatterns(NamedTuple):
    """Per-pattern metrics over random straggler sets: tables ``(codes, S, batches, trials)``."""

    tab: dict  # "mean_l2", "mse" (and a classifier's "correct", "agree") -> table
    failed: np.ndarray  # (codes, S) patterns that could not be decoded
    base_correct: np.ndarray  # (batches,) correct predictions of the uncoded model (0: regression)


def _check_sizes(
    num_workers, num_inputs, stragglers, num_trials, num_batches, num_cv_batches,
    worst_case_batches, codes, lam_enc_grid, lam_dec_grid,
) -> _Sizes:  # fmt: skip
    n = as_int(num_workers, "num_workers", 2)
    k = as_int(num_inputs, "num_inputs", 2)
    sizes = _Sizes(
        n=n,
        k=k,
        batches=check_batches(
            num_trials, num_batches, num_cv_batches, worst_case_batches, min_cv=0
        ),
        s_list=tuple(int(s) for s in stragglers),
        codes=_canonical_codes(codes),
        lam_enc_grid=_check_grid("lam_enc_grid", lam_enc_grid),
        lam_dec_grid=_check_grid("lam_dec_grid", lam_dec_grid),
    )
    if not sizes.s_list:
        raise ValueError("`stragglers` is empty")
    if n < k:
        raise ValueError(f"`num_workers` (N={n}) must be >= `num_inputs` (K={k})")
    if any(s < 0 or s > n - 2 for s in sizes.s_list):
        raise ValueError(f"every S must be in [0, N-2] = [0, {n - 2}]; got {list(sizes.s_list)}")
    if "GCC" in sizes.codes and sizes.batches.cv < 1:
        raise ValueError("GCC needs `num_cv_batches` >= 1 to choose its λ by cross-validation")
    return sizes


def _spline(sz: _Sizes, lam_enc: float, lam_dec: float) -> SplineCode:
    return SplineCode.chebyshev(num_inputs=sz.k, num_workers=sz.n, lam_enc=lam_enc, lam_dec=lam_dec)


def _make_code(sz: _Sizes, cv: _CrossValidation, name: str, s: int) -> AbstractCode:
    """The code ``name`` at ``S = s`` (GCC with its cross-validated or tuned λ)."""
    if name == "GCC-tuned":
        return cv.tuned[s]
    if name.startswith("GCC"):
        return _spline(sz, *cv.lams[(name, s)])
    if name == "BACC":
        return BerrutCode.chebyshev(num_inputs=sz.k, num_workers=sz.n)
    if name == "uncoded":
        return UncodedCode(num_inputs=sz.k, fill=sz.fill)
    return ReplicationCode(num_inputs=sz.k, num_workers=sz.n, fill=sz.fill)


def _tuning_record(s: int, tr) -> dict:
    return {
        "S": s,
        "lam_enc": float(tr.code.lam_enc),
        "lam_dec": float(tr.code.lam_dec),
        "best_step": tr.best_step,
        "steps_run": int(len(tr.history.train_loss)),
        "initial_val_loss": tr.initial_val_loss,
        "best_val_loss": tr.best_val_loss,
    }


def _cross_validate(
    sz: _Sizes, f: Callable, cv_batches: list, key: Array, tune_steps: int, progress: bool
) -> _CrossValidation:
    """GCC's ``(λ_enc, λ_dec)`` per ``S`` by grid search on the held-out batches
    (:func:`gcc_jax.tuning.grid_search`), then ``GCC-tuned`` by gradient steps from there."""
    gcc_family = [c for c in sz.codes if c.startswith("GCC")]
    table = np.full((len(sz.s_list), len(sz.lam_enc_grid), len(sz.lam_dec_grid)), np.nan)
    cv = _CrossValidation(table, {}, {}, [])
    if not gcc_family:
        return cv
    xs_cv = jnp.stack([x for x, _ in cv_batches])  # (n_cv, K, ...): held-out jobs
    bar = tqdm(
        total=len(sz.s_list), desc="GCC λ cross-validation", disable=not progress, leave=False
    )
    with bar:
        for i, s in enumerate(sz.s_list):
            model_s = StragglerModel.exact(s)
            gr = grid_search(
                _spline(sz, 0.0, 0.0),
                f,
                xs_cv,
                key=jax.random.fold_in(key, s),
                straggler_model=model_s,
                lam_enc_grid=sz.lam_enc_grid,
                lam_dec_grid=sz.lam_dec_grid,
                num_masks=sz.batches.trials,
                progress=False,
            )
            table[i] = gr.losses
            cv.lams[("GCC", s)] = (gr.lam_enc, gr.lam_dec)
            cv.lams[("GCC-interp", s)] = (0.0, 0.0)
            if "GCC-tuned" in sz.codes:
                tr = tune(
                    gr.code,
                    f,
                    xs_cv,
                    key=jax.random.fold_in(key, 10_000 + s),
                    straggler_model=model_s,
                    trainable=("lam_enc", "lam_dec"),
                    steps=tune_steps,
                    progress=False,
                )
                cv.tuned[s] = tr.code
                cv.lams[("GCC-tuned", s)] = (float(tr.code.lam_enc), float(tr.code.lam_dec))
                cv.tuning.append(_tuning_record(s, tr))
            bar.update()
    return cv


def _warn_failed(name: str, s: int, st: np.ndarray) -> None:
    if st.any():
        warnings.warn(
            f"{name}, S={s}: {np.count_nonzero(st)} patterns could not be "
            f"decoded ({describe_status(int(np.bitwise_or.reduce(st)))})",
            stacklevel=3,
        )


def _evaluate_random(
    sz: _Sizes,
    cv: _CrossValidation,
    f: Callable,
    ev_batches: list,
    ev_outputs: list,
    key: Array,
    stop: StopOnInterrupt,
    progress: bool,
) -> _RandomPatterns:
    """Every code on every evaluation batch over ``trials`` random sets of ``S`` stragglers.
    Ctrl-C keeps the batches evaluated in full (``stop``); none finished re-raises."""
    shape = (len(sz.codes), len(sz.s_list), sz.batches.evaluation, sz.batches.trials)
    keys = ("mean_l2", "mse", "correct", "agree") if sz.classify else ("mean_l2", "mse")
    tab = {m: np.zeros(shape) for m in keys}
    failed = np.zeros(shape[:2], int)
    base_correct = np.zeros(sz.batches.evaluation, int)
    bar = tqdm(
        total=sz.batches.evaluation * len(sz.s_list), desc="evaluate codes", disable=not progress,
        leave=False,
    )  # fmt: skip
    done = 0
    with stop, bar:
        for b, (x, y) in enumerate(ev_batches):
            fx = ev_outputs[b]
            labels = y if sz.classify else None
            if sz.classify:
                base_correct[b] = int(np.sum(np.argmax(np.asarray(fx), -1) == np.asarray(y)))
            worker_outputs: dict[tuple[str, float], Array] = {}
            for i, s in enumerate(sz.s_list):
                masks = sample_masks(
                    jax.random.fold_in(jax.random.fold_in(key, s), b),
                    sz.n,
                    num=sz.batches.trials,
                    stragglers=s,
                )
                for c, name in enumerate(sz.codes):
                    code = _make_code(sz, cv, name, s)
                    ck = (name, cv.lams[(name, s)][0] if name.startswith("GCC") else 0.0)
                    if ck not in worker_outputs:
                        worker_outputs[ck] = apply_workers(code, f, x)[1]
                    m = masks[:, : sz.k] if name == "uncoded" else masks
                    t, st = _metrics(code, worker_outputs[ck], fx, labels, m)
                    for key_, v in t.items():
                        tab[key_][c, i, b] = v
                    failed[c, i] += int(np.count_nonzero(st))
                    _warn_failed(name, s, st)
                bar.update()
            done = b + 1
    if stop.interrupted:
        if done == 0:
            raise KeyboardInterrupt  # no batch finished: nothing to save
        tab = {m: v[:, :, :done] for m, v in tab.items()}
        base_correct = base_correct[:done]
    return _RandomPatterns(tab, failed, base_correct)


def _worst_pattern(code, s_eff: int, yt, fx, key: Array, search: dict):
    """The worst pattern of ``s_eff`` stragglers found, whether the search was exhaustive, and
    how many patterns it evaluated."""
    if s_eff == 0:  # one pattern: nothing to search
        return np.ones(code.num_workers, bool), True, 1
    wc = worst_case_mask(code, outputs=(yt, fx), stragglers=s_eff, key=key, search=search)
    return wc.mask, wc.exhaustive, wc.num_evaluated


def _search_worst(
    sz: _Sizes,
    cv: _CrossValidation,
    f: Callable,
    ev_batches: list,
    ev_outputs: list,
    base_correct: np.ndarray,
    key: Array,
    search: dict,
    stop: StopOnInterrupt,
    progress: bool,
) -> dict[tuple[str, int], dict]:
    """The worst pattern per code and ``S`` on the first batches, with its metrics.
    Ctrl-C keeps the ``(code, S)`` searched in full."""
    nb = min(sz.batches.worst_case, len(ev_batches))
    worst: dict[tuple[str, int], dict] = {}
    bar = tqdm(
        total=len(sz.codes) * len(sz.s_list) * nb,
        desc="worst-case search",
        disable=not progress,
        leave=False,
    )
    with stop, bar:
        for name in sz.codes:
            for s in sz.s_list:
                code = _make_code(sz, cv, name, s)
                s_eff = min(s, sz.k) if name == "uncoded" else s
                rows, exhaustive, evaluated = [], True, 0
                for b in range(nb):
                    x, y = ev_batches[b]
                    fx = ev_outputs[b]
                    labels = y if sz.classify else None
                    _, yt = apply_workers(code, f, x)
                    wc_key = jax.random.fold_in(key, 1000 * s + b)
                    wc_mask, wc_exh, wc_num = _worst_pattern(code, s_eff, yt, fx, wc_key, search)
                    # the pattern repeated to the trials' shape: reuses the compiled decode
                    tiled = np.broadcast_to(
                        np.asarray(wc_mask), (sz.batches.trials, code.num_workers)
                    )
                    rows.append(_metrics(code, yt, fx, labels, tiled)[0])
                    exhaustive &= bool(wc_exh)
                    evaluated += int(wc_num)
                    bar.update()
                t = {m: np.stack([row[m][:1] for row in rows]) for m in rows[0]}  # (nb, 1)
                summary = _summarise(t, base_correct[:nb], sz.k)
                summary.update(exhaustive=exhaustive, num_evaluated=evaluated)
                worst[(name, s)] = summary
    return worst


def _code_rows(
    sz: _Sizes, cv: _CrossValidation, ev: _RandomPatterns, worst: dict, n_batches: int
) -> dict[str, list[dict]]:
    """One row per code and ``S``: metrics with CIs, failures, λ (GCC), the worst case."""
    results: dict[str, list[dict]] = {}
    tab = ev.tab
    for c, name in enumerate(sz.codes):
        rows = []
        for i, s in enumerate(sz.s_list):
            row = {"S": s}
            row.update(_summarise({m: v[c, i] for m, v in tab.items()}, ev.base_correct, sz.k))
            row.update(num_trials=n_batches * sz.batches.trials, num_failed=int(ev.failed[c, i]))
            if name.startswith("GCC"):
                row.update(lam_enc=cv.lams[(name, s)][0], lam_dec=cv.lams[(name, s)][1])
            row["worst_case"] = worst.get((name, s))
            rows.append(row)
        results[name] = rows
    return results


def _gcc_vs_bacc(sz: _Sizes, tab: dict) -> list[dict]:
    """GCC's mean L2 error over BACC's per ``S`` (paired ratio of sums, 95% CI)."""
    if "GCC" not in sz.codes or "BACC" not in sz.codes:
        return []
    g, bacc = sz.codes.index("GCC"), sz.codes.index("BACC")
    out = []
    for i, s in enumerate(sz.s_list):
        ratio, ci = ratio_ci(tab["mean_l2"][g, i], tab["mean_l2"][bacc, i])
        out.append(
            {"S": s, "mean_l2_ratio": _stat(ratio, ci), "mean_l2_gain_percent": 100 * (1 - ratio)}
        )
    return out


def _gcc_vs_each(sz: _Sizes, tab: dict, worst: dict) -> list[dict]:
    """GCC against every other code per ``S``: the paired MSE and mean L2 error ratios, a
    classifier's accuracy difference, the worst cases' MSE and mean L2 error."""
    if "GCC" not in sz.codes:
        return []
    g = sz.codes.index("GCC")
    out = []
    for c, other in enumerate(sz.codes):
        if other == "GCC":
            continue
        for i, s in enumerate(sz.s_list):
            row = {"baseline": other, "S": s}
            for m in ("mse", "mean_l2"):
                row[f"{m}_ratio"] = _stat(*ratio_ci(tab[m][g, i], tab[m][c, i]))
            if sz.classify:
                diff, dci = mean_ci((tab["correct"][g, i] - tab["correct"][c, i]) / sz.k)
                row["accuracy_diff_points"] = _stat(100 * diff, 100 * dci)
            wg, wo = worst.get(("GCC", s)), worst.get((other, s))
            for m in ("mse", "mean_l2"):
                row[f"worst_case_{m}"] = (
                    None
                    if wg is None or wo is None
                    else {"gcc": wg[m]["mean"], "baseline": wo[m]["mean"]}
                )
            out.append(row)
    return out


class _Model(NamedTuple):
    """The run's model and its images, classifier or localizer alike."""

    f: Callable  # the worker function
    data: Dataset | Localization  # x_train, y_train, x_test, y_test
    split: ImageSplit  # the CV and evaluation batches' indices
    record: dict  # the result's "model" record
    dataset: str  # the config's names
    name: str
    training: dict  # the settings the model was trained with


def _classifier_record(trained: TrainedModel, epochs: int, seed: int) -> dict:
    params = trained.params
    return {
        "name": trained.model_name,
        "dataset": trained.dataset_name,
        "test_accuracy": trained.test_accuracy,
        "val_accuracy": trained.val_accuracy,
        "epochs": int(trained.config.get("epochs", epochs)),
        "seed": int(seed),
        "num_params": count_params(params),
        "params_fingerprint": tree_fingerprint(params),
        "from_cache": trained.from_cache,
        "train_time_s": trained.train_time_s,
    }


def _load_classifier(
    dataset, model, trained, data_path, training: dict, sz: _Sizes, seed, cache_dir, use_cache,
    progress,
) -> _Model:  # fmt: skip
    """The data set and the classifier (trained, or loaded from the cache, unless given)."""
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, data_path)
    if trained is None:
        trained = train_classifier(
            model, ds, seed=seed, cache_dir=cache_dir, use_cache=use_cache, progress=progress,
            **training,
        )  # fmt: skip
    elif not isinstance(trained, TrainedModel):
        raise ValueError(f"`trained` must be a TrainedModel for {ds.name!r}; got {type(trained)}")
    elif trained.dataset_name != ds.name:
        raise ValueError(f"`trained` was trained on {trained.dataset_name!r}, not on {ds.name!r}")
    split = split_images(
        ds, trained, num_inputs=sz.k, num_batches=sz.batches.evaluation,
        num_cv_batches=sz.batches.cv, seed=seed,
    )  # fmt: skip
    record = _classifier_record(trained, training["epochs"], seed)
    return _Model(
        trained.worker_fn(), ds, split, record, ds.name, trained.model_name, dict(trained.config)
    )


def _load_localizer(trained, training: dict, sz: _Sizes, seed, cache_dir, use_cache, progress):
    """The localizer (:mod:`gcc_jax.experiments._localizer`: trained, or loaded from the cache,
    unless given) and its images."""
    if trained is None:
        settings = LocalizerSettings(
            epochs=training["epochs"], batch_size=training["batch_size"], lr=training["lr"],
            seed=int(seed),
        )  # fmt: skip
        trained = train_localizer(
            settings, cache_dir=cache_dir, use_cache=use_cache, progress=progress
        )
    elif not isinstance(trained, Localizer):
        raise ValueError(f"`trained` must be a Localizer for {LOCALIZATION!r}; got {type(trained)}")
    split = trained.split(
        num_inputs=sz.k, num_batches=sz.batches.evaluation, num_cv_batches=sz.batches.cv,
        seed=seed,
    )  # fmt: skip
    return _Model(
        trained.worker_fn(), trained.data, split, trained.record, LOCALIZATION, LOCALIZER_MODEL,
        trained.settings._asdict(),
    )  # fmt: skip


def _base_record(sz: _Sizes, ev: _RandomPatterns, ev_batches: list, ev_outputs: list) -> dict:
    """The model itself on the evaluation images: a classifier's accuracy, the localizer's box
    MSE and mean IoU (:func:`~gcc_jax.experiments._localizer.box_metrics`)."""
    num = len(ev_batches) * sz.k
    if sz.classify:
        return {"accuracy": float(ev.base_correct.sum() / num), "num_images": num}
    pred = np.concatenate([np.asarray(fx, float) for fx in ev_outputs[: len(ev_batches)]])
    box = np.concatenate([np.asarray(y, float) for _, y in ev_batches])
    m = box_metrics(pred, box)
    return {"mse": m["test_mse"], "mean_iou": m["mean_iou"], "num_images": num}


def _config_record(
    sz: _Sizes, n_batches: int, worst_case: bool, worst: dict, search: dict, net: _Model, dtype
) -> dict:
    """The settings a run used (the JSON record's ``config``)."""
    return {
        "dataset": net.dataset,
        "model": net.name,
        "task": "classification" if sz.classify else "regression",
        "num_workers": sz.n,
        "num_inputs": sz.k,
        "stragglers": list(sz.s_list),
        "num_trials": sz.batches.trials,
        "num_batches": n_batches,
        "num_cv_batches": sz.batches.cv,
        "codes": list(sz.codes),
        "fill": sz.fill,
        "lam_enc_grid": list(sz.lam_enc_grid),
        "lam_dec_grid": list(sz.lam_dec_grid),
        "worst_case": bool(worst_case),
        "worst_case_batches": min(sz.batches.worst_case, n_batches) if worst else 0,
        "search": search,
        "training": net.training,
        "dtype": str(dtype),
    }


def run_dnn(
    *,
    dataset: str | Dataset = "digits",
    model: str | None = None,
    num_workers: int = 40,
    num_inputs: int = 20,
    stragglers: Sequence[int] = (0, 2, 4, 6, 8, 10),
    num_trials: int = 20,
    num_batches: int = 10,
    num_cv_batches: int = 5,
    codes: Sequence[str] = DEFAULT_CODES,
    lam_enc_grid: Sequence[float] = DEFAULT_LAM_ENC_GRID,
    lam_dec_grid: Sequence[float] = DEFAULT_LAM_DEC_GRID,
    worst_case: bool = True,
    worst_case_batches: int = 3,
    search: dict | None = None,
    tune_steps: int = 100,
    fill: str = "mean",
    order: str = "given",
    trained: TrainedModel | Localizer | None = None,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 1e-3,
    model_kwargs: dict | None = None,
    data_path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Run the LeTCC coded-inference experiment (module docstring: protocol and result layout).

    Trains (or loads from the cache) ``model`` on ``dataset`` unless ``trained`` is given,
    chooses GCC's ``(λ_enc, λ_dec)`` per ``S`` by grid cross-validation on batches of held-out
    training images (never test images), then measures every code on the evaluation batches
    of test images over random straggler sets (and the worst case). Run with
    ``jax_enable_x64`` on: the spline solves lose digits in float32 once ``λ > 0``.

    Args:
        dataset: a data-set name for :func:`gcc_jax.nn.data.load_dataset` or a ``Dataset``
            (a classifier), or ``"localization"`` (the regression workload of the module
            docstring).
        model: a model name for :func:`gcc_jax.nn.models.make_model` (default ``"lenet5"``);
            with ``"localization"`` only ``None`` or ``"cnn"`` (the localizer's architecture).
        num_workers: ``N`` (at least ``K`` and ``max(S) + 2``).
        num_inputs: ``K`` images per coded batch (``≥ 2``).
        stragglers: the ``S`` values, each in ``[0, N − 2]``.
        num_trials: random straggler sets per batch and ``S`` (the paper uses 20).
        num_batches: evaluation batches.
        num_cv_batches: batches of held-out training-split images for the λ cross-validation
            (``≥ 1`` when GCC runs).
        codes: a subset of :data:`CODES`.
        lam_enc_grid: GCC encoder λ candidates.
        lam_dec_grid: GCC decoder λ candidates.
        worst_case: also search the worst pattern per code and ``S``.
        worst_case_batches: evaluation batches searched (the first ones).
        search: local-search budget for :func:`gcc_jax.worst_case_mask` (default
            :data:`RUN_SEARCH`).
        tune_steps: gradient steps of ``GCC-tuned`` (:func:`gcc_jax.tuning.tune` on the CV
            batches, starting from the CV choice).
        fill: uncoded's and replication's estimate of a lost result: ``"mean"`` (the batch's
            mean result), ``"zero"`` or ``"interpolate"`` (:class:`gcc_jax.UncodedCode`).
        order: the order of each batch's images along the encoders' line
            (:func:`gcc_jax.input_order`: ``"given"``, the drawn order, or ``"pca"``,
            ``"spectral"``, ``"greedy"``); the recorded image indices are in that order.
        trained: a trained classifier to use instead of training one (its data set must be
            ``dataset``), or with ``"localization"`` a trained
            :class:`~gcc_jax.experiments._localizer.Localizer`.
        epochs, batch_size, lr, model_kwargs: training hyper-parameters
            (:func:`gcc_jax.nn.training.train_classifier`; the localizer's
            :class:`~gcc_jax.experiments._localizer.LocalizerSettings` take ``epochs``,
            ``batch_size``, ``lr`` and ``seed``, and refuse ``model_kwargs``).
        data_path: directory of the data files (refused with ``"localization"``: its images
            are made offline).
        cache_dir: checkpoint cache directory (default: ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read/write the checkpoint cache.
        seed: seeds the training, the split into batches and every straggler set.
        progress: progress bars (training, cross-validation, evaluation, worst case).

    Returns:
        The :class:`~gcc_jax.experiments.ExperimentResult` of the module docstring.

    Raises:
        ValueError: bad sizes, unknown codes, too few test (or held-out training) images for
            the batches, or ``"localization"`` with another model, ``data_path``,
            ``model_kwargs`` or a classifier as ``trained``.
    """
    t_start = time.perf_counter()
    sz = _check_sizes(
        num_workers, num_inputs, stragglers, num_trials, num_batches, num_cv_batches,
        worst_case_batches, codes, lam_enc_grid, lam_dec_grid,
    )  # fmt: skip
    conflict = localization_conflict(dataset, model, data_path, model_kwargs)
    if conflict is not None:
        raise ValueError(f"`{conflict[0]}`: {conflict[1]}")
    classify = not is_localization(dataset)
    sz = sz._replace(fill=as_choice(fill, "fill", FILLS), classify=classify)
    order = as_choice(order, "order", ORDERS)
    if order == "sort":
        raise ValueError("`order='sort'` needs one number per input; images take 'pca', "
                         "'spectral' or 'greedy'")  # fmt: skip
    search = dict(RUN_SEARCH if search is None else search)
    warn_float32(
        "run_dnn in float32: the spline solves lose digits once lam > 0; enable x64 "
        '(jax.config.update("jax_enable_x64", True))',
        Float32PrecisionWarning,
    )
    dtype = jnp.zeros(()).dtype

    # -- model and data ------------------------------------------------------------------------
    training = dict(
        epochs=int(epochs),
        batch_size=int(batch_size),
        lr=float(lr),
        model_kwargs=dict(model_kwargs or {}),
    )
    t0 = time.perf_counter()
    if classify:
        net = _load_classifier(
            dataset, model or "lenet5", trained, data_path, training, sz, seed, cache_dir,
            use_cache, progress,
        )  # fmt: skip
    else:
        net = _load_localizer(trained, training, sz, seed, cache_dir, use_cache, progress)
    t_train = time.perf_counter() - t0
    ds = net.data
    split = ordered(net.split, ds, order)  # every batch in the encoder's input order
    cv_batches = [(jnp.asarray(ds.x_train[i], dtype), jnp.asarray(ds.y_train[i])) for i in split.cv]
    ev_batches = [(jnp.asarray(ds.x_test[i], dtype), jnp.asarray(ds.y_test[i])) for i in split.eval]
    f = net.f  # one function object: the compiled workers are reused
    k_cv, k_ev, k_wc = jax.random.split(jax.random.key(seed), 3)

    # -- GCC: λ by grid cross-validation on the held-out batches (gcc_jax.tuning) ---------------
    t0 = time.perf_counter()
    cv = _cross_validate(sz, f, cv_batches, k_cv, tune_steps, progress)
    t_cv = time.perf_counter() - t0

    # -- evaluation over random straggler sets ---------------------------------------------------
    t0 = time.perf_counter()
    ev_outputs = [_targets(f, x) for x, _ in ev_batches]
    stop = StopOnInterrupt()  # Ctrl-C: keep the batches evaluated in full
    ev = _evaluate_random(sz, cv, f, ev_batches, ev_outputs, k_ev, stop, progress)
    n_batches = len(ev.base_correct)
    ev_batches = ev_batches[:n_batches]
    t_eval = time.perf_counter() - t0

    # -- worst case -----------------------------------------------------------------------------
    t0 = time.perf_counter()
    worst: dict[tuple[str, int], dict] = {}
    if worst_case and not stop.interrupted:
        worst = _search_worst(
            sz, cv, f, ev_batches, ev_outputs, ev.base_correct, k_wc, search, stop, progress
        )
    t_worst = time.perf_counter() - t0

    # -- records ---------------------------------------------------------------------------------
    config = _config_record(sz, n_batches, worst_case, worst, search, net, dtype)
    config = {"interrupted": stop.interrupted, "order": order, **config}
    gcc_family = any(c.startswith("GCC") for c in sz.codes)
    payload = {
        "model": net.record,
        "base": _base_record(sz, ev, ev_batches, ev_outputs),
        "images": split._replace(eval=split.eval[:n_batches]).record(),
        "results": _code_rows(sz, cv, ev, worst, n_batches),
        "gcc_vs_bacc": _gcc_vs_bacc(sz, ev.tab),
        "comparisons": _gcc_vs_each(sz, ev.tab, worst),
        "regime_map": "gcc-jax regimes (gcc_jax.experiments.regimes): the winner among GCC, "
        "BACC, LCC, uncoded, replication and ParM over N/K × straggler fraction",
        "tuning": cv.tuning,
        "cv": {
            "stragglers": list(sz.s_list) if gcc_family else [],
            "lam_enc_grid": list(sz.lam_enc_grid),
            "lam_dec_grid": list(sz.lam_dec_grid),
            "mse": cv.table.tolist() if gcc_family else [],
        },
    }
    payload["summary"] = summarise_comparisons(payload, list(sz.s_list))
    timing = {
        "training": t_train,
        "cross_validation": t_cv,
        "evaluation": t_eval,
        "worst_case": t_worst,
    }
    return stop.finish(
        ExperimentResult.of_run(
            "dnn",
            json_clean(config),
            seed,
            _definitions(sz.classify),
            json_clean(payload),
            t_start=t_start,
            phases=timing,
        )
    )


run = run_dnn


# -- reporting ---------------------------------------------------------------------------------

_TITLES = {
    "mse": "MSE (1/K) Σ_k ‖f(x_k) − f^(x_k)‖₂²",
    "rmse": "RMSE √MSE",
    "mean_l2": "mean L2 error (1/K) Σ_k ‖f(x_k) − f^(x_k)‖₂",
    "accuracy": "accuracy of argmax f^ vs true labels",
    "rel_acc_labels": "RelAcc vs true labels (decoded acc / base acc)",
    "rel_acc_base": "RelAcc vs base argmax (agreement)",
}


METRIC_DEFINITIONS = {
    "mse": "(1/K) Σ_k ‖f(x_k) − f^(x_k)‖₂² per trial, averaged (the papers' loss; GCC's λ is "
    "chosen by CV on it), f = the worker output: a classifier's softmax, the localizer's box",
    "rmse": "√MSE of the averaged MSE; CI = half the distance between the roots of its CI ends",
    "mean_l2": "(1/K) Σ_k ‖f(x_k) − f^(x_k)‖₂ per trial, averaged (the mean L2 error; LeTCC "
    "calls it RMSE)",
    "accuracy": "fraction of argmax f^(x_k) equal to the true label (missing result = wrong)",
    "rel_acc_labels": "decoded accuracy / base-model accuracy on the same images, pooled over "
    "trials",
    "rel_acc_base": "fraction of argmax f^(x_k) equal to the base model's argmax f(x_k)",
    "ci95": "95% half-width, batches as clusters of trials (Student t, batches − 1 dof)",
    "worst_case": "the metrics at the pattern of S stragglers with the largest MSE found by "
    "gcc_jax.worst_case_mask, averaged over the searched batches (exact when exhaustive, else a "
    "lower bound)",
    "mean_l2_ratio": "GCC mean L2 error / the baseline's, paired over the same trials (ratio of "
    "sums)",
    "mse_ratio": "GCC MSE / the baseline's, paired over the same trials (ratio of sums)",
}
"""What every metric of a result means (a regression run's record leaves out the accuracies)."""


def _definitions(classify: bool) -> dict[str, str]:
    """:data:`METRIC_DEFINITIONS` of a classifier's run, or of a regression run (no accuracies)."""
    skip = () if classify else METRICS[len(ERROR_METRICS) :]
    return {k: v for k, v in METRIC_DEFINITIONS.items() if k not in skip}


RATIO_MARGIN = 1.1
"""A mean-L2-error ratio is "tied" only when its whole 95% interval lies in
``[1/1.1, 1.1]`` (equivalent within 10%)."""

ACCURACY_MARGIN_POINTS = 1.0
"""An accuracy difference is "tied" only when its whole 95% interval lies within ±1 point."""

ROUNDOFF = 1e-12
"""Errors below this fraction of the largest on their panel are round-off of an exact decode:
the log panels count them in the legend instead of drawing them."""


def _view(result: ExperimentResult) -> dict:
    """Configuration and results in one dict (what the report functions read)."""
    return {"config": result.config, **result.results}


_BOUNDS = {"accuracy": (0.0, 1.0), "rel_acc_base": (0.0, 1.0), "rel_acc_labels": (0.0, math.inf)}
"""The range of each bounded metric: its interval is clipped to it and shown as ``[low, high]``
(agreement and accuracy are fractions; accuracy relative to the base model is not negative)."""


def _fmt(stat: dict | None, metric: str) -> str:
    """``mean±ci`` of an unbounded metric, ``mean [low, high]`` (clipped) of a bounded one."""
    if stat is None or stat.get("mean") is None:
        return "—"
    m, ci = stat["mean"], stat.get("ci95")
    if metric in _BOUNDS:
        return format_bounded(m, ci, *_BOUNDS[metric])
    num = f"{m:.3e}" if metric == "mse" else f"{m:.4f}"
    if ci is None:
        return num
    return num + (f"±{ci:.1e}" if metric == "mse" else f"±{ci:.4f}")


def _runs(s_list: Sequence[int], labels: Sequence[str]) -> str:
    """``"lower at S=0-4, higher at S=6-10"``: consecutive S with the same label merged."""
    parts, start = [], 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            lo, hi = s_list[start], s_list[i - 1]
            parts.append(f"{labels[start]} at S={lo}" + ("" if lo == hi else f"-{hi}"))
            start = i
    return ", ".join(parts)


_WORDS = {"mse": "MSE", "mean_l2": "mean L2 error"}


def _ratio_text(results: dict, rows: list[dict], metric: str) -> str:
    """``"MSE lower at S=0-4, higher at S=6 (ratio 0.8-1.2)"``: GCC's paired ratio to one
    baseline per ``S`` (``rows``), judged by :func:`~gcc_jax.experiments._summary.ratio_verdict`."""
    gcc_rows = results.get("results", {}).get("GCC", ())
    labels, finite = [], []
    for c in rows:
        r, ci = c[f"{metric}_ratio"]["mean"], c[f"{metric}_ratio"]["ci95"]
        if r is None or not math.isfinite(r):  # the baseline is exact: Σ error = 0
            g = next((row[metric]["mean"] for row in gcc_rows if row["S"] == c["S"]), None)
            labels.append("higher" if g else "undefined (both exact)")
        else:
            labels.append(ratio_verdict(r, ci, margin=RATIO_MARGIN))
            finite.append(r)
    span = f" (ratio {min(finite):.3g}-{max(finite):.3g})" if finite else ""
    return f"{_WORDS[metric]} {_runs([c['S'] for c in rows], labels)}{span}"


def _worst_text(rows: list[dict], metric: str) -> str | None:
    """``"worst-case MSE lower at S=0, ..."`` where every ``S`` was searched, else ``None``."""
    labels = []
    for c in rows:
        w = c[f"worst_case_{metric}"]
        if w is None or w["gcc"] is None or w["baseline"] is None:
            return None
        g, o = w["gcc"], w["baseline"]
        same = abs(g - o) <= 1e-12 * max(abs(g), abs(o))  # e.g. both chose λ = 0
        labels.append("equal" if same else "lower" if g < o else "higher")
    return f"worst-case {_WORDS[metric]} {_runs([c['S'] for c in rows], labels)}"


def summarise_comparisons(results: dict, s_list: Sequence[int]) -> list[str]:
    """Plain-language lines: GCC (λ by CV) against every other code, per metric and S.

    A classifier's line judges the mean L2 error, the accuracy and the worst-case mean L2
    error; a regression's (no accuracy in its comparisons) the MSE, the mean L2 error and the
    worst-case MSE. Error ratios: "lower"/"higher" when the paired 95% CI of the ratio
    excludes 1, "tied" only when it lies within :data:`RATIO_MARGIN` of 1, else
    "inconclusive" (:func:`~gcc_jax.experiments._summary.ratio_verdict`); where the baseline is
    exact (its errors sum to 0, the ratio is undefined, e.g. uncoded at ``S = 0``) GCC's error
    is "higher" unless it is exact too; accuracy: "better"/"worse" when the CI of the paired
    difference excludes 0, "tied" only within ±:data:`ACCURACY_MARGIN_POINTS` points, else
    "inconclusive"; worst case: the searched patterns' errors
    (single values; "equal" to 1e-12 relative, e.g. where CV chose λ = 0 and GCC is
    GCC-interp). Ends with a pointer to the regime map.
    """
    lines = []
    comps = results.get("comparisons", [])
    for other in dict.fromkeys(c["baseline"] for c in comps):
        rows = sorted((c for c in comps if c["baseline"] == other), key=lambda c: c["S"])
        if "accuracy_diff_points" in rows[0]:
            acc = [
                difference_verdict(
                    c["accuracy_diff_points"]["mean"],
                    c["accuracy_diff_points"]["ci95"],
                    margin=ACCURACY_MARGIN_POINTS,
                )
                for c in rows
            ]
            parts = [
                _ratio_text(results, rows, "mean_l2"),
                f"accuracy {_runs([c['S'] for c in rows], acc)}",
                _worst_text(rows, "mean_l2"),
            ]
        else:
            parts = [
                _ratio_text(results, rows, "mse"),
                _ratio_text(results, rows, "mean_l2"),
                _worst_text(rows, "mse"),
            ]
        lines.append(f"GCC vs {other}: " + "; ".join(p for p in parts if p) + ".")
    if comps:
        lines.append(
            "Where coding pays at other redundancies and straggler fractions (and against LCC "
            "and ParM): `gcc-jax regimes`."
        )
    return lines


def _row_metrics(result: dict) -> tuple[str, ...]:
    """The metrics of a result's rows: :data:`METRICS` (a classifier) or :data:`ERROR_METRICS`."""
    first = next(iter(result["results"].values()))[0]
    return tuple(m for m in METRICS if m in first)


def _model_text(model: dict, base: dict) -> str:
    """The model's test score, training and score on the evaluation images (table heading)."""
    if "accuracy" in base:
        test = f"test accuracy {model['test_accuracy']:.4f}"
        on_eval = f"{base['accuracy']:.4f}"
    else:
        test = f"test box MSE {model['test_mse']:.4g}, mean IoU {model['mean_iou']:.3f}"
        on_eval = f"box MSE {base['mse']:.4g}, mean IoU {base['mean_iou']:.3f}"
    return (
        f"{test} after {model['epochs']} epochs, seed {model['seed']}"
        + (f", parameters {model['params_fingerprint']}" if "params_fingerprint" in model else "")
        + f"; {on_eval} on the {base['num_images']} evaluation images"
    )


def format_dnn_table(result: ExperimentResult, metrics: Sequence[str] | None = None) -> str:
    """Plain-text tables of a :func:`run_dnn` result: rows codes, columns ``S``, mean ± 95% CI.

    One table per metric (default: every metric of the rows), then the worst case (a
    classifier's mean L2 error and RelAcc, a regression's MSE and mean L2 error), GCC's gain in
    mean L2 error over BACC and the cross-validated λs.
    """
    result = _view(result)
    cfg, model = result["config"], result["model"]
    s_list = cfg["stragglers"]
    codes = list(result["results"])
    metrics = _row_metrics(result) if metrics is None else tuple(metrics)
    classify = "accuracy" in _row_metrics(result)
    head = (
        f"coded inference: {model['name']} on {model['dataset']} "
        f"({_model_text(model, result['base'])}), N={cfg['num_workers']} workers, "
        f"K={cfg['num_inputs']} images per batch, {cfg['num_batches']} batches × "
        f"{cfg['num_trials']} random straggler sets per S (GCC λ by CV on the MSE of "
        f"{cfg['num_cv_batches']} batches of held-out training images), {cfg['dtype']}"
    )
    width = max(
        16,
        *(len(_fmt(r.get(m), m)) + 2 for c in codes for r in result["results"][c] for m in metrics),
    )
    cols = "".join(f"{'S=' + str(s):>{width}}" for s in s_list)

    def table(title: str, cell) -> list[str]:
        lines = ["", title, f"{'code':<12}{cols}"]
        for c in codes:
            lines.append(f"{c:<12}" + "".join(f"{cell(r):>{width}}" for r in result["results"][c]))
        return lines

    lines = [head]
    if cfg.get("interrupted"):
        lines.append(
            f"INTERRUPTED (Ctrl-C): {cfg['num_batches']} evaluation batch(es) finished; worst "
            "cases only where searched in full."
        )
    for m in metrics:
        how = (
            f"mean [95% CI clipped to [{_BOUNDS[m][0]:g}, {_BOUNDS[m][1]:g}]]"
            if m in _BOUNDS
            else "mean ± 95% CI"
        )
        lines += table(f"{_TITLES[m]}, {how}", lambda r, m=m: _fmt(r[m], m))
    if cfg["worst_case"]:
        for m in ("mean_l2", "rel_acc_labels") if classify else ("mse", "mean_l2"):
            lines += table(
                f"worst case ({cfg['worst_case_batches']} batch(es); * = exhaustive, else a "
                f"lower bound from local search): {_TITLES[m]}",
                lambda r, m=m: (
                    "—"
                    if r["worst_case"] is None
                    else _fmt({"mean": r["worst_case"][m]["mean"], "ci95": None}, m)
                    + ("*" if r["worst_case"]["exhaustive"] else "")
                ),
            )
    if result["gcc_vs_bacc"]:
        lines += ["", "GCC mean L2 error / BACC's (paired, mean ± 95% CI) and GCC's gain"]
        lines.append(f"{'':<12}{cols}")
        lines.append(
            f"{'ratio':<12}"
            + "".join(
                f"{_fmt(g['mean_l2_ratio'], 'ratio'):>{width}}" for g in result["gcc_vs_bacc"]
            )
        )
        lines.append(
            f"{'gain':<12}"
            + "".join(
                f"{'—' if g['mean_l2_gain_percent'] is None else format(g['mean_l2_gain_percent'], '.1f') + '%':>{width}}"  # noqa: E501
                for g in result["gcc_vs_bacc"]
            )
        )
    for name in ("GCC", "GCC-tuned"):
        if name not in result["results"]:
            continue
        how = "grid cross-validation" if name == "GCC" else "gradient tuning (tune)"
        lines += ["", f"{name} λ chosen by {how} (lam_enc / lam_dec)"]
        lines.append(f"{'':<12}{cols}")
        lines.append(
            f"{'λ':<12}"
            + "".join(
                f"{format(r['lam_enc'], '.2g') + ' / ' + format(r['lam_dec'], '.2g'):>{width}}"
                for r in result["results"][name]
            )
        )
    if result.get("summary"):
        lines += ["", "summary: GCC (λ by CV on the MSE) against every other code (paired 95% CIs)"]
        lines += ["  " + line for line in result["summary"]]
    return "\n".join(lines)


report = format_dnn_table


_COLORS = CODE_COLORS | {"GCC-interp": "C9", "GCC-tuned": "C4"}


def plot_dnn(result: ExperimentResult):
    """Panels versus ``S``: mean L2 error and MSE (log), and a classifier's RelAcc vs labels
    and vs base argmax (four panels; a regression run has the first two).

    Error bars are 95% CIs (on the log panels symmetric where positive, see
    :func:`gcc_jax.experiments._plots.log_errorbar`). Dashed lines are the worst case where it
    was searched: crosses when exhaustive (the true worst case), open triangles when found by a
    local search (a lower bound on it). Values a log axis cannot show (exact zeros, e.g.
    replication with every copy alive) are counted in the legend, never dropped silently.
    """
    result = _view(result)
    panels = (("mean_l2", True), ("mse", True))
    if "accuracy" in _row_metrics(result):
        fig, axes = new_figure(2, 2, figsize=(13, 8))
        panels += (("rel_acc_labels", False), ("rel_acc_base", False))
        outputs = "probabilities"
    else:
        fig, axes = new_figure(1, 2, figsize=(13, 4.5))
        outputs = "boxes"
    ylabels = dict(
        mean_l2=f"mean L2 error of the decoded {outputs}",
        mse=f"MSE of the decoded {outputs}",
        rel_acc_labels="decoded accuracy / base accuracy",
        rel_acc_base="agreement with the base model",
    )

    def value(stat) -> float:
        return np.nan if stat is None or stat["mean"] is None else stat["mean"]

    s_all = set()
    for ax, (metric, log) in zip(axes.ravel(), panels, strict=True):
        # the panel's largest value: round-off is judged against it, not against each series
        values = [value(r[metric]) for rows in result["results"].values() for r in rows]
        values += [
            value(r["worst_case"][metric])
            for rows in result["results"].values()
            for r in rows
            if r["worst_case"] is not None
        ]
        finite = [v for v in values if np.isfinite(v) and v > 0]
        top = max(finite) if finite else None
        for code, rows in result["results"].items():
            s = np.array([r["S"] for r in rows], float)
            s_all.update(int(v) for v in s)
            mean = np.array([value(r[metric]) for r in rows], float)
            ci = np.array([0.0 if r[metric]["ci95"] is None else r[metric]["ci95"] for r in rows])
            color = _COLORS.get(code)
            if log:
                log_errorbar(
                    ax, s, mean, ci, code, fmt="o-", color=color, roundoff=ROUNDOFF, reference=top
                )
            else:
                bounded_errorbar(
                    ax, s, mean, ci, code, hi=_BOUNDS[metric][1], fmt="o-", color=color
                )
            wcs = [r["worst_case"] for r in rows]
            if any(w is not None for w in wcs):
                w = np.array([np.nan if wc is None else value(wc[metric]) for wc in wcs], float)
                exact = np.array([bool(wc and wc.get("exhaustive")) for wc in wcs])
                label = f"{code} worst case"
                if log:
                    w, label = positive(w, label, roundoff=ROUNDOFF, reference=top)
                ax.plot(s, w, "--", color=color, alpha=0.6)
                ax.plot(s[exact], w[exact], "x", color=color, label=f"{label} (exact)")
                if (~exact).any():
                    ax.plot(
                        s[~exact],
                        w[~exact],
                        "^",
                        color=color,
                        markerfacecolor="none",
                        label=f"{code} worst case (search: lower bound)",
                    )
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("stragglers S")
        ax.set_ylabel(ylabels[metric])
        ax.set_title(_TITLES[metric], fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        legend_outside(ax, fontsize=7)
    for ax in axes.ravel():
        integer_ticks(ax, sorted(s_all))
    cfg = result["config"]
    fig.suptitle(
        f"{result['model']['name']} on {result['model']['dataset']}: N={cfg['num_workers']}, "
        f"K={cfg['num_inputs']}, {cfg['num_batches']}×{cfg['num_trials']} random straggler sets "
        "per S"
    )
    fig.tight_layout()
    return fig


def plot_cv(result: ExperimentResult):
    """Heat maps of the cross-validation loss over ``(λ_enc, λ_dec)``, one per ``S``.

    The colour is ``log10`` of the MSE on the held-out batches (its bar is labelled); the red
    star is the chosen pair.
    """
    cv = result.results["cv"]
    s_all = cv["stragglers"]
    cols = min(len(s_all), 3)
    rows_n = -(-len(s_all) // cols)
    fig, axes = new_figure(rows_n, cols, figsize=(4.6 * cols, 3.8 * rows_n), squeeze=False)
    for ax in axes.ravel()[len(s_all) :]:
        ax.set_visible(False)
    for ax, i in zip(axes.ravel(), range(len(s_all))):
        table = np.log10(np.array(cv["mse"][i], float))
        im = ax.imshow(table, origin="lower", aspect="auto", cmap="viridis")
        e, d = np.unravel_index(np.nanargmin(table), table.shape)
        ax.plot(d, e, "r*", ms=12, label="chosen (lowest CV loss)")
        ax.set_xticks(range(len(cv["lam_dec_grid"])))
        ax.set_xticklabels([f"{v:g}" for v in cv["lam_dec_grid"]], rotation=60, fontsize=7)
        ax.set_yticks(range(len(cv["lam_enc_grid"])))
        ax.set_yticklabels([f"{v:g}" for v in cv["lam_enc_grid"]], fontsize=7)
        ax.set_xlabel("λ_dec")
        ax.set_ylabel("λ_enc")
        ax.set_title(f"S = {s_all[i]}", fontsize=10)
        bar = fig.colorbar(im, ax=ax)
        bar.set_label("log10 held-out MSE", fontsize=8)
    axes.ravel()[0].legend(loc="upper left", fontsize=7, framealpha=0.8)
    fig.suptitle("GCC: cross-validation loss over (λ_enc, λ_dec) on held-out batches")
    fig.tight_layout()
    return fig


def save_dnn(result: ExperimentResult, out: str | Path) -> dict[str, Path]:
    """Write ``results.json``, ``results.txt`` and ``results.png`` (+ ``cv.png``) into ``out``."""
    figures = {"results": plot_dnn(result)}
    if result.results["cv"]["stragglers"]:
        figures["cv"] = plot_cv(result)
    paths = save_result(
        result, out, name="results", summary=format_dnn_table(result), figures=figures
    )
    paths["plot"] = paths.pop("results")
    if "cv" in paths:
        paths["cv_plot"] = paths.pop("cv")
    return paths


save = save_dnn
