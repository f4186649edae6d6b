"""Coded inference of a neural network (LeTCC §5): GCC versus BACC versus uncoded, by S.

Protocol (LeTCC §5, method-notes §1.9–1.10):

* **Worker function.** ``f(x) = softmax(apply(params, x))``: a classifier trained by
  :func:`gcc_jax.training.train_classifier` (or loaded from its cache); the worker output is the
  softmax vector (``m`` = number of classes).
* **Batches.** The test split is shuffled with the seed
  (``np.random.default_rng((seed, 0xD1A)).permutation``); the first ``num_cv_batches·K`` images
  form the *cross-validation* batches, the next ``num_batches·K`` the *evaluation* batches
  (disjoint: λ is never chosen on the images it is scored on). Each batch of ``K`` images is one
  coded computation over ``N`` workers.
* **Straggler sets.** For every ``S`` and every batch, ``num_trials`` patterns with exactly ``S``
  dead workers, uniformly at random: with ``(k_cv, k_eval, k_worst) = split(key(seed), 3)``,
  batch ``b``'s patterns are ``sample_masks(fold_in(fold_in(k_eval, S), b), N,
  num=num_trials, stragglers=S)`` (``k_cv`` for the CV batches), so adding an ``S`` value or a
  code changes no other pattern. GCC, BACC and replication (all on ``N`` workers) see the same
  patterns; uncoded runs on ``K`` of the ``N`` machines (worker ``k`` computes ``f(x_k)``) and
  reads its stragglers from the first ``K`` entries of the same pattern, so it loses on average
  ``S·K/N`` results. A missing result is reported as the code's ``fill_value`` (0): it enters
  RMSE/MSE as the error ``‖f(x_k)‖`` and counts as a wrong prediction in the accuracies.
* **GCC's λ.** ``(λ_enc, λ_dec)`` for each ``S`` is the point of the grid
  ``lam_enc_grid × lam_dec_grid`` with the lowest mean RMSE on the CV batches (their own random
  patterns); ties go to the earlier grid point.
* **Worst case.** Where affordable (``worst_case=True``), :func:`gcc_jax.worst_case_mask` finds,
  for each code, ``S`` and each of the first ``worst_case_batches`` evaluation batches, the
  pattern of ``S`` stragglers with the largest MSE (exhaustive when ``C(N, S)`` is small, else a
  local search whose loss is a lower bound); the metrics at that pattern are reported. Uncoded's
  adversary kills ``min(S, K)`` of its ``K`` workers.

Metrics (:mod:`gcc_jax._metrics`, public as ``gcc.rmse``, ``gcc.mse``, ``gcc.rel_acc``), per
trial (one batch and one pattern) with ``ŷ_k`` the decoded estimate of ``f(x_k)``:

* ``rmse`` = ``(1/K) Σ_k ‖f(x_k) − ŷ_k‖₂`` (the paper's RMSE), ``mse`` = ``(1/K) Σ_k ‖·‖₂²``;
* ``accuracy`` = fraction of ``argmax ŷ_k`` equal to the true label (missing = wrong);
* ``rel_acc_labels`` = decoded accuracy / base-model accuracy on the same images (pooled over
  trials); ``rel_acc_base`` = agreement of ``argmax ŷ_k`` with the base model's ``argmax f(x_k)``.

Every value comes with a 95% confidence half-width (``ci95``) from :func:`gcc_jax.mean_ci` /
:func:`gcc_jax.ratio_ci`, treating batches as clusters of trials (Student t, ``batches − 1``
degrees of freedom).

``results.json`` schema (``"schema": "gcc_jax.dnn/1"``; NaN is written as ``null``)::

    {
      "schema": "gcc_jax.dnn/1", "experiment": "dnn",
      "config": {dataset, model, num_workers, num_inputs, stragglers: [S...], num_trials,
                 num_batches, num_cv_batches, codes: [...], lam_enc_grid, lam_dec_grid,
                 worst_case, worst_case_batches, search: {...}, training: {...}, seed, dtype},
      "model": {name, dataset, test_accuracy, num_params, from_cache, train_time_s},
      "base": {accuracy, num_images},          # base model on the evaluation images
      "images": {"cv": [[i...]...], "eval": [[i...]...]},   # test-split indices per batch
      "results": {CODE: [{"S": S,
                          "rmse" | "mse" | "accuracy" | "rel_acc_labels" | "rel_acc_base":
                              {"mean": float, "ci95": float},
                          "num_trials": int, "num_failed": int,
                          "lam_enc": float, "lam_dec": float,       # GCC only
                          "worst_case": null | {"rmse", "mse", "accuracy", "rel_acc_labels",
                                                "rel_acc_base": {"mean", "ci95"},
                                                "exhaustive": bool, "num_evaluated": int}},
                         ...one row per S]},
      "gcc_vs_bacc": [{"S", "rmse_ratio": {"mean", "ci95"}, "rmse_gain_percent"}],
      "cv": {"stragglers": [S...], "lam_enc_grid", "lam_dec_grid",
             "rmse": [[[...]]]}                 # [S][enc][dec] mean CV RMSE
      "timing_s": {training, cross_validation, evaluation, worst_case, total},
      "versions": {gcc_jax, jax, flax, optax}
    }

``CODE`` is one of ``"GCC"``, ``"BACC"``, ``"uncoded"``, ``"replication"``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
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
from tqdm.auto import tqdm

from .._metrics import mean_ci, mse, ratio_ci, rmse
from .._status import describe_status
from .._stragglers import sample_masks
from .._types import Array, ArrayLike, Bool, Float, Int
from .._worst_case import worst_case_mask
from ..codes import BerrutCode, ReplicationCode, SplineCode, UncodedCode
from ..data import Dataset, load_dataset
from ..models import count_params
from ..training import TrainedModel, train_classifier

__all__ = [
    "CODES",
    "DEFAULT_LAM_DEC_GRID",
    "DEFAULT_LAM_ENC_GRID",
    "METRICS",
    "PatternMetrics",
    "evaluate_patterns",
    "format_dnn_table",
    "plot_dnn",
    "run_dnn",
    "save_dnn",
    "toy_config",
]

CODES = ("GCC", "BACC", "uncoded", "replication")
"""Codes `run_dnn` can compare (case-insensitive names)."""
METRICS = ("rmse", "mse", "accuracy", "rel_acc_labels", "rel_acc_base")
"""Metric keys of every result row."""
DEFAULT_LAM_ENC_GRID = (0.0, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6)
"""GCC encoder λ candidates of the cross-validation (0 = interpolating encoder)."""
DEFAULT_LAM_DEC_GRID = (0.0, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7)
"""GCC decoder λ candidates of the cross-validation (0 = interpolating decoder)."""
DEFAULT_SEARCH = dict(restarts=8, proposals=128, max_iters=25)
"""Local-search budget of the worst case (see :func:`gcc_jax.worst_case_mask`)."""
_TOY = dict(
    num_workers=10,
    num_inputs=4,
    stragglers=(0, 3),
    num_trials=4,
    num_batches=2,
    num_cv_batches=1,
    lam_enc_grid=(0.0, 1e-6),
    lam_dec_grid=(0.0, 1e-6),
    epochs=1,
    search=dict(restarts=1, proposals=8, max_iters=2),
)


class PatternMetrics(NamedTuple):
    """Per-pattern metrics of one coded batch (NumPy arrays of shape ``(p,)``).

    Attributes:
        rmse: ``(1/K) Σ_k ‖ŷ_k − f(x_k)‖₂`` (the paper's RMSE).
        mse: ``(1/K) Σ_k ‖ŷ_k − f(x_k)‖₂²``.
        correct: how many ``argmax ŷ_k`` equal the true label (missing/non-finite = wrong).
        agree: how many ``argmax ŷ_k`` equal the base model's ``argmax f(x_k)`` (same rule).
        base_correct: how many ``argmax f(x_k)`` equal the true label (one value per batch).
        status: :class:`gcc_jax.Status` of each decode (0 = valid).
    """

    rmse: Float[np.ndarray, " p"]
    mse: Float[np.ndarray, " p"]
    correct: Int[np.ndarray, " p"]
    agree: Int[np.ndarray, " p"]
    base_correct: int
    status: Int[np.ndarray, " p"]


@jax.jit
def _pattern_metrics(code, yt, fx, labels, masks):
    """Decode every mask; per-pattern rmse, mse, correct and agreeing predictions, status."""
    base = jnp.argmax(fx, axis=-1)
    labels = labels.astype(base.dtype)
    k = fx.shape[0]

    def one(mask):
        dec = code.decode_with_status(yt, mask)
        avail = code.available(mask) if hasattr(code, "available") else jnp.ones(k, bool)
        ok = avail & jnp.all(jnp.isfinite(dec.value), axis=-1)
        pred = jnp.argmax(dec.value, axis=-1)
        return (
            rmse(dec.value, fx),
            mse(dec.value, fx),
            jnp.sum((pred == labels) & ok),
            jnp.sum((pred == base) & ok),
            dec.status,
        )

    return jax.vmap(one)(masks)


@functools.partial(jax.jit, static_argnames="f")
def _apply_coded(code, f, x):
    """``(f(x~_n))_n`` and ``(f(x_k))_k`` for a single-input ``f``."""
    return jax.vmap(f)(code.encode(x)), jax.vmap(f)(x)


@functools.partial(jax.jit, static_argnames="apply")
def _forward(apply, params, x):
    """Softmax outputs ``softmax(apply(params, x))`` of a batch (one compile per shape)."""
    return jax.nn.softmax(apply(params, x), -1)


@jax.jit
def _encode(code, x):
    return code.encode(x)


def _worker_outputs(name: str, code, apply, params, x: Array, fx: Array) -> Array:
    """The ``N`` workers' softmax outputs on the coded batch.

    Uncoded and replicated workers evaluate ``f`` on exact copies of the inputs, so their
    outputs are the copies ``encode(f(x))`` of the base outputs — bit-identical to ``f(x_k)``
    (a batched forward pass of a different batch size may differ in the last bits).
    """
    if name in ("uncoded", "replication"):
        return _encode(code, fx)
    return _forward(apply, params, _encode(code, x))


def _identity(v):
    return v


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class _KnownOutputs:
    """A code whose workers' outputs are already computed: ``encode`` returns them.

    With ``f`` the identity and ``x = f(x_k)``, :func:`gcc_jax.worst_case_mask` then searches the
    straggler patterns of ``code`` without running (or compiling) the model again.
    """

    code: Any
    outputs: Array

    @property
    def num_workers(self) -> int:
        return self.code.num_workers

    def encode(self, x):
        return self.outputs

    def decode_with_status(self, y, mask):
        return self.code.decode_with_status(y, mask)


def _to_numpy(out) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(v) for v in out)


def evaluate_patterns(
    code: Any,
    f: Callable[[Array], Array],
    x: Float[ArrayLike, "k *d"],
    labels: Int[ArrayLike, " k"],
    masks: Bool[ArrayLike, "p n"],
) -> PatternMetrics:
    """Metrics of one coded batch for every straggler pattern in ``masks``.

    Encodes ``x``, applies the single-input worker function ``f`` to the ``N`` coded inputs and
    to the ``K`` true inputs, decodes each pattern (jit + vmap, one compilation per code type
    and shape) and scores the estimates ``ŷ`` against ``f(x)`` and the true labels with the
    definitions of :func:`gcc_jax.rmse`, :func:`gcc_jax.mse` and :func:`gcc_jax.rel_acc` (a
    missing estimate — ``code.available(mask)`` False — or a non-finite one is a wrong
    prediction).

    Args:
        code: any gcc_jax code; codes with ``available(mask)`` (uncoded, replication) report
            missing results through it.
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
    x = jnp.asarray(x)
    labels = jnp.asarray(labels)
    if labels.shape != (x.shape[0],) or not jnp.issubdtype(labels.dtype, jnp.integer):
        raise ValueError(f"`labels` must be integers of shape ({x.shape[0]},); got {labels.shape}")
    masks = jnp.asarray(masks)
    if masks.dtype != jnp.bool_ or masks.ndim != 2 or masks.shape[1] != code.num_workers:
        raise ValueError(
            f"`masks` must be boolean of shape (p, {code.num_workers}); got {masks.dtype} "
            f"{masks.shape}"
        )
    yt, fx = _apply_coded(code, f, x)
    out = _to_numpy(_pattern_metrics(code, yt, fx, labels, masks))
    base_correct = int(np.sum(np.argmax(np.asarray(fx), -1) == np.asarray(labels)))
    return PatternMetrics(out[0], out[1], out[2], out[3], base_correct, out[4])


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


def _check_positive(name: str, value, lo: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < lo:
        raise ValueError(f"`{name}` must be an int >= {lo}; got {value!r}")
    return int(value)


def _check_grid(name: str, grid) -> tuple[float, ...]:
    vals = tuple(float(v) for v in grid)
    if not vals or any(not np.isfinite(v) or v < 0 for v in vals):
        raise ValueError(f"`{name}` must be a non-empty list of finite λ >= 0; got {grid!r}")
    return vals


def _stat(mean: float, ci: float) -> dict:
    return {"mean": float(mean), "ci95": float(ci)}


def _summarise(
    rm: np.ndarray, ms: np.ndarray, cor: np.ndarray, agr: np.ndarray, base: np.ndarray, k: int
) -> dict:
    """Metric dict from ``(B, T)`` per-trial tables and the per-batch base-correct counts."""
    base_bt = np.broadcast_to(base[:, None].astype(float), cor.shape)
    return {
        "rmse": _stat(*mean_ci(rm)),
        "mse": _stat(*mean_ci(ms)),
        "accuracy": _stat(*mean_ci(cor / k)),
        "rel_acc_labels": _stat(*ratio_ci(cor, base_bt)),
        "rel_acc_base": _stat(*mean_ci(agr / k)),
    }


def _json_clean(obj):
    """NaN/Inf → None and NumPy scalars → Python, recursively (strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): _json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _versions() -> dict:
    import flax
    import optax

    from .. import __version__

    return {
        "gcc_jax": __version__,
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
    }


def toy_config() -> dict:
    """Tiny keyword arguments for :func:`run_dnn` (seconds; what ``GCC_JAX_TOY=1`` runs)."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in _TOY.items()}


def run_dnn(
    *,
    dataset: str | Dataset = "digits",
    model: str = "lenet5",
    num_workers: int = 40,
    num_inputs: int = 20,
    stragglers: Sequence[int] = (0, 2, 4, 6, 8, 10),
    num_trials: int = 20,
    num_batches: int = 10,
    num_cv_batches: int = 2,
    codes: Sequence[str] = CODES,
    lam_enc_grid: Sequence[float] = DEFAULT_LAM_ENC_GRID,
    lam_dec_grid: Sequence[float] = DEFAULT_LAM_DEC_GRID,
    worst_case: bool = True,
    worst_case_batches: int = 3,
    search: dict | None = None,
    trained: TrainedModel | None = None,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 1e-3,
    model_kwargs: dict | None = None,
    data_path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """Run the LeTCC coded-inference experiment; returns the JSON-ready result (module docstring).

    Trains (or loads from the cache) ``model`` on ``dataset`` unless ``trained`` is given,
    chooses GCC's ``(λ_enc, λ_dec)`` per ``S`` by grid cross-validation on held-out batches,
    then measures every code on the evaluation batches over random straggler sets (and the
    worst case). Run with ``jax_enable_x64`` on: the spline solves lose digits in float32 once
    ``λ > 0``.

    Args:
        dataset: a data-set name for :func:`gcc_jax.data.load_dataset` or a ``Dataset``.
        model: a model name for :func:`gcc_jax.models.make_model`.
        num_workers: ``N`` (at least ``K`` and ``max(S) + 2``).
        num_inputs: ``K`` images per coded batch (``≥ 2``).
        stragglers: the ``S`` values, each in ``[0, N − 2]``.
        num_trials: random straggler sets per batch and ``S`` (the paper uses 20).
        num_batches: evaluation batches.
        num_cv_batches: held-out batches for the λ cross-validation (``≥ 1`` when GCC runs).
        codes: a subset of :data:`CODES`.
        lam_enc_grid: GCC encoder λ candidates.
        lam_dec_grid: GCC decoder λ candidates.
        worst_case: also search the worst pattern per code and ``S``.
        worst_case_batches: evaluation batches searched (the first ones).
        search: local-search budget for :func:`gcc_jax.worst_case_mask` (default
            :data:`DEFAULT_SEARCH`).
        trained: a trained classifier to use instead of training one (its data set must be
            ``dataset``).
        epochs, batch_size, lr, model_kwargs: training hyper-parameters
            (:func:`gcc_jax.training.train_classifier`).
        data_path: directory of the data files.
        cache_dir: checkpoint cache directory (default: ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read/write the checkpoint cache.
        seed: seeds the training, the split into batches and every straggler set.
        progress: progress bars (training, cross-validation, evaluation, worst case).

    Returns:
        The result dict described in the module docstring.

    Raises:
        ValueError: bad sizes, unknown codes, or too few test images for the batches.
    """
    t_start = time.perf_counter()
    n = _check_positive("num_workers", num_workers, 2)
    k = _check_positive("num_inputs", num_inputs, 2)
    trials = _check_positive("num_trials", num_trials)
    n_batches = _check_positive("num_batches", num_batches)
    n_cv = _check_positive("num_cv_batches", num_cv_batches, 0)
    wc_batches = _check_positive("worst_case_batches", worst_case_batches)
    codes = _canonical_codes(codes)
    lam_enc_grid = _check_grid("lam_enc_grid", lam_enc_grid)
    lam_dec_grid = _check_grid("lam_dec_grid", lam_dec_grid)
    s_list = tuple(int(s) for s in stragglers)
    if not s_list:
        raise ValueError("`stragglers` is empty")
    if n < k:
        raise ValueError(f"`num_workers` (N={n}) must be >= `num_inputs` (K={k})")
    if any(s < 0 or s > n - 2 for s in s_list):
        raise ValueError(f"every S must be in [0, N-2] = [0, {n - 2}]; got {list(s_list)}")
    if "GCC" in codes and n_cv < 1:
        raise ValueError("GCC needs `num_cv_batches` >= 1 to choose its λ by cross-validation")
    search = dict(DEFAULT_SEARCH if search is None else search)
    if not jax.config.jax_enable_x64:
        warnings.warn(
            "run_dnn in float32: the spline solves lose digits once lam > 0; enable x64 "
            '(jax.config.update("jax_enable_x64", True))',
            stacklevel=2,
        )
    dtype = jnp.zeros(()).dtype

    # -- model and data ------------------------------------------------------------------------
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, data_path)
    training = dict(
        epochs=int(epochs),
        batch_size=int(batch_size),
        lr=float(lr),
        model_kwargs=dict(model_kwargs or {}),
    )
    t0 = time.perf_counter()
    if trained is None:
        trained = train_classifier(
            model,
            ds,
            seed=seed,
            cache_dir=cache_dir,
            use_cache=use_cache,
            progress=progress,
            **training,
        )
    elif trained.dataset_name != ds.name:
        raise ValueError(f"`trained` was trained on {trained.dataset_name!r}, not on {ds.name!r}")
    t_train = time.perf_counter() - t0
    need = (n_cv + n_batches) * k
    if need > ds.x_test.shape[0]:
        raise ValueError(
            f"{n_cv} CV + {n_batches} evaluation batches of K={k} need {need} test images; "
            f"{ds.name} has {ds.x_test.shape[0]}. Lower --batches/--cv-batches or K."
        )
    perm = np.random.default_rng((seed, 0xD1A)).permutation(ds.x_test.shape[0])

    def batch(i: int) -> tuple[Array, Array]:
        idx = perm[i * k : (i + 1) * k]
        return jnp.asarray(ds.x_test[idx], dtype), jnp.asarray(ds.y_test[idx])

    cv_batches = [batch(i) for i in range(n_cv)]
    ev_batches = [batch(n_cv + i) for i in range(n_batches)]
    apply, params = trained.apply, trained.params
    key = jax.random.key(seed)
    k_cv, k_ev, k_wc = jax.random.split(key, 3)

    def masks_for(base_key, s: int, b: int) -> Array:
        return sample_masks(
            jax.random.fold_in(jax.random.fold_in(base_key, s), b), n, num=trials, stragglers=s
        )

    def spline(le: float, ld: float) -> SplineCode:
        return SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_enc=le, lam_dec=ld)

    # -- GCC: λ by grid cross-validation on the held-out batches --------------------------------
    t0 = time.perf_counter()
    cv_table = np.full((len(s_list), len(lam_enc_grid), len(lam_dec_grid)), np.nan)
    lams: dict[int, tuple[float, float]] = {}
    if "GCC" in codes:
        sums = np.zeros_like(cv_table)
        cv_outputs = [_forward(apply, params, x) for x, _ in cv_batches]
        bar = tqdm(
            total=len(lam_enc_grid) * n_cv,
            desc="GCC λ cross-validation",
            disable=not progress,
            leave=False,
        )
        with bar:
            for e, le in enumerate(lam_enc_grid):
                for b, (x, y) in enumerate(cv_batches):
                    yt = _forward(apply, params, _encode(spline(le, 0.0), x))
                    for i, s in enumerate(s_list):
                        masks = masks_for(k_cv, s, b)
                        for d, ld in enumerate(lam_dec_grid):
                            # λ is an array leaf: one compiled decode for the whole grid
                            out = _pattern_metrics(spline(le, ld), yt, cv_outputs[b], y, masks)
                            rm, st = np.asarray(out[0]), np.asarray(out[4])
                            sums[i, e, d] += np.inf if st.any() else rm.mean()
                    bar.update()
        cv_table = sums / n_cv
        for i, s in enumerate(s_list):
            e, d = np.unravel_index(np.argmin(cv_table[i]), cv_table[i].shape)
            lams[s] = (lam_enc_grid[e], lam_dec_grid[d])
    t_cv = time.perf_counter() - t0

    def make_code(name: str, s: int):
        if name == "GCC":
            return spline(*lams[s])
        if name == "BACC":
            return BerrutCode.chebyshev(num_inputs=k, num_workers=n)
        if name == "uncoded":
            return UncodedCode(num_inputs=k)
        return ReplicationCode(num_inputs=k, num_workers=n)

    # -- evaluation over random straggler sets ---------------------------------------------------
    t0 = time.perf_counter()
    shape = (len(codes), len(s_list), n_batches, trials)
    tab = {m: np.zeros(shape) for m in ("rmse", "mse", "correct", "agree")}
    failed = np.zeros(shape[:2], int)
    base_correct = np.zeros(n_batches, int)
    ev_outputs = [_forward(apply, params, x) for x, _ in ev_batches]
    bar = tqdm(
        total=n_batches * len(s_list), desc="evaluate codes", disable=not progress, leave=False
    )
    with bar:
        for b, (x, y) in enumerate(ev_batches):
            fx = ev_outputs[b]
            base_correct[b] = int(np.sum(np.argmax(np.asarray(fx), -1) == np.asarray(y)))
            worker_outputs: dict[tuple[str, float], Array] = {}
            for i, s in enumerate(s_list):
                masks = masks_for(k_ev, s, b)
                for c, name in enumerate(codes):
                    code = make_code(name, s)
                    ck = (name, lams[s][0] if name == "GCC" else 0.0)
                    if ck not in worker_outputs:
                        worker_outputs[ck] = _worker_outputs(name, code, apply, params, x, fx)
                    m = masks[:, :k] if name == "uncoded" else masks
                    out = _pattern_metrics(code, worker_outputs[ck], fx, y, m)
                    r, q, cor, agr, st = _to_numpy(out)
                    for key_, v in (("rmse", r), ("mse", q), ("correct", cor), ("agree", agr)):
                        tab[key_][c, i, b] = v
                    failed[c, i] += int(np.count_nonzero(st))
                    if st.any():
                        warnings.warn(
                            f"{name}, S={s}: {np.count_nonzero(st)} patterns could not be "
                            f"decoded ({describe_status(int(np.bitwise_or.reduce(st)))})",
                            stacklevel=2,
                        )
                bar.update()
    t_eval = time.perf_counter() - t0

    # -- worst case -----------------------------------------------------------------------------
    t0 = time.perf_counter()
    worst: dict[tuple[str, int], dict] = {}
    if worst_case:
        nb = min(wc_batches, n_batches)

        bar = tqdm(
            total=len(codes) * len(s_list) * nb,
            desc="worst-case search",
            disable=not progress,
            leave=False,
        )
        with bar:
            for name in codes:
                for s in s_list:
                    code = make_code(name, s)
                    s_eff = min(s, k) if name == "uncoded" else s
                    rows, exhaustive, evaluated = [], True, 0
                    for b in range(nb):
                        x, y = ev_batches[b]
                        fx = ev_outputs[b]
                        yt = _worker_outputs(name, code, apply, params, x, fx)
                        if s_eff == 0:  # one pattern: nothing to search
                            wc_mask, wc_exh, wc_num = np.ones(code.num_workers, bool), True, 1
                        else:
                            wc = worst_case_mask(
                                _KnownOutputs(code, yt),
                                _identity,
                                fx,
                                stragglers=s_eff,
                                key=jax.random.fold_in(k_wc, 1000 * s + b),
                                **search,
                            )
                            wc_mask, wc_exh, wc_num = wc.mask, wc.exhaustive, wc.num_evaluated
                        # the pattern repeated to the trials' shape: reuses the compiled decode
                        tiled = jnp.broadcast_to(jnp.asarray(wc_mask), (trials, code.num_workers))
                        rows.append(_to_numpy(_pattern_metrics(code, yt, fx, y, tiled)))
                        exhaustive &= bool(wc_exh)
                        evaluated += int(wc_num)
                        bar.update()
                    r, q, cor, agr, _ = (np.stack([row[j][0] for row in rows]) for j in range(5))
                    summary = _summarise(
                        r[:, None], q[:, None], cor[:, None], agr[:, None], base_correct[:nb], k
                    )
                    summary.update(exhaustive=exhaustive, num_evaluated=evaluated)
                    worst[(name, s)] = summary
    t_worst = time.perf_counter() - t0

    # -- assemble --------------------------------------------------------------------------------
    results: dict[str, list[dict]] = {}
    for c, name in enumerate(codes):
        rows = []
        for i, s in enumerate(s_list):
            row = {"S": s}
            row.update(
                _summarise(
                    tab["rmse"][c, i],
                    tab["mse"][c, i],
                    tab["correct"][c, i],
                    tab["agree"][c, i],
                    base_correct,
                    k,
                )
            )
            row.update(num_trials=n_batches * trials, num_failed=int(failed[c, i]))
            if name == "GCC":
                row.update(lam_enc=lams[s][0], lam_dec=lams[s][1])
            row["worst_case"] = worst.get((name, s))
            rows.append(row)
        results[name] = rows
    comparison = []
    if "GCC" in codes and "BACC" in codes:
        g, bacc = codes.index("GCC"), codes.index("BACC")
        for i, s in enumerate(s_list):
            ratio, ci = ratio_ci(tab["rmse"][g, i], tab["rmse"][bacc, i])
            comparison.append(
                {"S": s, "rmse_ratio": _stat(ratio, ci), "rmse_gain_percent": 100 * (1 - ratio)}
            )
    result = {
        "schema": "gcc_jax.dnn/1",
        "experiment": "dnn",
        "config": {
            "dataset": ds.name,
            "model": trained.model_name,
            "num_workers": n,
            "num_inputs": k,
            "stragglers": list(s_list),
            "num_trials": trials,
            "num_batches": n_batches,
            "num_cv_batches": n_cv,
            "codes": list(codes),
            "lam_enc_grid": list(lam_enc_grid),
            "lam_dec_grid": list(lam_dec_grid),
            "worst_case": bool(worst_case),
            "worst_case_batches": min(wc_batches, n_batches) if worst_case else 0,
            "search": search,
            "training": dict(trained.config),
            "seed": int(seed),
            "dtype": str(dtype),
        },
        "model": {
            "name": trained.model_name,
            "dataset": trained.dataset_name,
            "test_accuracy": trained.test_accuracy,
            "num_params": count_params(params),
            "from_cache": trained.from_cache,
            "train_time_s": trained.train_time_s,
        },
        "base": {
            "accuracy": float(base_correct.sum() / (n_batches * k)),
            "num_images": n_batches * k,
        },
        "images": {
            "cv": perm[: n_cv * k].reshape(n_cv, k).tolist(),
            "eval": perm[n_cv * k : need].reshape(n_batches, k).tolist(),
        },
        "results": results,
        "gcc_vs_bacc": comparison,
        "cv": {
            "stragglers": list(s_list) if "GCC" in codes else [],
            "lam_enc_grid": list(lam_enc_grid),
            "lam_dec_grid": list(lam_dec_grid),
            "rmse": cv_table.tolist() if "GCC" in codes else [],
        },
        "timing_s": {
            "training": t_train,
            "cross_validation": t_cv,
            "evaluation": t_eval,
            "worst_case": t_worst,
            "total": time.perf_counter() - t_start,
        },
        "versions": _versions(),
    }
    return _json_clean(result)


# -- reporting ---------------------------------------------------------------------------------

_TITLES = {
    "rmse": "RMSE (1/K) Σ_k ‖f(x_k) − f^(x_k)‖₂",
    "mse": "MSE (1/K) Σ_k ‖f(x_k) − f^(x_k)‖₂²",
    "accuracy": "accuracy of argmax f^ vs true labels",
    "rel_acc_labels": "RelAcc vs true labels (decoded acc / base acc)",
    "rel_acc_base": "RelAcc vs base argmax (agreement)",
}


def _fmt(stat: dict | None, metric: str) -> str:
    if stat is None or stat.get("mean") is None:
        return "—"
    m, ci = stat["mean"], stat.get("ci95")
    num = f"{m:.3e}" if metric == "mse" else f"{m:.4f}"
    if ci is None:
        return num
    return num + (f"±{ci:.1e}" if metric == "mse" else f"±{ci:.4f}")


def format_dnn_table(result: dict, metrics: Sequence[str] = METRICS) -> str:
    """Plain-text tables of a :func:`run_dnn` result: rows codes, columns ``S``, mean ± 95% CI.

    One table per metric, then the worst-case RMSE and RelAcc, GCC's RMSE gain over BACC and
    the cross-validated λs.
    """
    cfg, model = result["config"], result["model"]
    s_list = cfg["stragglers"]
    codes = list(result["results"])
    head = (
        f"coded inference: {model['name']} on {model['dataset']} (test accuracy "
        f"{model['test_accuracy']:.4f}; {result['base']['accuracy']:.4f} on the "
        f"{result['base']['num_images']} evaluation images), N={cfg['num_workers']} workers, "
        f"K={cfg['num_inputs']} images per batch, {cfg['num_batches']} batches × "
        f"{cfg['num_trials']} random straggler sets per S (GCC λ by CV on "
        f"{cfg['num_cv_batches']} other batches), {cfg['dtype']}"
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
    for m in metrics:
        lines += table(f"{_TITLES[m]}, mean ± 95% CI", lambda r, m=m: _fmt(r[m], m))
    if cfg["worst_case"]:
        for m in ("rmse", "rel_acc_labels"):
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
        lines += ["", "GCC RMSE / BACC RMSE (paired, mean ± 95% CI) and GCC's gain"]
        lines.append(f"{'':<12}{cols}")
        lines.append(
            f"{'ratio':<12}"
            + "".join(f"{_fmt(g['rmse_ratio'], 'ratio'):>{width}}" for g in result["gcc_vs_bacc"])
        )
        lines.append(
            f"{'gain':<12}"
            + "".join(
                f"{'—' if g['rmse_gain_percent'] is None else format(g['rmse_gain_percent'], '.1f') + '%':>{width}}"  # noqa: E501
                for g in result["gcc_vs_bacc"]
            )
        )
    if "GCC" in result["results"]:
        lines += ["", "GCC λ chosen by grid cross-validation (lam_enc / lam_dec)"]
        lines.append(f"{'':<12}{cols}")
        lines.append(
            f"{'λ':<12}"
            + "".join(
                f"{format(r['lam_enc'], 'g') + ' / ' + format(r['lam_dec'], 'g'):>{width}}"
                for r in result["results"]["GCC"]
            )
        )
    return "\n".join(lines)


_COLORS = {"GCC": "C0", "BACC": "C3", "uncoded": "C7", "replication": "C2"}


def plot_dnn(result: dict, path: str | Path) -> Path:
    """Four panels versus ``S``: RMSE and MSE (log), RelAcc vs labels and vs base argmax.

    Error bars are 95% CIs; dashed lines with crosses are the worst case (where searched). On
    the log axes, values below ``1e-9`` times the panel's largest value (exact zeros and
    round-off, e.g. replication with every copy alive) are left out.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = (("rmse", True), ("mse", True), ("rel_acc_labels", False), ("rel_acc_base", False))

    def value(stat) -> float:
        return np.nan if stat is None or stat["mean"] is None else stat["mean"]

    for ax, (metric, log) in zip(axes.ravel(), panels, strict=True):
        everything = [
            value(st)
            for rows in result["results"].values()
            for r in rows
            for st in (r[metric], r["worst_case"][metric] if r["worst_case"] else None)
        ]
        floor = 1e-9 * np.nanmax(np.abs(everything)) if log else -np.inf

        def shown(v: np.ndarray, floor=floor) -> np.ndarray:
            return np.where(np.abs(v) >= floor, v, np.nan)

        for code, rows in result["results"].items():
            s = np.array([r["S"] for r in rows], float)
            mean = shown(np.array([value(r[metric]) for r in rows], float))
            ci = np.array([0.0 if r[metric]["ci95"] is None else r[metric]["ci95"] for r in rows])
            color = _COLORS.get(code)
            lower = np.minimum(ci, 0.999 * np.abs(mean)) if log else ci
            ax.errorbar(s, mean, yerr=(lower, ci), fmt="o-", color=color, capsize=3, label=code)
            wc = [r["worst_case"][metric]["mean"] if r["worst_case"] else None for r in rows]
            if any(v is not None for v in wc):
                w = shown(np.array([np.nan if v is None else v for v in wc], float))
                ax.plot(s, w, "x--", color=color, alpha=0.6, label=f"{code} worst case")
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("S (stragglers)")
        ax.set_title(_TITLES[metric], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    cfg = result["config"]
    fig.suptitle(
        f"{result['model']['name']} on {result['model']['dataset']}: N={cfg['num_workers']}, "
        f"K={cfg['num_inputs']}, {cfg['num_batches']}×{cfg['num_trials']} trials per S"
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_cv(result: dict, path: str | Path) -> Path:
    """Heat maps of the cross-validation RMSE over ``(λ_enc, λ_dec)`` for up to four ``S``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cv = result["cv"]
    s_all = cv["stragglers"]
    pick = sorted(set(np.linspace(0, len(s_all) - 1, min(4, len(s_all))).round().astype(int)))
    fig, axes = plt.subplots(1, len(pick), figsize=(4.2 * len(pick), 3.6), squeeze=False)
    for ax, i in zip(axes[0], pick, strict=True):
        table = np.array(cv["rmse"][i], float)
        im = ax.imshow(table, origin="lower", aspect="auto", cmap="viridis")
        e, d = np.unravel_index(np.nanargmin(table), table.shape)
        ax.plot(d, e, "r*", ms=12)
        ax.set_xticks(range(len(cv["lam_dec_grid"])))
        ax.set_xticklabels([f"{v:g}" for v in cv["lam_dec_grid"]], rotation=60, fontsize=7)
        ax.set_yticks(range(len(cv["lam_enc_grid"])))
        ax.set_yticklabels([f"{v:g}" for v in cv["lam_enc_grid"]], fontsize=7)
        ax.set_xlabel("λ_dec")
        ax.set_ylabel("λ_enc")
        ax.set_title(f"CV RMSE, S={s_all[i]}", fontsize=10)
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def save_dnn(result: dict, out: str | Path) -> dict[str, Path]:
    """Write ``results.json``, ``results.txt`` and ``results.png`` (+ ``cv.png``) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "results.json",
        "table": out / "results.txt",
        "plot": out / "results.png",
    }
    paths["json"].write_text(json.dumps(_json_clean(result), indent=2, allow_nan=False))
    paths["table"].write_text(format_dnn_table(result) + "\n")
    plot_dnn(result, paths["plot"])
    if result["cv"]["stragglers"]:
        paths["cv_plot"] = plot_cv(result, out / "cv.png")
    return paths
