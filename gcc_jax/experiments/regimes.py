"""``gcc-jax regimes``: when does coding pay? A regime map of GCC against every baseline.

For each **workload**, **redundancy** ``N/K`` and **straggler fraction** ``p`` (``S = ⌊pN + ½⌋``
stragglers among the ``N`` workers), and for two straggler models — ``random`` (``S`` workers
chosen uniformly) and ``worst`` (the pattern of ``S`` stragglers with the largest MSE that
:func:`gcc_jax.worst_case_mask` finds) — every code below runs on the same inputs and the same
patterns, and the cell records every code's MSE, RMSE = √MSE, mean L2 error and (for
classifiers) accuracy with 95% CIs, and the winner, the runner-up and the margin by MSE, by
mean L2 error and by accuracy.

Input orders and fill rules. GCC, BACC and LCC encode the ``K`` inputs along a line, so the
order of the inputs is part of the encoding: each runs in every order of ``orders``
(:func:`gcc_jax.input_order`: ``given`` = the order drawn, ``sort`` for scalar inputs,
``pca``, ``spectral``, ``greedy``), labelled ``GCC·sort`` etc. Uncoded, replication and ParM
can lose an input outright; each runs with every fill rule of ``fills`` (``zero``, ``mean`` of
the batch's results, ``interpolate`` between the nearest results in an order — one label per
order, e.g. ``replication·interpolate·sort``). Every label is ranked against every other.

Codes, all at the same worker count ``N`` except uncoded:

* ``GCC`` (:class:`gcc_jax.SplineCode`, Chebyshev nodes): ``(λ_enc, λ_dec)`` chosen per cell and
  order by
  cross-validation with :func:`gcc_jax.tuning.grid_search` — the lowest mean loss
  ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` over ``num_cv_batches`` *held-out* input batches (never the
  evaluation inputs; for the classifier, training-split images it was not trained on — its
  validation images, by the rule of :func:`gcc_jax.experiments.split_images` — never test
  images) and ``num_trials``
  random patterns of their own with the cell's ``S``; the CV curves are saved. The worst-case
  cells reuse that λ (the operator does not know the adversary).
* ``GCC-tuned``: GCC whose ``λ_enc``, ``λ_dec`` and nodes (``alpha``, ``beta``) are tuned by
  ``tune_steps`` gradient steps of :func:`gcc_jax.tuning.tune` from the CV choice, on the same
  held-out batches (a quarter of them for its validation) with the cell's ``S``; tested, like
  every code, on the evaluation batches and patterns it never saw.
* ``BACC`` (:class:`gcc_jax.BerrutCode`, Chebyshev nodes).
* ``LCC`` (:class:`gcc_jax.LagrangeCode`, ``degree=1``): polynomial interpolation of degree
  ``K − 1``; it applies where ``N − S ≥ K`` (its recovery threshold for a linear ``f``; none of
  the workloads is a polynomial, so it is an approximation everywhere) and is ``n/a`` elsewhere.
* ``uncoded``: ``K`` of the ``N`` machines, worker ``k`` computes ``f(x_k)``; in the random model
  it reads its stragglers from the first ``K`` entries of the same ``N``-worker pattern (so it
  loses ``S·K/N`` results on average), in the worst case the adversary kills ``min(S, K)`` of its
  workers.
* ``replication`` (:class:`gcc_jax.ReplicationCode`): the ``N`` workers hold copies, round-robin.
* ``ParM`` (:class:`gcc_jax.ParityModelCode`, sum encoder): ``K/k`` groups of ``k`` inputs plus one
  parity worker each, with ``k`` chosen so that ``N = K + K/k`` (only where ``k ≥ 2`` is an
  integer dividing ``K``: ``N/K = 1 + 1/k``). A group with more than one missing worker returns
  its live base outputs and the fill rule's estimates for the missing ones (like uncoded).
  Parity models are trained by :func:`gcc_jax.train_parity_model` (cached) — a LeNet-5 for the
  classifier workloads, a small tanh MLP for the synthetic ones.

A missing result (uncoded, replication, ParM) is the fill rule's estimate: it enters the errors
as ``‖fill − f(x_k)‖`` and counts as a wrong prediction in the accuracy.

Workloads (:data:`WORKLOADS`): ``localization`` (a regression workload: the localizer of
:mod:`gcc_jax.experiments._localizer` — a small CNN, :class:`gcc_jax.nn.models.SmallCNN` with 4
outputs, predicts the box of a digit pasted on a 40×40 canvas; trained with the box MSE through
the seeded checkpoint cache, ``epochs`` epochs on 6000 images, the model ``gcc-jax run
--dataset localization`` uses; its λ's CV batches are held-out training-split images, its
evaluation batches test images, by the rule of :func:`gcc_jax.experiments.split_images`; the
worker output is the 4-vector box),
``xsinx`` (``f(x) = x sin x``, ``x ~ U(−3, 3)``), ``vector_map``
(:func:`smooth_vector_map`, ℝ² → ℝ³, ``x ~ U(−1, 1)²``), and a LeNet-5 trained by
:func:`gcc_jax.nn.training.train_classifier` (cached, seeded) on Fashion-MNIST — or on
scikit-learn's digits when the Fashion-MNIST files are absent (the JSON's ``data_note`` says
so) — whose worker output is its ``lenet_logits`` or its ``lenet_softmax``.

Every value is computed through :meth:`gcc_jax.AbstractCode.worker_outputs` and the one mask
evaluator (:class:`gcc_jax.MaskEvaluator` with :func:`regime_metrics`).

Winner and margin (:func:`pick_winner`), per metric: the applicable code label with the lowest
mean MSE or mean L2 error (highest mean accuracy; RMSE ranks as MSE does); ``margin`` is
``100 (1 − value_winner / value_runner-up)`` percent (accuracy: the difference in points);
``significant`` tells whether the paired 95% CI (batches as clusters, :func:`gcc_jax.ratio_ci` /
:func:`gcc_jax.mean_ci`) excludes a tie. Exact ties (both errors
below ``1e-12`` of the cell's largest error, e.g. uncoded and replication at ``S = 0``) are
reported as ties.

:func:`run_regimes` returns an :class:`~gcc_jax.experiments.ExperimentResult`, written by
:func:`save_regimes` as ``regimes.json`` in the common schema of
:mod:`gcc_jax.experiments._io` (``seeds = {"seed"}``, NaN written as ``null``), with::

    "config": {num_inputs, ratios, num_workers, fractions, modes, workloads, codes, orders,
               fills, rank_by ("mse": λ's CV and the first table), num_trials,
               num_batches, num_cv_batches, worst_case_batches, lam_enc_grid, lam_dec_grid,
               search, dataset, epochs, parm_epochs, dtype},
    "results": {
      "data_note": str | null,                 # e.g. Fashion-MNIST absent: digits used
      "models": {"localizer": {name, dataset, test_mse, mean_iou, num_test, epochs,
                               batch_size, lr, seed, num_train, num_held_out, num_params,
                               params_fingerprint, from_cache, train_time_s,
                               images: {...}} (when run; images as lenet5's),
                 "lenet5": null | {name, dataset, test_accuracy, epochs, seed, from_cache,
                                   train_time_s,
                                   images: {cv_split: "train", cv_pool: "validation",
                                            cv: [[i...]...], eval_split: "test",
                                            eval: [[i...]...]}},   # indices per batch
                 "parm": [{workload, k, N, base_model, base_accuracy, base_epochs,
                           parity_model, epochs, encoder, val_recon_accuracy, train_time_s,
                           from_cache}]},
      "cells": [{workload, mode, ratio, N, K, fraction, S,
                 codes: {LABEL: {family, order, fill, mse: {mean, ci95},
                                 rmse: {mean, ci95, low, high}, mean_l2: {...},
                                 accuracy: {...} | null, num_failed, applicable,
                                 lam_enc, lam_dec (GCC, GCC-tuned), k (ParM),
                                 node_gap (GCC-tuned: median over the inputs of the
                                 distance from alpha_k to its nearest worker node),
                                 exhaustive, num_evaluated (worst)}},
                 winner: {"mse": {code, runner_up, value, runner_up_value, margin, ratio,
                                  ci95, significant, tie, tied},
                          "mean_l2": {...}, "accuracy": {...} | null}}],
      "cv": [{workload, ratio, fraction, order, mse: [[...]] (λ_enc × λ_dec mean held-out
              loss), lam_enc, lam_dec}],
      "summary": [str]}

Sizes and run time. The defaults (:data:`DEFAULTS`) are a reduced map: ``K = 20``,
``N/K ∈ {1.1, 1.25, 1.5, 2, 3}`` (``N = 22 … 60``), ``p ∈ {0, 10, 20, 30}%``, five workloads,
10 patterns × 3 batches per cell, λ by CV on 3 held-out batches over the 10 × 12 default grid,
the worst case on 1 batch (16 chains × 512 proposals × 200 steps, :data:`REGIMES_SEARCH`), LeNet-5
(Fashion-MNIST), the localizer and their parity models 10 epochs each::

    gcc-jax regimes --out results/regimes

Its measured run time is in ``docs/cli.md`` (``regimes``); the records are in
``bench/results/fidelity/`` and ``docs/results.md``.
:data:`FULL` lists the flags of a larger map (5 fractions, 5 × 20 patterns per cell, CV on 5
batches, the worst case on 2 batches with a 32 × 1024 × 400 search); it runs for hours on two
CPU cores.
"""

import dataclasses
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_int
from .._core.progress import tqdm
from .._core.types import Array, Bool
from ..codes import (
    AbstractCode,
    BerrutCode,
    GroupedParityCode,
    LagrangeCode,
    ReplicationCode,
    SplineCode,
    UncodedCode,
)
from ..evaluation import (
    MaskEvaluator,
    input_order,
    mean_ci,
    outputs_and_targets,
    ratio_ci,
    sample_masks,
    worst_case_mask,
)
from ..nn.training import TrainSettings, train_parity_model
from ..tuning import StragglerModel, grid_search, tune
from ._command import Batches, StopOnInterrupt, check_batches, release_compiled_programs
from ._commands.regimes import (
    CODES,
    DEFAULTS,
    FILLS,
    FULL,
    MODES,
    ORDERS,
    REGIMES_SEARCH,
    TOY,
    WORKLOADS,
)
from ._images import split_images
from ._io import ExperimentResult, json_clean, new_figure, save_result, warn_float32
from ._localizer import LocalizerSettings, localizer_model, train_localizer
from ._plots import CODE_COLORS, annotate_cells
from .rates import vector_map, xsinx

__all__ = [
    "CODES",
    "DEFAULTS",
    "FILLS",
    "FULL",
    "GroupedParityCode",
    "METRICS",
    "MODES",
    "ORDERS",
    "REGIMES_SEARCH",
    "TOY",
    "WORKLOADS",
    "format_regimes",
    "parm_group_size",
    "pick_winner",
    "plot_regimes",
    "regime_metrics",
    "report",
    "run",
    "run_regimes",
    "save",
    "save_regimes",
    "stragglers_for",
    "summarise",
    "variant_label",
    "toy_config",
]


METRICS = {
    "mse": "(1/K) Σ_k ‖f^(x_k) − f(x_k)‖₂² per pattern, averaged over patterns and batches "
    "(the papers' loss; GCC's λ is chosen by CV on it); a missing result (uncoded, "
    "replication, ParM with 2+ losses in a group) is the code's fill rule's estimate",
    "rmse": "√MSE (the square root of the mean above); its CI is the square root of the MSE's "
    "CI ends (half their distance); it ranks codes as MSE does",
    "mean_l2": "(1/K) Σ_k ‖f^(x_k) − f(x_k)‖₂ per pattern, averaged (the mean L2 error; "
    "LeTCC calls it RMSE)",
    "accuracy": "fraction of argmax f^(x_k) equal to the true label (missing result = wrong)",
    "ci95": "95% half-width, batches as clusters of patterns (Student t)",
    "code labels": "CODE·ORDER for GCC, BACC and LCC (the inputs encoded in that order, "
    "gcc_jax.input_order); CODE·FILL for uncoded, replication and ParM, CODE·interpolate·ORDER "
    "for the interpolating fill (neighbours in that order)",
    "winner": "per metric, the applicable code label with the lowest mean MSE / mean L2 error "
    "(highest mean accuracy)",
    "margin": "100 (1 − value_winner / value_runner-up) percent (paired ratio of sums); for "
    "accuracy the difference in points; significant = its paired 95% CI excludes a tie",
    "worst": "the pattern of S stragglers with the largest MSE found by "
    "gcc_jax.worst_case_mask per searched batch (exact when exhaustive, else a lower bound)",
}


def _view(result: ExperimentResult) -> dict:
    """Configuration and results in one dict (what the report functions read)."""
    return {"config": result.config, **result.results}


def toy_config() -> dict:
    """Tiny keyword arguments for :func:`run_regimes` (seconds; ``GCC_JAXTOY=1``)."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in TOY.items()}


# -- workloads ---------------------------------------------------------------------------------


_SYNTHETIC = {"xsinx": (xsinx, 1, 3.0), "vector_map": (vector_map, 2, 1.0)}


@dataclasses.dataclass(frozen=True)
class _FnApply:
    """``apply(params, x) = fn(x)``: a parameter-free base model for :func:`train_parity_model`."""

    fn: Callable

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", "f")

    def __call__(self, params, x):
        return self.fn(x)


@dataclasses.dataclass(frozen=True)
class _TanhMLP:
    """``W₃ tanh(W₂ tanh(W₁ x + b₁) + b₂) + b₃``: the parity model of the synthetic workloads."""

    name: str = "tanh_mlp"

    def __call__(self, params, x):
        h = jnp.ravel(x)
        for i, (w, b) in enumerate(params):
            h = h @ w.astype(h.dtype) + b.astype(h.dtype)
            if i < len(params) - 1:
                h = jnp.tanh(h)
        return h


def _mlp_init(sizes: Sequence[int], seed: int) -> list:
    rng = np.random.default_rng((seed, 0x3A1F))
    return [
        (
            jnp.asarray(rng.normal(size=(a, b)) * np.sqrt(1.0 / a), jnp.float32),
            jnp.zeros((b,), jnp.float32),
        )
        for a, b in zip(sizes[:-1], sizes[1:], strict=True)
    ]


@dataclasses.dataclass(frozen=True)
class _ParityNet:
    """The raw network as ParM's parity model, named after the output it is trained for
    (so the checkpoint caches of the logits and softmax parity models never collide)."""

    apply: Callable
    target: str

    @property
    def name(self) -> str:
        return f"{getattr(self.apply, 'name', 'net')}->{self.target}"

    def __call__(self, params, x):
        return self.apply(params, x)


@dataclasses.dataclass(frozen=True)
class _Softmax:
    """``softmax(apply(params, x))``: the base outputs of the softmax workload."""

    apply: Callable

    @property
    def name(self) -> str:
        return f"{getattr(self.apply, 'name', 'net')}-softmax"

    def __call__(self, params, x):
        return jax.nn.softmax(self.apply(params, x), axis=-1)


class _Workload(NamedTuple):
    name: str
    f: Callable  # single-input worker function (hashable; one compile per code structure)
    cv: list  # [(x (K, ...), labels (K,) or None)]
    eval: list
    classify: bool
    parm_base: Any  # (base_apply, base_params, parity_apply, init_fn(seed), x_train, info)


# -- ParM at N = K + K/k ---------------------------------------------------------------------


def parm_group_size(num_inputs: int, num_workers: int) -> int | None:
    """``k`` with ``N = K + K/k`` (``k ≥ 2`` dividing ``K``), or ``None`` if there is none.

    Example:
        >>> parm_group_size(20, 25), parm_group_size(20, 40), parm_group_size(20, 22)
        (4, None, 10)
    """
    k_in = as_int(num_inputs, "num_inputs", 1)
    n = as_int(num_workers, "num_workers", 1)
    extra = n - k_in
    if extra < 1 or k_in % extra:
        return None
    k = k_in // extra
    return k if k >= 2 else None


# -- per-pattern metrics (through the one evaluator) -------------------------------------------


def regime_metrics(
    code: AbstractCode, yt: Array, target: tuple[Array, Array], mask: Bool[Array, " n"]
):
    """Mean L2 error, MSE and correct predictions of one pattern, and its status (a ``per_mask``).

    With ``ŷ = code.decode_with_status(yt, mask).value`` and ``target = (f(x), labels)``:
    ``mean_l2 = (1/K) Σ_k ‖ŷ_k − f(x_k)‖₂``, ``mse = (1/K) Σ_k ‖ŷ_k − f(x_k)‖₂²`` and
    ``correct = #{k : argmax ŷ_k = label_k and code.available(mask)_k}`` (a missing result is
    wrong); all NaN where the status is not OK. Use with :class:`gcc_jax.MaskEvaluator`.
    """
    fx, labels = target
    dec = code.decode_with_status(yt, mask)
    ok = dec.status == 0
    k = fx.shape[0]
    err = jnp.where(ok, dec.value - fx, 0).reshape(k, -1)
    sq = jnp.sum(err * err, axis=1)
    pred = jnp.argmax(jnp.where(ok, dec.value, 0).reshape(k, -1), axis=-1)
    hit = (pred == labels) & code.available(mask)
    nan = jnp.asarray(jnp.nan, sq.dtype)
    return (
        jnp.where(ok, jnp.mean(jnp.sqrt(sq)), nan),
        jnp.where(ok, jnp.mean(sq), nan),
        jnp.where(ok, jnp.sum(hit).astype(sq.dtype), nan),
        dec.status,
    )


def stragglers_for(fraction: float, num_workers: int) -> int:
    """``S = ⌊p N + ½⌋``, capped at ``N − 2`` (every code needs two live workers).

    Example:
        >>> stragglers_for(0.1, 25), stragglers_for(0.3, 60), stragglers_for(0.05, 22)
        (3, 18, 1)
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"a straggler fraction must be in [0, 1); got {fraction}")
    return min(int(math.floor(fraction * num_workers + 0.5)), num_workers - 2)


# -- winner and margin ---------------------------------------------------------------------------


def pick_winner(tables: dict[str, np.ndarray], *, higher_is_better: bool = False) -> dict | None:
    """The best code of a cell, its runner-up and the margin, from per-trial tables.

    Args:
        tables: code → ``(B, T)`` per-trial values (batches × patterns; the same inputs and
            patterns for every code, so the comparison is paired).
        higher_is_better: accuracy (True) or error (False).

    Returns:
        ``None`` without codes, else ``{code, runner_up, value, runner_up_value, margin, ratio,
        ci95, significant, tie, tied}``. For errors ``ratio`` is the pooled ratio winner/runner-up
        (:func:`gcc_jax.ratio_ci`, batches as clusters) and ``margin = 100 (1 − ratio)``
        percent; for accuracies ``margin`` is the mean difference in points (``ratio`` None)
        with its CI (:func:`gcc_jax.mean_ci`). ``significant``: the 95% CI excludes a tie.
        ``tie``: the two values are equal to ``1e-12`` of the largest (e.g. two exact codes);
        ``tied`` lists every code equal to the winner in that sense (the winner first).

    Example:
        >>> import numpy as np
        >>> w = pick_winner({"a": np.full((3, 2), 1.0), "b": np.full((3, 2), 2.0)})
        >>> w["code"], w["runner_up"], w["margin"], w["significant"]
        ('a', 'b', 50.0, True)
    """
    means = {c: float(np.mean(t)) for c, t in tables.items()}
    if not means:
        return None
    order = sorted(means, key=lambda c: -means[c] if higher_is_better else means[c])
    best = order[0]
    out = {"code": best, "value": means[best], "runner_up": None, "runner_up_value": None}
    out.update(margin=None, ratio=None, ci95=None, significant=None, tie=False, tied=[best])
    if len(order) == 1:
        return out
    second = order[1]
    # equal to 1e-12 of the larger of the two values compared (a code that blows up elsewhere in
    # the cell, e.g. LCC at 1e13, must not widen every other code's tie)
    tied = [
        c
        for c in order
        if abs(means[c] - means[best]) <= 1e-12 * max(abs(means[c]), abs(means[best]), 1e-300)
    ]
    tie = len(tied) > 1
    out.update(runner_up=second, runner_up_value=means[second], tie=tie, tied=tied)
    a, b = np.asarray(tables[best], float), np.asarray(tables[second], float)
    if higher_is_better:
        diff, ci = mean_ci(a - b)
        out.update(margin=100.0 * diff, ci95=100.0 * ci)
        out["significant"] = bool(not tie and np.isfinite(ci) and diff - ci > 0)
    elif means[second] > 0:
        r, ci = ratio_ci(a, b)
        out.update(ratio=r, margin=100.0 * (1.0 - r), ci95=ci)
        out["significant"] = bool(not tie and np.isfinite(ci) and r + ci < 1.0)
    else:
        out.update(margin=0.0, significant=False)
    return out


# -- the experiment ---------------------------------------------------------------------------


def _check_floats(name: str, values, lo: float, hi: float) -> tuple[float, ...]:
    vals = tuple(float(v) for v in values)
    if not vals or any(not (lo <= v < hi) or not np.isfinite(v) for v in vals):
        raise ValueError(
            f"`{name}` must be a non-empty list of values in [{lo}, {hi}); got {values!r}"
        )
    return vals


def _stat(values: np.ndarray) -> dict:
    m, ci = mean_ci(values)
    return {"mean": m, "ci95": ci}


def _synthetic_workload(name: str, k: int, n_cv: int, n_eval: int, seed: int, dtype) -> _Workload:
    f, d, half = _SYNTHETIC[name]

    def draw(tag: int, b: int):
        x = np.random.default_rng((seed, tag, b)).uniform(-half, half, (k, d))
        return jnp.asarray(x, dtype), None

    x_train = np.random.default_rng((seed, 0x9A)).uniform(-half, half, (8192, d)).astype(np.float32)
    m = jax.eval_shape(f, jax.ShapeDtypeStruct((d,), jnp.float32)).shape[0]
    base = dict(
        base_apply=_FnApply(f),
        base_params=jnp.zeros((), jnp.float32),
        parity_apply=_TanhMLP(),
        init=lambda s, d=d, m=m: _mlp_init((d, 64, 64, m), s),
        x_train=x_train,
        info={
            "base_model": f"exact {name}",
            "base_accuracy": None,
            "base_epochs": 0,
            "parity_model": f"tanh MLP {d}-64-64-{m}",
        },
    )
    return _Workload(
        name,
        f,
        [draw(0xC5, b) for b in range(n_cv)],
        [draw(0xE7A1, b) for b in range(n_eval)],
        False,
        base,
    )


def _lenet_workloads(
    names, k, n_cv, n_eval, seed, dtype, dataset, epochs, data_path, cache_dir, use_cache, progress
):
    from ..nn.data import DatasetNotFoundError, load_dataset
    from ..nn.models import make_model, worker_function
    from ..nn.training import train_classifier

    note = None
    try:
        ds = load_dataset(dataset, data_path)
    except DatasetNotFoundError as err:
        note = (
            f"{dataset} not found ({str(err).splitlines()[0]}); the classifier workloads use "
            "scikit-learn's 8x8 digits instead"
        )
        warnings.warn(note, stacklevel=3)
        ds = load_dataset("digits")
    trained = train_classifier(
        "lenet5",
        ds,
        epochs=epochs,
        seed=seed,
        cache_dir=cache_dir,
        use_cache=use_cache,
        progress=progress,
    )
    split = split_images(
        ds, trained, num_inputs=k, num_batches=n_eval, num_cv_batches=n_cv, seed=seed
    )

    def batches(x_all, y_all, idx):
        return [(jnp.asarray(x_all[i], dtype), jnp.asarray(y_all[i])) for i in idx]

    cv = batches(ds.x_train, ds.y_train, split.cv)  # held-out training images, never test ones
    ev = batches(ds.x_test, ds.y_test, split.eval)
    model_info = {
        "name": "lenet5",
        "dataset": ds.name,
        "test_accuracy": trained.test_accuracy,
        "epochs": int(epochs),
        "seed": int(seed),
        "from_cache": trained.from_cache,
        "train_time_s": trained.train_time_s,
        "images": split.record(),
    }
    out = []
    for name in names:
        output = name.split("_", 1)[1]
        f = worker_function(
            trained.apply, trained.params, output="probs" if output == "softmax" else "logits"
        )
        base_apply = _Softmax(trained.apply) if output == "softmax" else trained.apply
        base = dict(
            base_apply=base_apply,
            base_params=trained.params,
            parity_apply=_ParityNet(trained.apply, output),
            init=lambda s, ds=ds: make_model(
                "lenet5",
                input_shape=ds.x_train.shape[1:],
                num_classes=ds.num_classes,
                key=s,
            )[1],
            x_train=ds.x_train,
            info={
                "base_model": f"lenet5 on {ds.name}",
                "base_accuracy": trained.test_accuracy,
                "base_epochs": int(epochs),
                "parity_model": "lenet5",
            },
        )
        out.append(_Workload(name, f, cv, ev, True, base))
    return out, note, model_info


_ORDERED = ("GCC", "GCC-tuned", "BACC", "LCC")  # codes whose encoder depends on the input order
_FILLED = ("uncoded", "replication", "ParM")  # codes that can lose an input outright


def variant_label(code: str, *, order: str = "given", fill: str | None = None) -> str:
    """The map's name of one code variant (:data:`METRICS` ``"code labels"``).

    Example:
        >>> variant_label("GCC", order="sort"), variant_label("replication", fill="mean")
        ('GCC·sort', 'replication·mean')
        >>> variant_label("uncoded", order="spectral", fill="interpolate")
        'uncoded·interpolate·spectral'
    """
    if code in _ORDERED:
        return f"{code}·{order}"
    if fill == "interpolate":
        return f"{code}·interpolate·{order}"
    return f"{code}·{fill}"


class _Variant(NamedTuple):
    """One column of a cell: a code, the family it belongs to, its input order and fill."""

    code: AbstractCode
    family: str
    order: str
    fill: str | None


def _orders_for(g: "_Grid", wl: "_Workload") -> tuple[str, ...]:
    """The map's input orders that apply to ``wl`` (``sort`` needs scalar inputs)."""
    scalar = math.prod(wl.eval[0][0].shape[1:]) == 1
    return tuple(o for o in g.orders if scalar or o != "sort")


def _make_variants(
    g: "_Grid", orders: tuple[str, ...], n: int, s: int, lams: dict, tuned: dict, parm
) -> dict[str, _Variant]:
    """Every code of a cell in each order (GCC, GCC-tuned, BACC, LCC) or fill rule (the
    others); ``lams`` and ``tuned`` hold GCC's λs and GCC-tuned's codes per order."""
    k = g.k
    out: dict[str, _Variant] = {}
    for name in g.codes:
        if name in _ORDERED:
            if name == "LCC" and n - s < k:
                continue
            for o in orders:
                if name == "GCC":
                    lam = lams.get(o, (0.0, 0.0))
                    code = SplineCode.chebyshev(
                        num_inputs=k, num_workers=n, lam_enc=lam[0], lam_dec=lam[1]
                    )
                elif name == "GCC-tuned":
                    code = tuned[o]
                elif name == "BACC":
                    code = BerrutCode.chebyshev(num_inputs=k, num_workers=n)
                else:
                    code = LagrangeCode.chebyshev(num_inputs=k, num_workers=n, degree=1)
                out[variant_label(name, order=o)] = _Variant(code, name, o, None)
            continue
        if name == "ParM" and parm is None:
            continue
        for fill in g.fills:
            for o in orders if fill == "interpolate" else ("given",):
                if name == "uncoded":
                    code = UncodedCode(num_inputs=k, fill=fill)
                elif name == "replication":
                    code = ReplicationCode(num_inputs=k, num_workers=n, fill=fill)
                else:
                    code = dataclasses.replace(parm, fill=fill)
                out[variant_label(name, order=o, fill=fill)] = _Variant(code, name, o, fill)
    return out


class _Grid(NamedTuple):
    """The checked settings of a map: ``K``, the ``N/K`` and straggler-fraction axes, sizes."""

    k: int
    ratios: tuple[float, ...]
    fractions: tuple[float, ...]
    batches: Batches  # its worst-case batches at most its evaluation batches
    codes: tuple[str, ...]
    modes: tuple[str, ...]
    orders: tuple[str, ...]
    fills: tuple[str, ...]
    n_of: dict  # ratio -> N


class _CellTables(NamedTuple):
    """One cell's measurements per code variant: ``(mean_l2, mse, correct)`` over the random
    patterns ``(3, batches, trials)`` and the worst patterns ``(3, searched batches, 1)``."""

    codes: dict  # label -> _Variant
    rand: dict
    worst: dict
    failed: dict  # name -> [random failures, worst-case failures]
    wc_info: dict  # name -> {"exhaustive": bool, "num_evaluated": int}
    t_worst: float


def _check_grid(
    num_inputs, ratios, fractions, num_trials, num_batches, num_cv_batches, worst_case_batches,
    workloads, codes, modes, orders, fills,
) -> _Grid:  # fmt: skip
    k = as_int(num_inputs, "num_inputs", 2)
    ratios = _check_floats("ratios", ratios, 1.0, 1e6)
    batches = check_batches(num_trials, num_batches, num_cv_batches, worst_case_batches, min_cv=1)
    for name, given, allowed in (
        ("workloads", workloads, WORKLOADS),
        ("codes", codes, CODES),
        ("modes", modes, MODES),
        ("orders", orders, ORDERS),
        ("fills", fills, FILLS),
    ):
        bad = [v for v in given if v not in allowed]
        if bad or not given:
            raise ValueError(f"`{name}` must be a non-empty subset of {allowed}; got {given!r}")
    n_of = {r: int(round(r * k)) for r in ratios}
    for r, n in n_of.items():
        if n < k + 1:
            raise ValueError(f"N/K = {r} with K = {k} gives N = {n} < K + 1; raise K or the ratio")
    return _Grid(
        k=k,
        ratios=ratios,
        fractions=_check_floats("fractions", fractions, 0.0, 1.0),
        batches=batches._replace(worst_case=min(batches.worst_case, batches.evaluation)),
        codes=tuple(c for c in CODES if c in codes),
        modes=tuple(m for m in MODES if m in modes),
        orders=tuple(o for o in ORDERS if o in orders),
        fills=tuple(f for f in FILLS if f in fills),
        n_of=n_of,
    )


def _parm_record(wl: _Workload, kk: int, n: int, trained, parm_epochs: int) -> dict:
    return {
        "workload": wl.name,
        "k": kk,
        "N": n,
        **wl.parm_base["info"],
        "epochs": int(parm_epochs),
        "encoder": "sum",
        "val_recon_accuracy": trained.val_metrics[-1] if trained.val_metrics else None,
        "train_time_s": trained.train_time_s,
        "from_cache": trained.from_cache,
    }


def _train_parm(g: _Grid, wls: list, training: TrainSettings) -> tuple[dict, list[dict]]:
    """ParM's parity models, one per workload and ratio with a valid group size ``k``."""
    parm_codes: dict[tuple[str, float], Any] = {}
    parm_info = []
    if "ParM" not in g.codes:
        return parm_codes, parm_info
    for wl in wls:
        for r in g.ratios:
            kk = parm_group_size(g.k, g.n_of[r])
            if kk is None:
                continue
            b = wl.parm_base
            trained = train_parity_model(
                b["base_apply"],
                b["base_params"],
                b["x_train"],
                num_inputs=kk,
                init_params=b["init"](training.seed + kk),
                parity_apply=b["parity_apply"],
                settings=training,
            )
            parm_codes[(wl.name, r)] = GroupedParityCode(trained.code, groups=g.k // kk)
            parm_info.append(_parm_record(wl, kk, g.n_of[r], trained, training.epochs))
    return parm_codes, parm_info


def _cell_bar(g: _Grid, wls: Sequence, desc: str, progress: bool):
    """A progress bar over every cell of the map: workload × ``N/K`` × straggler fraction."""
    return tqdm(
        total=len(wls) * len(g.ratios) * len(g.fractions),
        desc=desc,
        disable=not progress,
        leave=False,
    )


class _Choices(NamedTuple):
    """What the held-out batches chose, per ``(workload, ratio, fraction)`` and input order."""

    lams: dict  # GCC's (λ_enc, λ_dec)
    tuned: dict  # GCC-tuned's code
    curves: list  # GCC's CV curves (records)
    tuning: list  # GCC-tuned's tuning runs (records)
    grids: dict  # the λ grids


def _tuning_record(wl: str, r: float, p: float, order: str, res) -> dict:
    """The record of one GCC-tuned run: where it stopped and the code it found (λs, nodes)."""
    return {
        "workload": wl,
        "ratio": r,
        "fraction": p,
        "order": order,
        "steps_run": int(res.history.train_loss.size),
        "best_step": int(res.best_step),
        "initial_val_loss": float(res.initial_val_loss),
        "best_val_loss": float(res.best_val_loss),
        "lam_enc": float(res.code.lam_enc),
        "lam_dec": float(res.code.lam_dec),
        "alpha": np.asarray(res.code.alpha).tolist(),
        "beta": np.asarray(res.code.beta).tolist(),
    }


def _node_gap(code: SplineCode) -> float:
    """Median over the inputs of the distance from ``alpha_k`` to its nearest worker node."""
    alpha, beta = np.asarray(code.alpha), np.asarray(code.beta)
    return float(np.median(np.min(np.abs(alpha[:, None] - beta[None, :]), axis=1)))


def _cross_validate(
    g: _Grid, wls: list, key: Array, lam_enc_grid, lam_dec_grid, tune_steps: int, stop, progress
) -> _Choices:
    """GCC's ``(λ_enc, λ_dec)`` per workload, cell and input order by grid search on the
    held-out batches, each in that order (:func:`gcc_jax.tuning.grid_search`, on the MSE), and
    GCC-tuned's code (:func:`gcc_jax.tuning.tune` from that choice, λs and nodes, on the same
    batches): the choices, the loss curves, the tuning runs and the grids."""
    out = _Choices({}, {}, [], [], {"lam_enc_grid": [], "lam_dec_grid": []})
    if "GCC" not in g.codes and "GCC-tuned" not in g.codes:
        return out
    bar = _cell_bar(g, wls, "GCC λ cross-validation", progress)
    with stop, bar:
        for wl in wls:
            orders = _orders_for(g, wl)
            xs = {  # (n_cv, K, ...): held-out jobs, each in the order
                o: jnp.stack([b[0][input_order(b[0], o)] for b in wl.cv]) for o in orders
            }
            for ri, r in enumerate(g.ratios):
                n = g.n_of[r]
                base = SplineCode.chebyshev(num_inputs=g.k, num_workers=n)
                for fi, p in enumerate(g.fractions):
                    for o in orders:
                        gr = grid_search(
                            base,
                            wl.f,
                            xs[o],
                            key=jax.random.fold_in(jax.random.fold_in(key, ri), fi),
                            straggler_model=StragglerModel.exact(stragglers_for(p, n)),
                            lam_enc_grid=lam_enc_grid,
                            lam_dec_grid=lam_dec_grid,
                            num_masks=g.batches.trials,
                            progress=False,
                        )
                        out.lams.setdefault((wl.name, r, p), {})[o] = (gr.lam_enc, gr.lam_dec)
                        out.grids.update(
                            lam_enc_grid=gr.lam_enc_grid.tolist(),
                            lam_dec_grid=gr.lam_dec_grid.tolist(),
                        )
                        out.curves.append(
                            {
                                "workload": wl.name,
                                "ratio": r,
                                "fraction": p,
                                "order": o,
                                "mse": gr.losses.tolist(),
                                "lam_enc": gr.lam_enc,
                                "lam_dec": gr.lam_dec,
                            }
                        )
                        if "GCC-tuned" in g.codes:
                            res = tune(
                                gr.code,
                                wl.f,
                                xs[o],
                                key=jax.random.fold_in(jax.random.fold_in(key, 1000 + ri), fi),
                                straggler_model=StragglerModel.exact(stragglers_for(p, n)),
                                steps=tune_steps,
                                num_masks=g.batches.trials,
                                progress=False,
                            )
                            out.tuned.setdefault((wl.name, r, p), {})[o] = res.code
                            out.tuning.append(_tuning_record(wl.name, r, p, o, res))
                    bar.update()
                release_compiled_programs()  # the next N shares no shapes with this one
    return out


def _worst_mask(code, c: str, s: int, k: int, yt, fx, key: Array, search: dict, info: dict):
    """The worst pattern found for code family ``c`` at ``S = s`` (``info`` accumulates the
    search's exhaustiveness and count)."""
    s_eff = min(s, code.num_workers - 2) if c != "uncoded" else min(s, k)
    if s_eff == 0:
        return np.ones(code.num_workers, bool)
    wc = worst_case_mask(code, outputs=(yt, fx), stragglers=s_eff, key=key, search=search)
    info["exhaustive"] &= bool(wc.exhaustive)
    info["num_evaluated"] += int(wc.num_evaluated)
    return wc.mask


def _measure_cell(
    g: _Grid, wl: _Workload, ri: int, fi: int, cell_codes: dict, s: int, keys, search: dict
) -> _CellTables:
    """Every code of one cell on every evaluation batch: random patterns and the worst one."""
    k_ev, k_wc = keys
    n = g.n_of[g.ratios[ri]]
    rand = {c: np.full((3, g.batches.evaluation, g.batches.trials), np.nan) for c in cell_codes}
    worst = {c: np.full((3, g.batches.worst_case, 1), np.nan) for c in cell_codes}
    failed = {c: [0, 0] for c in cell_codes}
    wc_info = {c: {"exhaustive": True, "num_evaluated": 0} for c in cell_codes}
    t_worst = 0.0
    for b, batch in enumerate(wl.eval):
        labels = batch[1] if wl.classify else jnp.full((g.k,), -1, jnp.int32)
        mkey = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(k_ev, ri), fi), b)
        masks = np.asarray(sample_masks(mkey, n, num=g.batches.trials, stragglers=s))
        perms = {v.order: input_order(batch[0], v.order) for v in cell_codes.values()}
        for c, (code, family, order, _) in cell_codes.items():
            # the metrics are means over the inputs: the permuted batch needs no reordering back
            x, lab = batch[0][perms[order]], labels[perms[order]]
            yt, fx = outputs_and_targets(code, wl.f, x)
            ev = MaskEvaluator(code, yt, (fx, lab), per_mask=regime_metrics)
            if "random" in g.modes:
                rm, ms, cor, st = ev(masks[:, : g.k] if family == "uncoded" else masks)
                rand[c][:, b] = (rm, ms, cor)
                failed[c][0] += int(np.count_nonzero(st))
            if "worst" in g.modes and b < g.batches.worst_case:
                tw = time.perf_counter()
                wkey = jax.random.fold_in(k_wc, 7919 * ri + 97 * fi + b)
                wmask = _worst_mask(code, family, s, g.k, yt, fx, wkey, search, wc_info[c])
                # tiled to the trials' shape: reuses the compiled decode
                tiled = np.broadcast_to(wmask, (g.batches.trials, code.num_workers))
                rm, ms, cor, st = (a[:1] for a in ev(tiled))
                worst[c][:, b] = (rm, ms, cor)
                failed[c][1] += int(np.count_nonzero(st))
                t_worst += time.perf_counter() - tw
    return _CellTables(cell_codes, rand, worst, failed, wc_info, t_worst)


def _rmse_stat(ms: np.ndarray) -> dict:
    """√MSE with the square roots of the MSE's CI ends (half their distance as ``ci95``)."""
    m, ci = mean_ci(ms)
    if not np.isfinite(ci):
        return {"mean": math.sqrt(m), "ci95": ci}
    lo, hi = math.sqrt(max(m - ci, 0.0)), math.sqrt(m + ci)
    return {"mean": math.sqrt(m), "ci95": (hi - lo) / 2, "low": lo, "high": hi}


def _cell_records(
    g: _Grid, wl: _Workload, r: float, p: float, s: int, lams: dict, t: _CellTables
) -> list[dict]:
    """The JSON records of one cell, one per straggler mode: every code variant's row and the
    winners per metric."""
    out = []
    for mode, tabs, fi_ in (("random", t.rand, 0), ("worst", t.worst, 1)):
        if mode not in g.modes:
            continue
        rows, ok_mse, ok_l2, ok_acc = {}, {}, {}, {}
        for c, v in t.codes.items():
            if t.failed[c][fi_]:
                rows[c] = {"num_failed": t.failed[c][fi_], "applicable": False}
                continue
            l2, ms, cor = tabs[c]
            row = {
                "family": v.family,
                "order": v.order,
                "fill": v.fill,
                "mse": _stat(ms),
                "rmse": _rmse_stat(ms),
                "mean_l2": _stat(l2),
                "num_failed": 0,
                "applicable": True,
                "accuracy": _stat(cor / g.k) if wl.classify else None,
            }
            if v.family == "GCC":
                lam = lams.get(v.order, (0.0, 0.0))
                row.update(lam_enc=lam[0], lam_dec=lam[1])
            if v.family == "GCC-tuned":
                row.update(
                    lam_enc=float(v.code.lam_enc),
                    lam_dec=float(v.code.lam_dec),
                    node_gap=_node_gap(v.code),
                )
            if v.family == "ParM":
                row["k"] = v.code.parity.num_inputs
            if mode == "worst":
                row.update(t.wc_info[c])
            rows[c] = row
            ok_mse[c], ok_l2[c] = ms, l2
            if wl.classify:
                ok_acc[c] = cor / g.k
        out.append(
            {
                "workload": wl.name,
                "mode": mode,
                "ratio": r,
                "N": g.n_of[r],
                "K": g.k,
                "fraction": p,
                "S": s,
                "codes": rows,
                "winner": {
                    "mse": pick_winner(ok_mse),
                    "mean_l2": pick_winner(ok_l2),
                    "accuracy": pick_winner(ok_acc, higher_is_better=True) if wl.classify else None,
                },
            }
        )
    return out


def _localization_workload(k, n_cv, n_eval, seed, dtype, epochs, cache_dir, use_cache, progress):
    """The localization workload: the localizer of :mod:`gcc_jax.experiments._localizer`
    (trained or loaded from the cache); λ's CV batches are held-out images it was not trained
    on, the evaluation batches test images
    (:meth:`~gcc_jax.experiments._localizer.Localizer.split`)."""
    settings = LocalizerSettings(epochs=int(epochs), seed=int(seed))
    loc = train_localizer(settings, cache_dir=cache_dir, use_cache=use_cache, progress=progress)
    split = loc.split(num_inputs=k, num_batches=n_eval, num_cv_batches=n_cv, seed=seed)
    info = {**loc.record, "images": split.record()}

    def batches(x_all, idx):
        return [(jnp.asarray(x_all[i], dtype), None) for i in idx]

    base = dict(
        base_apply=loc.apply,
        base_params=loc.params,
        parity_apply=_ParityNet(loc.apply, "box"),
        init=lambda s: localizer_model(s)[1],
        x_train=loc.data.x_train[: settings.num_train],
        info={
            "base_model": "small CNN localizer",
            "base_accuracy": None,
            "base_test_mse": info["test_mse"],
            "base_mean_iou": info["mean_iou"],
            "base_epochs": int(epochs),
            "parity_model": "small CNN",
        },
    )
    cv = batches(loc.data.x_train, split.cv)  # held out from training
    ev = batches(loc.data.x_test, split.eval)
    return _Workload("localization", loc.worker_fn(), cv, ev, False, base), info


def _load_workloads(
    g: _Grid, workloads, seed, dtype, dataset, epochs, data_path, cache_dir, use_cache, progress
) -> tuple[list, str | None, dict | None]:
    """The workloads (synthetic ones, the localizer's and the LeNet-5's), the data note and
    the model records."""
    wls, note, models = [], None, {"lenet5": None}
    for name in workloads:
        if name in _SYNTHETIC:
            wls.append(
                _synthetic_workload(name, g.k, g.batches.cv, g.batches.evaluation, seed, dtype)
            )
        if name == "localization":
            wl, info = _localization_workload(
                g.k, g.batches.cv, g.batches.evaluation, seed, dtype, epochs, cache_dir, use_cache,
                progress,
            )  # fmt: skip
            wls.append(wl)
            models["localizer"] = info
    net_names = [w for w in workloads if w.startswith("lenet_")]
    if net_names:
        nets, note, models["lenet5"] = _lenet_workloads(
            net_names, g.k, g.batches.cv, g.batches.evaluation, seed, dtype, dataset, epochs,
            data_path, cache_dir, use_cache, progress,
        )  # fmt: skip
        wls += nets
    return wls, note, models


def run_regimes(
    *,
    num_inputs: int = 20,
    ratios: Sequence[float] = DEFAULTS["ratios"],
    fractions: Sequence[float] = DEFAULTS["fractions"],
    workloads: Sequence[str] = WORKLOADS,
    codes: Sequence[str] = DEFAULTS["codes"],
    modes: Sequence[str] = MODES,
    orders: Sequence[str] = DEFAULTS["orders"],
    fills: Sequence[str] = FILLS,
    num_trials: int = 10,
    num_batches: int = 3,
    num_cv_batches: int = 3,
    worst_case_batches: int = 1,
    lam_enc_grid: Sequence[float] | None = None,
    lam_dec_grid: Sequence[float] | None = None,
    search: dict | None = None,
    dataset: str = "fashion_mnist",
    epochs: int = 10,
    parm_epochs: int = 10,
    tune_steps: int = 100,
    data_path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Build the regime map (module docstring) as an :class:`~gcc_jax.experiments.ExperimentResult`.

    Args:
        num_inputs: ``K`` inputs per coded computation.
        ratios: redundancies ``N/K``; ``N = round(ratio·K)``.
        fractions: straggler fractions ``p`` (``S`` from :func:`stragglers_for`).
        workloads: a subset of :data:`WORKLOADS`.
        codes: a subset of :data:`CODES` (default all but ``GCC-tuned``).
        modes: a subset of :data:`MODES`.
        orders: input orders (a subset of :data:`ORDERS`) of GCC, BACC, LCC and of the
            interpolating fill; ``sort`` is skipped for inputs of more than one number.
        fills: fill rules (a subset of :data:`FILLS`) of uncoded, replication and ParM.
        num_trials: random patterns per batch and cell.
        num_batches: evaluation input batches.
        num_cv_batches: held-out batches for GCC's λ cross-validation.
        worst_case_batches: evaluation batches searched for the worst case (the first ones).
        lam_enc_grid, lam_dec_grid: GCC's λ candidates (default: those of
            :func:`gcc_jax.tuning.grid_search`, ``λ_enc ∈ {0, 10⁻¹⁰, …, 10⁻²}``,
            ``λ_dec ∈ {0, 10⁻¹⁰, …, 10⁰}`` — from interpolation to the straight-line fit).
        search: worst-case search budget (default :data:`REGIMES_SEARCH`).
        dataset: the classifier's data set (digits when it is absent, with a note).
        epochs: LeNet-5 training epochs (seeded, cached).
        parm_epochs: parity-model training epochs (cached).
        tune_steps: gradient steps of GCC-tuned per cell and order (at most; it stops early
            when its validation loss stops improving).
        data_path, cache_dir, use_cache: data and checkpoint locations.
        seed: seeds data draws, training, patterns and searches.
        progress: progress bars.

    Returns:
        An :class:`~gcc_jax.experiments.ExperimentResult` (its ``results``: module docstring).
    """
    t_start = time.perf_counter()
    g = _check_grid(
        num_inputs, ratios, fractions, num_trials, num_batches, num_cv_batches,
        worst_case_batches, workloads, codes, modes, orders, fills,
    )  # fmt: skip
    search = dict(REGIMES_SEARCH if search is None else search)
    warn_float32("run_regimes in float32: enable x64 for spline solves with λ > 0")
    dtype = jnp.zeros(()).dtype

    t0 = time.perf_counter()
    wls, note, models = _load_workloads(
        g, workloads, seed, dtype, dataset, epochs, data_path, cache_dir, use_cache, progress
    )
    t_model = time.perf_counter() - t0

    t0 = time.perf_counter()
    training = TrainSettings(
        parm_epochs, seed=seed, cache_dir=cache_dir, use_cache=use_cache, progress=progress
    )
    parm_codes, parm_info = _train_parm(g, wls, training)
    t_parm = time.perf_counter() - t0

    k_cv, k_ev, k_wc = jax.random.split(jax.random.key(seed), 3)
    t0 = time.perf_counter()
    stop = StopOnInterrupt()  # Ctrl-C: keep the CV curves and the cells finished
    tune_steps = as_int(tune_steps, "tune_steps", 1)
    chosen = _cross_validate(g, wls, k_cv, lam_enc_grid, lam_dec_grid, tune_steps, stop, progress)
    t_cv = time.perf_counter() - t0

    t0 = time.perf_counter()
    t_worst = 0.0
    cells = []
    bar = _cell_bar(g, wls, "regime cells", progress)
    with stop, bar:
        for wl in wls if not stop.interrupted else ():
            for ri, r in enumerate(g.ratios):
                n = g.n_of[r]
                for fi, p in enumerate(g.fractions):
                    s = stragglers_for(p, n)
                    lam = chosen.lams.get((wl.name, r, p), {})
                    tuned = chosen.tuned.get((wl.name, r, p), {})
                    parm = parm_codes.get((wl.name, r))
                    cell_codes = _make_variants(g, _orders_for(g, wl), n, s, lam, tuned, parm)
                    tables = _measure_cell(g, wl, ri, fi, cell_codes, s, (k_ev, k_wc), search)
                    t_worst += tables.t_worst
                    cells += _cell_records(g, wl, r, p, s, lam, tables)
                    bar.update()
                release_compiled_programs()  # the next N shares no shapes with this one
    t_eval = time.perf_counter() - t0 - t_worst

    config = {
        "interrupted": stop.interrupted,
        "num_inputs": g.k,
        "ratios": list(g.ratios),
        "num_workers": [g.n_of[r] for r in g.ratios],
        "fractions": list(g.fractions),
        "modes": list(g.modes),
        "workloads": [w.name for w in wls],
        "codes": list(g.codes),
        "orders": list(g.orders),
        "fills": list(g.fills),
        "rank_by": "mse",
        "num_trials": g.batches.trials,
        "num_batches": g.batches.evaluation,
        "num_cv_batches": g.batches.cv,
        "worst_case_batches": g.batches.worst_case,
        **chosen.grids,
        "search": search,
        "dataset": dataset,
        "epochs": int(epochs),
        "parm_epochs": int(parm_epochs),
        "tune_steps": tune_steps,
        "dtype": str(dtype),
    }
    results = json_clean(
        {
            "data_note": note,
            "models": {**models, "parm": parm_info},
            "cells": cells,
            "cv": chosen.curves,
            "tuning": chosen.tuning,
        }
    )
    results["summary"] = summarise({"config": config, **results})
    timing = {
        "models": t_model,
        "parm_training": t_parm,
        "cross_validation": t_cv,
        "evaluation": t_eval,
        "worst_case": t_worst,
    }
    return stop.finish(
        ExperimentResult.of_run(
            "regimes", json_clean(config), seed, METRICS, results, t_start=t_start, phases=timing
        )
    )


run = run_regimes


# -- reporting -----------------------------------------------------------------------------------

_METRIC_WORDS = {"mse": "MSE", "mean_l2": "mean L2 error", "accuracy": "accuracy"}
_RANKED = ("mse", "mean_l2", "accuracy")  # RMSE = √MSE ranks as MSE does


def _margin_text(w: dict, metric: str) -> str:
    if w["runner_up"] is None:
        return "the only applicable code"
    if w["tie"]:
        return "exact tie"
    unit = " points" if metric == "accuracy" else "%"
    sig = "" if w["significant"] else ", not significant"
    return f"{w['margin']:.0f}{unit} ahead of {w['runner_up']}{sig}"


def _winner_label(w: dict | None) -> str:
    if w is None:
        return "—"
    if not w["tie"]:
        return w["code"]
    tied = w.get("tied") or [w["code"], w["runner_up"]]
    return "=".join(tied) if len(tied) <= 3 else f"{len(tied)}-way tie"


def _family(label: str) -> str:
    return label.split("·", 1)[0]


def _best_of(codes: dict, family: str, metric: str) -> tuple[str, dict] | None:
    """The best applicable variant of ``family`` in a cell by ``metric``, with its row."""
    rows = [
        (c, r)
        for c, r in codes.items()
        if r and r.get("applicable") and r.get("family") == family and r.get(metric)
    ]
    if not rows:
        return None
    sign = -1.0 if metric == "accuracy" else 1.0
    return min(rows, key=lambda t: sign * t[1][metric]["mean"])


def _range(values: list[float]) -> str:
    v = np.asarray(values)
    if v.size == 1:
        return f"{v[0]:.3g}x"
    return f"{v.min():.3g}-{v.max():.3g}x (median {np.median(v):.3g}x)"


def _gain_over(codes: dict, family: str, ref: str, metric: str, into: dict) -> None:
    """Append ``error(ref) / error(label)`` for every other applicable label of ``family``."""
    base = codes.get(ref)
    if not (base and base.get("applicable")) or base[metric]["mean"] <= 0:
        return
    for label, row in codes.items():
        if label != ref and row and row.get("applicable") and row.get("family") == family:
            if row[metric]["mean"] > 0:
                into.setdefault(label, []).append(base[metric]["mean"] / row[metric]["mean"])


def _order_and_fill_lines(cells: list, metric: str) -> list[str]:
    """GCC's error in the order drawn over each other order's, and each fill rule's error
    over the zero fill's, as ranges over the cells."""
    lines = []
    if metric == "accuracy":
        return lines
    gains: dict[str, list[float]] = {}
    fills: dict[str, list[float]] = {}
    for c in cells:
        for fam in ("GCC", "BACC", "LCC"):
            _gain_over(c["codes"], fam, f"{fam}·given", metric, gains)
        for fam in _FILLED:
            _gain_over(c["codes"], fam, f"{fam}·zero", metric, fills)
    if gains:
        parts = [f"{label} {_range(v)}" for label, v in gains.items()]
        lines.append(
            f"  order gain (error in the order drawn / error in this order): {'; '.join(parts)}."
        )  # noqa: E501
    if fills:
        parts = [f"{label} {_range(v)}" for label, v in fills.items()]
        lines.append(
            f"  fill gain (error with zero fill / error with this fill): {'; '.join(parts)}."
        )  # noqa: E501
    return lines


def summarise(result: dict) -> list[str]:
    """Plain-language lines: per workload, straggler model and metric, who wins where.

    For each redundancy the fractions are grouped into runs with the same winning code label
    ("at N/K = 1.25: GCC·sort for p ≤ 10% (...), replication·interpolate·sort for p ≥ 20% ...");
    then how many cells each code family wins, in how many cells the best variant of every
    other family beats GCC's best order, how far GCC's best is from the winner where it loses,
    and what the input order (GCC, BACC, LCC) and the fill rule (uncoded, replication, ParM)
    change.
    """
    lines = []
    cfg = result["config"]
    by = {}
    for cell in result["cells"]:
        by.setdefault((cell["workload"], cell["mode"]), []).append(cell)
    for (wl, mode), cells in by.items():
        for metric in _RANKED:
            if cells[0]["winner"].get(metric) is None:
                continue
            head = f"{wl}, {mode} stragglers, {_METRIC_WORDS[metric]}:"
            parts = []
            wins: dict[str, int] = {}
            beat_gcc = {c: [0, 0] for c in CODES if c != "GCC"}  # [beats GCC, compared]
            rel: list[float] = []
            exact_wins = 0
            for r in cfg["ratios"]:
                row = [c for c in cells if c["ratio"] == r]
                runs = []
                for c in row:
                    w = c["winner"][metric]
                    label = _winner_label(w)
                    fam = "=".join(dict.fromkeys(_family(t) for t in label.split("=")))
                    wins[fam] = wins.get(fam, 0) + 1
                    codes = c["codes"]
                    g = _best_of(codes, "GCC", metric)
                    if g:
                        gv = g[1][metric]["mean"]
                        if metric != "accuracy" and w and _family(w["code"]) != "GCC":
                            if _exact(w["value"], gv):
                                exact_wins += 1
                            else:
                                rel.append(gv / w["value"])
                        for other in beat_gcc:
                            o = _best_of(codes, other, metric)
                            if o:
                                ov = o[1][metric]["mean"]
                                better = ov > gv if metric == "accuracy" else ov < gv
                                beat_gcc[other][0] += int(better)
                                beat_gcc[other][1] += 1
                    if runs and runs[-1][0] == label:
                        runs[-1][1].append(c)
                    else:
                        runs.append((label, [c]))
                texts = []
                for label, rc in runs:
                    lo, hi = rc[0]["fraction"], rc[-1]["fraction"]
                    span = (
                        f"p = {100 * lo:g}%" if lo == hi else f"{100 * lo:g}% ≤ p ≤ {100 * hi:g}%"
                    )
                    ws = [c["winner"][metric] for c in rc]
                    if any(w is None for w in ws):
                        texts.append(f"{span}: no applicable code")
                        continue
                    detail = "; ".join(
                        f"S={c['S']} {_margin_text(c['winner'][metric], metric)}" for c in rc
                    )
                    texts.append(f"{label} for {span} ({detail})")
                n = row[0]["N"] if row else "?"
                parts.append(f"  at N/K = {r:g} (N = {n}): " + ", ".join(texts))
            always = _uniform_tail(cfg["ratios"], cells, metric)
            lines.append(head)
            lines += parts
            tally = ", ".join(f"{c} {v}" for c, v in sorted(wins.items(), key=lambda t: -t[1]))
            lines.append(f"  cells won (by code family, any order or fill): {tally}.")
            if always:
                lines.append(f"  {always}")
            versus = [f"{c} in {b} of {n}" for c, (b, n) in beat_gcc.items() if n]
            if versus:
                lines.append(
                    f"  better than GCC (best variant against GCC's best order): "
                    f"{', '.join(versus)} cells where both apply."
                )
            if rel:
                lines.append(
                    f"  where another code wins with an error above round-off, GCC's best "
                    f"{_METRIC_WORDS[metric]} is {min(rel):.3g}-{max(rel):.3g}x the winner's."
                )
            if exact_wins:
                lines.append(
                    f"  in {exact_wins} cells an exact code wins (error at round-off: every "
                    "result arrived or was recovered exactly) while GCC approximates."
                )
            lines += _order_and_fill_lines(cells, metric)
    return lines


def _exact(value: float, reference: float) -> bool:
    """A winner's error at round-off level next to GCC's (``≤ 1e-9`` of it, or zero)."""
    return value <= 1e-9 * max(reference, 0.0)


def _uniform_tail(ratios: list, cells: list, metric: str) -> str | None:
    """ "from N/K ≥ r every cell is won by X" for the smallest such r, if any."""
    winners = {}
    for r in ratios:
        labels = {_winner_label(c["winner"][metric]) for c in cells if c["ratio"] == r}
        winners[r] = labels
    tail = None
    for r in sorted(ratios, reverse=True):
        labels = winners[r]
        if len(labels) != 1:
            break
        (label,) = labels
        if tail is not None and tail[1] != label:
            break
        tail = (r, label)
    if tail is None:
        return None
    return f"from N/K ≥ {tail[0]:g} {tail[1]} wins every straggler fraction."


def _value_table(cells: list, cfg: dict, metric: str) -> list[str]:
    """Mean ± CI of every code label, one row per label, one column per cell."""
    labels = list(dict.fromkeys(label for c in cells for label in c["codes"]))
    heads = [f"N/K={c['ratio']:g},p={100 * c['fraction']:g}%" for c in cells]
    width = max(22, *(len(h) + 2 for h in heads))
    out = [f"{'':<32}" + "".join(f"{h:>{width}}" for h in heads)]
    for label in labels:
        vals = []
        for c in cells:
            row = c["codes"].get(label)
            if not row or not row.get("applicable") or not row.get(metric):
                vals.append("—")
                continue
            m, ci = row[metric]["mean"], row[metric]["ci95"]
            text = f"{m:.3g} ± {ci:.2g}" if ci is not None and ci == ci else f"{m:.3g}"
            vals.append(_bound_mark(row, metric) + text)
        out.append(f"{label:<32}" + "".join(f"{v:>{width}}" for v in vals))
    return out


def _bound_mark(row: dict, metric: str) -> str:
    """``"≥ "`` before a worst-case error that is a lower bound (the heuristic search's: the true
    worst case may be larger), ``"≤ "`` before such an accuracy, else nothing."""
    if row.get("exhaustive", True):
        return ""
    return "≤ " if metric == "accuracy" else "≥ "


def format_regimes(result: ExperimentResult) -> str:
    """Winner tables (rows: straggler fraction, columns: N/K) per metric, every code label's
    MSE, RMSE, mean L2 error (and accuracy) with CIs, and the plain-language summary."""
    result = _view(result)
    cfg = result["config"]
    lines = [
        f"regime map: K = {cfg['num_inputs']}, {cfg['num_batches']} batches × "
        f"{cfg['num_trials']} random patterns per cell (worst case: "
        f"{cfg['worst_case_batches']} batch(es)); GCC λ by CV on the MSE of "
        f"{cfg['num_cv_batches']} held-out batches per input order; {cfg['dtype']}",
        f"orders: {', '.join(cfg.get('orders', ['given']))}; fill rules of uncoded, replication "
        f"and ParM: {', '.join(cfg.get('fills', ['zero']))} (a lost input's estimate: zero = 0, "
        "mean = the batch's mean result, interpolate = between the nearest results in the order)",
    ]
    if cfg.get("interrupted"):
        lines.append("INTERRUPTED (Ctrl-C): only the cells finished are below.")
    if result.get("data_note"):
        lines.append(f"NOTE: {result['data_note']}")
    lenet = result["models"].get("lenet5")
    if lenet:
        lines.append(
            f"LeNet-5 on {lenet['dataset']}: test accuracy {lenet['test_accuracy']:.4f} after "
            f"{lenet['epochs']} epochs (seed {lenet['seed']})"
        )
    loc = result["models"].get("localizer")
    if loc:
        lines.append(
            f"localizer ({loc['name']}) on {loc['dataset']}: test box MSE {loc['test_mse']:.4g}, "
            f"mean IoU {loc['mean_iou']:.3f} on {loc['num_test']} test images after "
            f"{loc['epochs']} epochs on {loc['num_train']} images (seed {loc['seed']})"
        )
    for pm in result["models"].get("parm", []):
        acc = pm["base_accuracy"]
        lines.append(
            f"ParM {pm['workload']} k={pm['k']} (N={pm['N']}): parity model {pm['parity_model']}, "
            f"{pm['epochs']} epochs, held-out degraded-mode argmax agreement "
            f"{pm['val_recon_accuracy'] if pm['val_recon_accuracy'] is None else round(pm['val_recon_accuracy'], 4)}; "  # noqa: E501
            f"base {pm['base_model']}"
            + ("" if acc is None else f" (accuracy {acc:.4f}, {pm['base_epochs']} epochs)")
        )
    by = {}
    for cell in result["cells"]:
        by.setdefault((cell["workload"], cell["mode"]), []).append(cell)
    width = 34
    for (wl, mode), cells in by.items():
        for metric in _RANKED:
            if cells[0]["winner"].get(metric) is None:
                continue
            lines += ["", f"{wl} — {mode} stragglers — winner by {metric} (margin vs runner-up)"]
            lines.append(
                f"{'p':<8}" + "".join(f"{'N/K=' + format(r, 'g'):>{width}}" for r in cfg["ratios"])
            )
            for p in cfg["fractions"]:
                row = []
                for r in cfg["ratios"]:
                    c = next(c for c in cells if c["ratio"] == r and c["fraction"] == p)
                    w = c["winner"][metric]
                    if w is None:
                        row.append("—")
                    elif w["tie"] or w["margin"] is None:
                        row.append(_winner_label(w))
                    else:
                        unit = "pt" if metric == "accuracy" else "%"
                        star = "" if w["significant"] else "?"
                        row.append(f"{w['code']} {w['margin']:.0f}{unit}{star}")
                    if w is not None and _bound_mark(c["codes"].get(w["code"]) or {}, metric):
                        row[-1] += "†"
                lines.append(f"{100 * p:<7g}%" + "".join(f"{v:>{width}}" for v in row))
        for metric in ("mse", "rmse", "mean_l2", "accuracy"):
            if metric == "accuracy" and cells[0]["winner"].get("accuracy") is None:
                continue
            lines += ["", f"{wl} — {mode} stragglers — {metric} (mean ± 95% CI half-width)"]
            lines += _value_table(cells, cfg, metric)
    lines += [
        "",
        "(? = the 95% CI of the margin includes a tie; worst case: ≥ / ≤ = a lower bound on the "
        "error / upper bound on the accuracy from the heuristic search, exact otherwise; † = the "
        "winner's worst case is such a bound, so its true worst case may be worse and the win is "
        "not established)",
        "",
        "summary:",
    ]
    lines += result.get("summary", [])
    return "\n".join(lines)


report = format_regimes


_CODE_COLORS = CODE_COLORS | {"LCC": "C4", "GCC-tuned": "C9"}


def plot_regimes(result: ExperimentResult) -> dict[str, Any]:
    """One heat-map figure per workload (``regimes_<workload>``): winner (colour: its code
    family; text: its label and margin) over N/K × p.

    Panels: rows are the straggler models, columns the winner by MSE, by mean L2 error, GCC's
    best MSE relative to the winner's (log colour scale; 1 = GCC wins) and, for classifiers,
    the winner by accuracy. On the ratio panel a cell an exact code wins (ratio ∞) is grey, the
    colour bar's "over" end, never the colour of the largest finite ratio.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap, LogNorm

    result = _view(result)
    cfg = result["config"]
    ratios, fractions = cfg["ratios"], cfg["fractions"]
    figures = {}
    for wl in cfg["workloads"]:
        cells = [c for c in result["cells"] if c["workload"] == wl]
        modes = [m for m in cfg["modes"] if any(c["mode"] == m for c in cells)]
        classify = any(c["winner"].get("accuracy") is not None for c in cells)
        panels = ["mse", "mean_l2", "gcc_rel"] + (["accuracy"] if classify else [])
        fig, axes = new_figure(
            len(modes), len(panels), squeeze=False, figsize=(4.6 * len(panels), 3.6 * len(modes))
        )
        cmap = ListedColormap([_CODE_COLORS[c] for c in CODES])
        for i, mode in enumerate(modes):
            note = ""
            if mode == "worst":
                exact = all(
                    row.get("exhaustive", True)
                    for c in cells
                    if c["mode"] == "worst"
                    for row in c["codes"].values()
                    if row
                )
                note = " (all patterns)" if exact else " (worst found: lower bounds)"
            for j, panel in enumerate(panels):
                ax = axes[i, j]
                grid = np.full((len(fractions), len(ratios)), np.nan)
                text = [["" for _ in ratios] for _ in fractions]
                for c in cells:
                    if c["mode"] != mode:
                        continue
                    y, x = fractions.index(c["fraction"]), ratios.index(c["ratio"])
                    if panel == "gcc_rel":
                        w = c["winner"]["mse"]
                        g = _best_of(c["codes"], "GCC", "mse")
                        if not (w and g):
                            continue
                        gv = g[1]["mse"]["mean"]
                        if not _exact(w["value"], gv):
                            grid[y, x] = gv / w["value"]
                            text[y][x] = f"{grid[y, x]:.2g}"
                        elif gv > 0:  # an exact code wins; GCC approximates
                            grid[y, x] = np.inf
                            text[y][x] = "∞\n(exact\nwinner)"
                        else:
                            grid[y, x] = 1.0
                            text[y][x] = "1"
                        continue
                    w = c["winner"][panel]
                    if w is None:
                        continue
                    grid[y, x] = CODES.index(_family(w["code"]))
                    margin = (
                        ""
                        if w["margin"] is None
                        else (
                            f"\n{w['margin']:.0f}{'pt' if panel == 'accuracy' else '%'}"
                            + ("" if w["significant"] else "?")
                        )
                    )
                    label = _winner_label(w).replace("=", "=\n").replace("·", "\n")
                    text[y][x] = ("tie:\n" + label) if w["tie"] else label + margin
                if panel == "gcc_rel":
                    # an exact winner (ratio ∞) gets the colour map's "over" colour, grey,
                    # apart from every finite ratio
                    finite = grid[np.isfinite(grid)]
                    hi = max(float(finite.max()) if finite.size else 2.0, 2.0)
                    infinite = np.isposinf(grid)
                    grid = np.where(infinite, 10.0 * hi, grid)
                    rel_cmap = plt.get_cmap("magma_r").with_extremes(over="0.8")
                    im = ax.imshow(
                        grid,
                        origin="lower",
                        aspect="auto",
                        cmap=rel_cmap,
                        norm=LogNorm(vmin=min(1.0, float(finite.min()) if finite.size else 1.0),
                                     vmax=hi),
                    )  # fmt: skip
                    bar = fig.colorbar(
                        im, ax=ax, fraction=0.046, extend="max" if infinite.any() else "neither"
                    )
                    bar.set_label("GCC's best MSE / best MSE (1 = GCC best)", fontsize=8)
                    ax.set_title(f"{mode}: GCC's best MSE / best MSE{note}", fontsize=9)
                else:
                    im = ax.imshow(
                        grid,
                        origin="lower",
                        aspect="auto",
                        cmap=cmap,
                        vmin=-0.5,
                        vmax=len(CODES) - 0.5,
                    )
                    ax.set_title(f"{mode}: winner by {_METRIC_WORDS[panel]}{note}", fontsize=9)
                annotate_cells(ax, grid, text, im)
                ax.set_xticks(range(len(ratios)))
                ax.set_xticklabels([f"{r:g}" for r in ratios])
                ax.set_yticks(range(len(fractions)))
                ax.set_yticklabels([f"{100 * p:g}%" for p in fractions])
                ax.set_xlabel("N/K")
                ax.set_ylabel("stragglers p")
        handles = [plt.Rectangle((0, 0), 1, 1, color=_CODE_COLORS[c]) for c in CODES]
        fig.legend(handles, CODES, loc="lower center", ncol=len(CODES), fontsize=8)
        fig.suptitle(
            f"{wl}: K = {cfg['num_inputs']}; colour = winning code family, text = its order or "
            "fill and margin over the runner-up (? = CI includes a tie)",
            fontsize=10,
        )
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        figures[f"regimes_{wl}"] = fig
    return figures


def save_regimes(result: ExperimentResult, out: str | Path) -> dict[str, Path]:
    """Write ``regimes.json``, ``regimes.txt`` and one ``regimes_<workload>.png`` per workload."""
    return save_result(result, out, summary=format_regimes(result), figures=plot_regimes(result))


save = save_regimes
