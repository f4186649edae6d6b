"""``gcc-jax compare-learned``: ParM and a learned code against GCC and BACC in degraded mode.

Learning-based coded computation (Kosaian, Rashmi & Venkataraman) recovers an
unavailable base-model output from ``k`` queries and ``r = 1`` extra worker. This experiment
measures it head to head with the training-free codes:

* **Base models.** MLP (784-200-100-10) and LeNet-5 trained by
  :func:`gcc_jax.nn.training.train_classifier` (cached) on Fashion-MNIST, or, when no data set
  is named and the Fashion-MNIST files are absent, on scikit-learn's digits (a note says so). A
  data set asked for by name is never replaced by another.
* **ParM** (:class:`gcc_jax.ParityModelCode`): ``k + 1`` workers, the parity model trained by
  :func:`gcc_jax.train_parity_model` on the base model's logits; the summation encoder for every
  ``k``, the concatenation encoder for ``k ∈ {2, 4}``.
* **Learned code** (:class:`gcc_jax.LearnedCode`): ``k + 1`` workers, encoder and decoder
  trained end to end through the frozen base model by :func:`gcc_jax.train_learned_code`.
* **GCC / BACC at N = k + 1, S = 1**: the same worker budget and the same single unavailable
  worker (:class:`gcc_jax.SplineCode`, :class:`gcc_jax.BerrutCode`; worker output = softmax
  probabilities, the LeTCC protocol).
* **GCC / BACC at their natural operating point with the same number of extra workers**:
  ``g`` groups merged into one code, ``K = g·k`` inputs on ``N = g·(k + 1)`` workers — the same
  one extra worker per ``k`` inputs (``N/K = (k + 1)/k``) — with ``S = g`` random stragglers,
  the same fraction ``1/(k + 1)`` of unavailable workers that ParM absorbs. Splines and Berrut
  interpolants are built for many points (LeTCC runs ``K ≈ 20`` and more); at ``N = k + 1``
  GCC has 2–4 live points per decode, which is not the regime its error bounds describe.
  ``g = 10`` by default (``K = 20, 30, 40``).

GCC's ``λ_enc = 0`` (interpolating encoder); ``λ_dec`` is picked per setting from
``lam_dec_grid`` by the lowest mean RMSE of the softmax outputs on held-out *training* images
(never the evaluation images).

**Degraded mode.** ParM and the learned code: every group of ``k`` test images is decoded once
per single unavailable *base* worker (``k`` patterns); the metrics count the reconstructed slot
only (ParM's protocol; the other ``k − 1`` outputs are exact). GCC and BACC have no systematic
workers — every decoded output is an approximation — so all ``K`` outputs of every pattern
count (at ``N = k + 1``: all ``N`` single-straggler patterns; natural point: ``trials`` random
patterns of ``S`` stragglers per batch). Metrics, with ``ŷ`` the decoded estimate:

* ``recon``: ``argmax ŷ = argmax F(x)`` (ParM's "reconstruction accuracy");
* ``overall``: ``argmax ŷ`` = true label (ParM's "overall accuracy");
* ``gap_points``: base-model accuracy on the same images minus ``overall``, in percentage
  points — ParM reports 1.79 for Fashion-MNIST, ResNet-18, ``k = 2`` (Kosaian & Rashmi);
* ``all_overall``: accuracy over all ``k`` outputs when one of the ``N`` workers (any) is
  unavailable — the accuracy a user of the system sees in degraded mode.

95% confidence half-widths treat each group (batch) as one sample. Training times come from the
checkpoint cache's metadata (the run that trained the weights); GCC and BACC train nothing (their
λ search is reported as ``tuning_time_s``).

``run_compare_learned`` returns an :class:`~gcc_jax.experiments.ExperimentResult`, written by
:func:`save_compare` as ``compare_learned.json`` in the common schema of
:mod:`gcc_jax.experiments._io`, with::

    "config": {dataset, models, ks, base_epochs, code_epochs, code_train_size, eval_images,
               concat, learned_encoder, learned_hidden, gcc_groups, gcc_trials, cv_images,
               lam_dec_grid, batch_size, dtype},
    "results": {
      "dataset": {name, requested, note, num_code_train, num_eval, num_cv},
      "models": {MODEL: {test_accuracy, eval_accuracy, num_params, epochs, train_time_s,
                         from_cache}},
      "rows": [{model, k, method, encoder, output, num_inputs, num_workers, stragglers,
                extra_workers_per_input, patterns, recon, overall, all_overall: {mean, ci95},
                gap_points, num_degraded, num_failed, train_time_s, from_cache, val_metric,
                lam_dec, tuning_time_s, base_model, base_test_accuracy, base_epochs}],
      "published": {...}, "comparison": [{model, method, base_accuracy, base_epochs, overall,
                     gap_points, published_gap_points, published_base_model, like_for_like}]
    },
    "timing_s": {base_training, code_training, tuning, evaluation, total}
"""

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from .._core.scalars import as_int
from .._core.types import Array, Bool, Float, Int
from ..codes import AbstractCode, BerrutCode, SplineCode
from ..evaluation import MaskEvaluator, mean_ci, sample_masks
from ..nn.data import Dataset, DatasetNotFoundError, load_dataset
from ..nn.models import count_params, make_model
from ..nn.training import (
    TrainSettings,
    base_outputs,
    train_classifier,
    train_learned_code,
    train_parity_model,
)
from ._command import StopOnInterrupt, from_arguments
from ._commands.learned import DEFAULT_LAM_DEC_GRID, toy_config
from ._io import ExperimentResult, json_clean, new_figure, save_report
from ._plots import CODE_COLORS, legend_outside

__all__ = [
    "METHODS",
    "PUBLISHED",
    "decode_groups",
    "decoded_groups",
    "format_compare_table",
    "plot_compare",
    "report",
    "run",
    "run_compare_learned",
    "save",
    "save_compare",
    "toy_config",
]

METHODS = (
    "ParM-sum",
    "ParM-concat",
    "learned",
    "GCC",
    "BACC",
    "GCC-natural",
    "BACC-natural",
)
"""Row labels of the comparison, in table order."""

PUBLISHED = {
    "parm_gap_points": 1.79,
    "dataset": "fashion_mnist",
    "base_model": "resnet18",
    "num_inputs": 2,
    "accuracy": {"deployed": 92.9, "reconstructed": 91.1},
    "source": "Kosaian, Rashmi & Venkataraman, Parity Models: Erasure-Coded Resilience for "
    "Prediction Serving Systems (ParM), SOSP 2019",
    "learned_code_gap_points": 0.7,
    "learned_code_source": "Kosaian, Rashmi & Venkataraman, Learning-Based Coded Computation, "
    "arXiv:1806.01259 (ResNet-18, k=2, r=1)",
}
"""ParM's published Fashion-MNIST ``k = 2`` degraded-mode gap (percentage points)."""

DEFAULT_BASE_EPOCHS = {"mlp": 10, "lenet5": 3}
"""Base-model epochs per model when ``base_epochs`` is not given."""


def _load(dataset: str | Dataset | None, data_path) -> tuple[Dataset, str, str]:
    """The data set, the requested name and a note. ``None``: Fashion-MNIST, or digits when
    its files are absent (the note says so); a name: that data set or its error."""
    if isinstance(dataset, Dataset):
        return dataset, dataset.name, ""
    if dataset is not None:
        return load_dataset(dataset, data_path), dataset, ""
    try:
        return load_dataset("fashion_mnist", data_path), "fashion_mnist", ""
    except DatasetNotFoundError as err:
        note = f"Fashion-MNIST not found, ran on scikit-learn's digits instead ({err})"
        return load_dataset("digits"), "fashion_mnist", note


def code_train_indices(num_train: int, size: int | None, seed: int) -> np.ndarray:
    """Training-split indices the codes are trained on: the first ``size`` of a seeded
    permutation, sorted (all of them for ``None``)."""
    if size is None or size >= num_train:
        return np.arange(num_train)
    return np.sort(np.random.default_rng((seed, 0x7A1)).permutation(num_train)[:size])


def eval_indices(num_test: int, size: int, seed: int) -> np.ndarray:
    """Test-split indices of the evaluation images (a seeded permutation's first ``size``)."""
    return np.random.default_rng((seed, 0xE7A1)).permutation(num_test)[: min(size, num_test)]


def cv_indices(num_train: int, size: int, seed: int) -> np.ndarray:
    """Training-split indices of GCC's λ cross-validation images."""
    return np.random.default_rng((seed, 0xC5)).permutation(num_train)[: min(size, num_train)]


def single_erasures(n: int) -> np.ndarray:
    """The ``n`` masks with exactly one unavailable worker (row ``j`` loses worker ``j``)."""
    return ~np.eye(n, dtype=bool)


def decoded_groups(
    code: AbstractCode, yt: Float[Array, "n g *m"], targets: None, mask: Bool[Array, " n"]
) -> tuple[Float[Array, "g k *m"], Int[Array, " g"]]:
    """Decode every group (axis 1 of ``yt``) under one mask: values ``(g, k, *m)``, statuses.

    The ``per_mask`` function of :class:`gcc_jax.MaskEvaluator` for groups of inputs coded
    independently with the same code (``targets`` unused).
    """
    dec = jax.vmap(lambda y: code.decode_with_status(y, mask), in_axes=1)(yt)
    return dec.value, dec.status


def decode_groups(
    code: AbstractCode, yt: Float[np.ndarray, "g n *m"], masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Decoded values ``(g, p, k, *m)`` and statuses ``(g, p)`` of groups ``yt`` ``(g, n, *m)``.

    ``masks`` is ``(p, n)``, the same patterns for every group (one evaluator call), or
    ``(g, p, n)``, one set of patterns per group (one call per group). Every pattern goes
    through :class:`gcc_jax.MaskEvaluator` with :func:`decoded_groups`.
    """
    masks = np.asarray(masks)
    by_worker = np.moveaxis(np.asarray(yt), 0, 1)  # (n, g, *m)
    if masks.ndim == 2:
        vals, st = MaskEvaluator(code, by_worker, None, per_mask=decoded_groups)(masks)
        return np.moveaxis(vals, 0, 1), st.T
    vals, sts = [], []
    for b in range(masks.shape[0]):
        ev = MaskEvaluator(code, by_worker[:, b : b + 1], None, per_mask=decoded_groups)
        v, st = ev(masks[b])
        vals.append(v[:, 0])
        sts.append(st[:, 0])
    return np.stack(vals), np.stack(sts)


@functools.partial(jax.jit, static_argnames="f")
def _group_outputs(code: AbstractCode, f: Callable, x: Array) -> Array:
    """``code.worker_outputs(f, x_b)`` of every group ``x`` ``(b, K, ...)``: ``(b, n, *m)``."""
    return jax.vmap(lambda xb: code.worker_outputs(f, xb))(x)


def group_outputs(
    code: AbstractCode, f: Callable, x: np.ndarray, chunk_images: int = 1000
) -> np.ndarray:
    """The workers' outputs on groups ``x (b, K, ...)`` in fixed-size chunks of groups (one
    compilation per code shape; the last chunk is padded), in the default float dtype."""
    per = max(1, chunk_images // x.shape[1])
    size = min(per, x.shape[0])
    out = []
    for start in range(0, x.shape[0], size):
        xb = x[start : start + size]
        pad = size - xb.shape[0]
        if pad:
            xb = np.concatenate([xb, np.zeros((pad, *xb.shape[1:]), xb.dtype)])
        out.append(np.asarray(_group_outputs(code, f, jnp.asarray(xb)))[: size - pad])
    return np.concatenate(out).astype(jnp.zeros(()).dtype)


def score(
    values: np.ndarray,
    status: np.ndarray,
    degraded: np.ndarray,
    base_pred: np.ndarray,
    labels: np.ndarray,
) -> dict:
    """Degraded-mode metrics of decoded groups (module docstring).

    Args:
        values: decoded estimates ``(g, p, k, m)``.
        status: decode statuses ``(g, p)`` (a failed decode counts as wrong).
        degraded: which slots are reconstructions, broadcastable to ``(g, p, k)``.
        base_pred: the base model's argmax ``(g, k)``.
        labels: true labels ``(g, k)``.

    Returns:
        ``{"recon", "overall", "all_overall": {"mean", "ci95"}, "num_degraded", "num_failed"}``
        with per-group means as the samples of the 95% CI.
    """
    values, status = np.asarray(values), np.asarray(status)
    ok = (status == 0)[..., None]
    pred = np.argmax(values, axis=-1)
    recon = (pred == base_pred[:, None, :]) & ok
    overall = (pred == labels[:, None, :]) & ok
    w = np.broadcast_to(degraded, recon.shape)
    per = w.sum(axis=(1, 2))
    keep = per > 0

    def stat(hits, weights, rows):
        g = (hits & weights).sum(axis=(1, 2))[rows] / weights.sum(axis=(1, 2))[rows]
        m, ci = mean_ci(g.astype(float)) if g.size > 1 else (float(g.mean()), float("nan"))
        return {"mean": float(m), "ci95": float(ci)}

    everything = np.ones_like(w)
    all_rows = np.ones(w.shape[0], bool)
    return {
        "recon": stat(recon, w, keep),
        "overall": stat(overall, w, keep),
        "all_overall": stat(overall, everything, all_rows),
        "num_degraded": int(w.sum()),
        "num_failed": int(np.count_nonzero(status)),
    }


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class _Settings(NamedTuple):
    """The checked knobs of one comparison (arguments of :func:`run_compare_learned`)."""

    models: tuple[str, ...]
    ks: tuple[int, ...]
    base_epochs: int | None
    code_epochs: int
    code_train_size: int | None
    eval_images: int
    concat: bool
    learned_encoder: str
    learned_hidden: int | None
    gcc_groups: int
    gcc_trials: int
    cv_images: int
    lam_dec_grid: tuple[float, ...]
    batch_size: int
    seed: int
    cache_dir: str | os.PathLike | None
    use_cache: bool
    progress: bool


class _Splits(NamedTuple):
    """The data set and the images every step reads."""

    ds: Dataset
    requested: str
    note: str
    x_code: np.ndarray  # training images the codes are trained on
    ev: np.ndarray  # test-split indices of the evaluation images
    cv: np.ndarray  # training-split indices of GCC's λ cross-validation images
    can_concat: bool  # ParM's concatenation encoder fits the image shape


class _Groups(NamedTuple):
    """Evaluation images in groups of ``size``: inputs, labels, base argmax and base logits."""

    x: np.ndarray  # (g, size, ...)
    labels: np.ndarray  # (g, size)
    base_pred: np.ndarray  # (g, size)
    logits: np.ndarray  # (g, size, m)


class _Base(NamedTuple):
    """A trained base model, the worker functions built on it and its outputs."""

    name: str
    apply: Callable
    params: Any
    f_logits: Callable  # a worker returning logits (ParM, learned code)
    f_probs: Callable  # a worker returning softmax probabilities (GCC, BACC)
    x_ev: np.ndarray
    y_ev: np.ndarray
    logits_ev: np.ndarray
    x_cv: np.ndarray
    probs_cv: np.ndarray
    info: dict  # the record under ``results["models"][name]``

    def groups(self, size: int) -> _Groups:
        """The evaluation images in groups of ``size`` (the first whole groups)."""
        idx = np.arange((len(self.y_ev) // size) * size).reshape(-1, size)
        pred = self.logits_ev.argmax(-1)
        return _Groups(self.x_ev[idx], self.y_ev[idx], pred[idx], self.logits_ev[idx])


class _Point(NamedTuple):
    """An operating point of GCC and BACC: ``K`` inputs on ``N`` workers, ``S`` stragglers."""

    suffix: str  # appended to the method name ("" or "-natural")
    num_inputs: int
    num_workers: int
    stragglers: int
    natural: bool  # random patterns of S stragglers (else every single-straggler pattern)


def _check(raw: _Settings) -> _Settings:
    """The arguments of :func:`run_compare_learned`, checked (``ValueError`` names the bad one)."""
    ks = tuple(as_int(k, "k", 2) for k in raw.ks)
    models = tuple(str(m) for m in raw.models)
    if not ks or not models:
        raise ValueError("`ks` and `models` must be non-empty")
    grid = tuple(float(v) for v in raw.lam_dec_grid)
    if not grid or any(not np.isfinite(v) or v < 0 for v in grid):
        raise ValueError(f"`lam_dec_grid` must be finite λ >= 0; got {raw.lam_dec_grid!r}")
    if raw.learned_encoder not in ("mlp", "conv"):
        raise ValueError(f"`learned_encoder` must be 'mlp' or 'conv'; got {raw.learned_encoder!r}")
    return raw._replace(
        models=models,
        ks=ks,
        code_epochs=as_int(raw.code_epochs, "code_epochs", 1),
        eval_images=as_int(raw.eval_images, "eval_images", 2),
        concat=bool(raw.concat),
        gcc_groups=as_int(raw.gcc_groups, "gcc_groups", 1),
        gcc_trials=as_int(raw.gcc_trials, "gcc_trials", 1),
        cv_images=as_int(raw.cv_images, "cv_images", 2),
        lam_dec_grid=grid,
    )


def _load_splits(s: _Settings, dataset: str | Dataset | None, data_path) -> _Splits:
    """The data set (:func:`_load`) and its code-training, evaluation and λ-CV images."""
    ds, requested, note = _load(dataset, data_path)
    if note and s.progress:
        tqdm.write(note, file=sys.stderr)
    if s.eval_images < max(s.ks):
        raise ValueError(f"`eval_images`={s.eval_images} is smaller than a group (k={max(s.ks)})")
    h, w = ds.input_shape[:2]
    return _Splits(
        ds=ds,
        requested=requested,
        note=note,
        x_code=ds.x_train[code_train_indices(ds.num_train, s.code_train_size, s.seed)],
        ev=eval_indices(ds.x_test.shape[0], s.eval_images, s.seed),
        cv=cv_indices(ds.num_train, s.cv_images, s.seed),
        can_concat=s.concat and h % 2 == 0 and w % 2 == 0,
    )


def _train_base(s: _Settings, sp: _Splits, model: str) -> _Base:
    """Train (or load) base model ``model`` and compute its outputs on the evaluation images."""
    epochs = s.base_epochs if s.base_epochs is not None else DEFAULT_BASE_EPOCHS.get(model, 5)
    ds = sp.ds
    tm = train_classifier(
        model,
        ds,
        epochs=epochs,
        batch_size=s.batch_size,
        seed=s.seed,
        cache_dir=s.cache_dir,
        use_cache=s.use_cache,
        progress=s.progress,
    )
    apply, params = tm.apply, tm.params
    in_dtype = ds.x_test.dtype  # the workers run the model in its own precision

    def f_logits(v):
        return apply(params, v.astype(in_dtype))

    def f_probs(v):
        return jax.nn.softmax(apply(params, v.astype(in_dtype)), axis=-1)

    x_ev = ds.x_test[sp.ev]  # float32: the workers run the model in its own precision
    y_ev = ds.y_test[sp.ev]
    logits_ev = base_outputs(apply, params, x_ev).astype(jnp.zeros(()).dtype)
    x_cv = ds.x_train[sp.cv]
    info = {
        "test_accuracy": tm.test_accuracy,
        "eval_accuracy": float(np.mean(logits_ev.argmax(-1) == y_ev)),
        "num_params": count_params(params),
        "epochs": int(epochs),
        "train_time_s": tm.train_time_s,
        "from_cache": tm.from_cache,
    }
    probs_cv = _softmax(base_outputs(apply, params, x_cv))
    return _Base(
        name=model,
        apply=apply,
        params=params,
        f_logits=f_logits,
        f_probs=f_probs,
        x_ev=x_ev,
        y_ev=y_ev,
        logits_ev=logits_ev,
        x_cv=x_cv,
        probs_cv=probs_cv,
        info=info,
    )


def _row_head(
    base: _Base, k: int, method: str, encoder, output: str, n: int, kk: int, s: int, patterns: str
) -> dict:
    """The fields every row starts with: what was coded, how, and under which patterns."""
    return {
        "model": base.name,
        "k": k,
        "method": method,
        "encoder": encoder,
        "output": output,
        "num_inputs": kk,
        "num_workers": n,
        "stragglers": s,
        "extra_workers_per_input": (n - kk) / kk,
        "patterns": patterns,
    }


def _trained_row(base: _Base, k: int, method: str, encoder: str, trained) -> dict:
    """The row of a trained code (ParM or learned): ``k + 1`` workers, one base erasure."""
    g = base.groups(k)
    erase_base = single_erasures(k + 1)[:k]  # (k, n): pattern j loses base worker j
    degraded_base = ~erase_base[None, :, :k]  # slot j reconstructed in pattern j
    yt = group_outputs(trained.code, base.f_logits, g.x)
    vals, st = decode_groups(trained.code, yt, erase_base)
    row = _row_head(base, k, method, encoder, "logits", k + 1, k, 1, "single base")
    row.update(score(vals, st, degraded_base, g.base_pred, g.labels))
    row["all_overall"] = _all_outputs_parm(row, vals, st, g.labels, logits=g.logits)
    row.update(
        train_time_s=trained.train_time_s,
        from_cache=trained.from_cache,
        val_metric=trained.val_metrics[-1] if trained.val_metrics else None,
        lam_dec=None,
        tuning_time_s=0.0,
    )
    return row


def _code_training(s: _Settings) -> TrainSettings:
    """How both learned codes train: ``code_epochs``, the run's seed, cache and progress."""
    return TrainSettings(
        epochs=s.code_epochs,
        seed=s.seed,
        cache_dir=s.cache_dir,
        use_cache=s.use_cache,
        progress=s.progress,
    )


def _train_parm(s: _Settings, sp: _Splits, base: _Base, k: int, encoder: str):
    """ParM's parity model for groups of ``k`` with the ``encoder`` ("sum" or "concat")."""
    ds = sp.ds
    _, init = make_model(
        base.name, input_shape=ds.input_shape, num_classes=ds.num_classes, key=s.seed + 1
    )
    return train_parity_model(
        base.apply,
        base.params,
        sp.x_code,
        num_inputs=k,
        init_params=init,
        encoder=encoder,
        settings=_code_training(s),
    )


def _train_learned(s: _Settings, sp: _Splits, base: _Base, k: int):
    """The learned code (encoder and decoder trained end to end) for groups of ``k``."""
    hidden = None if s.learned_hidden is None else int(s.learned_hidden)
    return train_learned_code(
        base.apply,
        base.params,
        sp.x_code,
        num_inputs=k,
        encoder=s.learned_encoder,
        encoder_hidden=(hidden,) if s.learned_encoder == "mlp" and hidden else None,
        channels=hidden if s.learned_encoder == "conv" else None,
        settings=_code_training(s),
    )


def _patterns(pt: _Point, trials: int, key: Array, num_batches: int) -> np.ndarray:
    """The straggler patterns of an operating point: every single-straggler mask ``(n, n)``
    (the same for every batch), or ``trials`` random masks per batch ``(b, trials, n)``."""
    if not pt.natural:
        return single_erasures(pt.num_workers)
    keys = [
        jax.random.fold_in(jax.random.fold_in(key, pt.num_inputs), b) for b in range(num_batches)
    ]
    return np.stack(
        [
            np.asarray(sample_masks(kb, pt.num_workers, num=trials, stragglers=pt.stragglers))
            for kb in keys
        ]
    )


def _choose_lam_dec(s: _Settings, base: _Base, pt: _Point, key: Array) -> float:
    """GCC's ``λ_dec``: the grid value with the lowest mean RMSE of the decoded softmax outputs
    on the cross-validation (training) images; the first grid value when there is no choice."""
    grid, kk, n = s.lam_dec_grid, pt.num_inputs, pt.num_workers
    n_cv = len(base.x_cv) // kk
    if n_cv < 1 or len(grid) < 2:
        return grid[0]
    xc = base.x_cv[: n_cv * kk].reshape(n_cv, kk, *base.x_cv.shape[1:])
    pc = base.probs_cv[: n_cv * kk].reshape(n_cv, kk, -1)
    code0 = SplineCode.chebyshev(num_inputs=kk, num_workers=n, lam_dec=0.0)
    yt = group_outputs(code0, base.f_probs, xc)
    masks = _patterns(pt, s.gcc_trials, key, n_cv)
    rmse = []
    for lam_c in grid:
        c = SplineCode.chebyshev(num_inputs=kk, num_workers=n, lam_dec=lam_c)
        vals, st = decode_groups(c, yt, masks)
        err = np.linalg.norm(np.asarray(vals) - pc[:, None], axis=-1)
        rmse.append(np.inf if (np.asarray(st) != 0).any() else float(err.mean()))
    return grid[int(np.argmin(rmse))]


def _interpolating_rows(
    s: _Settings, base: _Base, k: int, pt: _Point, lam: float, t_tune: float, key: Array
) -> list[dict]:
    """The GCC and BACC rows of one operating point (every decoded output counts)."""
    kk, n = pt.num_inputs, pt.num_workers
    g = base.groups(kk)
    masks = _patterns(pt, s.gcc_trials, key, g.x.shape[0])
    label = f"{s.gcc_trials} random S={pt.stragglers}" if pt.natural else "all single"
    rows = []
    for name, code in (
        ("GCC", SplineCode.chebyshev(num_inputs=kk, num_workers=n, lam_dec=lam)),
        ("BACC", BerrutCode.chebyshev(num_inputs=kk, num_workers=n)),
    ):
        yt = group_outputs(code, base.f_probs, g.x)
        vals, st = decode_groups(code, yt, masks)
        row = _row_head(base, k, name + pt.suffix, None, "probs", n, kk, pt.stragglers, label)
        row.update(score(vals, st, np.ones(1, bool), g.base_pred, g.labels))
        row.update(
            train_time_s=0.0,
            from_cache=None,
            val_metric=None,
            lam_dec=lam if name == "GCC" else None,
            tuning_time_s=t_tune if name == "GCC" else 0.0,
        )
        rows.append(row)
    return rows


class _Timer:
    """Seconds spent per phase, accumulated over the run (``with timer("tuning"): ...``)."""

    def __init__(self):
        self.s = {"base_training": 0.0, "code_training": 0.0, "tuning": 0.0, "evaluation": 0.0}

    @contextlib.contextmanager
    def __call__(self, phase: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.s[phase] += time.perf_counter() - t0


def _measure_k(
    s: _Settings, sp: _Splits, base: _Base, k: int, key: Array, timer: _Timer, rows: list
) -> None:
    """Every method's rows for groups of ``k``, appended to ``rows`` as each one finishes."""
    encoders = ["sum"] + (["concat"] if sp.can_concat and k in (2, 4) else [])
    for enc in encoders:
        with timer("code_training"):
            tc = _train_parm(s, sp, base, k, enc)
        with timer("evaluation"):
            rows.append(_trained_row(base, k, f"ParM-{enc}", enc, tc))
    with timer("code_training"):
        tl = _train_learned(s, sp, base, k)
    with timer("evaluation"):
        rows.append(_trained_row(base, k, "learned", s.learned_encoder, tl))
    g = s.gcc_groups
    for pt in (_Point("", k, k + 1, 1, False), _Point("-natural", g * k, g * (k + 1), g, True)):
        if pt.num_inputs > len(sp.ev):
            continue
        k_cv, k_ev = jax.random.split(jax.random.fold_in(key, pt.num_workers))
        t0 = time.perf_counter()
        lam = _choose_lam_dec(s, base, pt, k_cv)
        t_tune = time.perf_counter() - t0
        timer.s["tuning"] += t_tune
        with timer("evaluation"):
            rows += _interpolating_rows(s, base, k, pt, lam, t_tune, k_ev)


def _comparison(rows: list[dict], model_info: dict) -> list[dict]:
    """Complete every row with its gap and base model; the ParM ``k = 2`` rows set against the
    published gap (:data:`PUBLISHED`)."""
    comparison = []
    for row in rows:
        info = model_info[row["model"]]
        base = info["eval_accuracy"]
        row["gap_points"] = 100.0 * (base - row["overall"]["mean"])
        # every row states the base model it codes for (ParM like for like)
        row["base_model"] = row["model"]
        row["base_test_accuracy"] = info["test_accuracy"]
        row["base_epochs"] = info["epochs"]
        if row["method"].startswith("ParM") and row["k"] == 2:
            comparison.append(
                {
                    "model": row["model"],
                    "method": row["method"],
                    "base_accuracy": base,
                    "base_epochs": info["epochs"],
                    "overall": row["overall"]["mean"],
                    "gap_points": row["gap_points"],
                    "published_gap_points": PUBLISHED["parm_gap_points"],
                    "published_base_model": PUBLISHED["base_model"],
                    "like_for_like": row["model"] == PUBLISHED["base_model"],
                }
            )
    return comparison


def _config_record(s: _Settings, sp: _Splits, interrupted: bool) -> dict:
    """The ``config`` block of the JSON record."""
    return {
        "interrupted": interrupted,
        "dataset": sp.ds.name,
        "models": list(s.models),
        "ks": list(s.ks),
        "base_epochs": s.base_epochs,
        "code_epochs": s.code_epochs,
        "code_train_size": s.code_train_size,
        "eval_images": s.eval_images,
        "concat": s.concat,
        "learned_encoder": s.learned_encoder,
        "learned_hidden": s.learned_hidden,
        "gcc_groups": s.gcc_groups,
        "gcc_trials": s.gcc_trials,
        "cv_images": s.cv_images,
        "lam_dec_grid": list(s.lam_dec_grid),
        "batch_size": int(s.batch_size),
        "dtype": str(jnp.zeros(()).dtype),
    }


def _dataset_record(sp: _Splits) -> dict:
    """The ``results["dataset"]`` block: the data set used and the image counts."""
    return {
        "name": sp.ds.name,
        "requested": sp.requested,
        "note": sp.note,
        "num_code_train": int(sp.x_code.shape[0]),
        "num_eval": int(len(sp.ev)),
        "num_cv": int(len(sp.cv)),
    }


def run_compare_learned(
    *,
    dataset: str | Dataset | None = None,
    data_path: str | os.PathLike | None = None,
    models: Sequence[str] = ("mlp", "lenet5"),
    ks: Sequence[int] = (2, 3, 4),
    base_epochs: int | None = None,
    code_epochs: int = 4,
    code_train_size: int | None = 12000,
    eval_images: int = 10000,
    concat: bool = True,
    learned_encoder: str = "mlp",
    learned_hidden: int | None = 256,
    gcc_groups: int = 10,
    gcc_trials: int = 10,
    cv_images: int = 1000,
    lam_dec_grid: Sequence[float] = DEFAULT_LAM_DEC_GRID,
    batch_size: int = 64,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> ExperimentResult:
    """Run the comparison (module docstring); returns its :class:`ExperimentResult`.

    Args:
        dataset: a data-set name (that data set, or its error) or a ``Dataset``; ``None``:
            Fashion-MNIST, or scikit-learn's digits when its files are absent (a note says so).
        data_path: directory of the data files.
        models: base models (:func:`gcc_jax.nn.models.make_model` names).
        ks: numbers of inputs per group ``k`` (each ``≥ 2``).
        base_epochs: base-model epochs (default :data:`DEFAULT_BASE_EPOCHS` per model).
        code_epochs: epochs of every parity model and learned code.
        code_train_size: training images the codes are trained on (``None``: all).
        eval_images: test images evaluated (rounded down to whole groups per ``k``).
        concat: also train ParM's concatenation encoder for ``k ∈ {2, 4}``.
        learned_encoder: ``"mlp"`` or ``"conv"``.
        learned_hidden: MLP encoder hidden width (``None``: the input size), or the conv
            encoder's channels (``None``: ``20·k``).
        gcc_groups: ``g`` of GCC's natural operating point (``K = g·k``, ``N = g·(k+1)``,
            ``S = g``).
        gcc_trials: random straggler patterns per batch at the natural operating point.
        cv_images: training images for GCC's λ cross-validation.
        lam_dec_grid: GCC decoder λ candidates.
        batch_size: base-model training batch size.
        seed: seeds every training, split and straggler pattern.
        cache_dir: checkpoint cache directory (default ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read and write the cache.
        progress: progress bars.

    Returns:
        The result described in the module docstring.

    Raises:
        ValueError: bad sizes or names.
        DatasetNotFoundError: the data set named by ``dataset`` is missing.
    """
    t_start = time.perf_counter()
    s = _check(from_arguments(_Settings, locals()))
    sp = _load_splits(s, dataset, data_path)
    key = jax.random.key(seed)
    timer = _Timer()
    model_info: dict[str, dict] = {}
    rows: list[dict] = []
    with StopOnInterrupt() as stop:
        for model in s.models:
            with timer("base_training"):
                base = _train_base(s, sp, model)
            model_info[model] = base.info
            for k in s.ks:
                _measure_k(s, sp, base, k, key, timer, rows)
                if progress:
                    tqdm.write(f"{model} k={k}: done", file=sys.stderr)
    comparison = _comparison(rows, model_info)
    payload = {
        "dataset": _dataset_record(sp),
        "models": model_info,
        "rows": rows,
        "published": PUBLISHED,
        "comparison": comparison,
    }
    config = _config_record(s, sp, stop.interrupted)
    return stop.finish(
        ExperimentResult.of_run(
            "compare_learned",
            json_clean(config),
            seed,
            METRIC_DEFINITIONS,
            json_clean(payload),
            t_start=t_start,
            phases=timer.s,
        )
    )


run = run_compare_learned


def _all_outputs_parm(row: dict, vals, st, yg: np.ndarray, logits: np.ndarray) -> dict:
    """All-``k`` accuracy over the ``k + 1`` single-erasure patterns of a systematic code.

    The ``k`` base-erasure patterns are the decoded ones; the parity-erasure pattern returns
    the base outputs themselves.
    """
    pred = np.argmax(np.asarray(vals), axis=-1)  # (g, k, k)
    ok = (np.asarray(st) == 0)[..., None]
    hits = ((pred == yg[:, None, :]) & ok).sum(axis=(1, 2))
    hits = hits + (np.argmax(logits, axis=-1) == yg).sum(axis=1)
    k = yg.shape[1]
    per_group = hits / (k * (k + 1))
    m, ci = mean_ci(per_group.astype(float)) if per_group.size > 1 else (per_group.mean(), np.nan)
    return {"mean": float(m), "ci95": float(ci)}


# -- reporting -----------------------------------------------------------------------------------


METRIC_DEFINITIONS = {
    "recon": "fraction of reconstructed outputs whose argmax equals the base model's argmax "
    "(ParM's reconstruction accuracy; GCC/BACC: all K outputs of every pattern count)",
    "overall": "fraction of those outputs whose argmax equals the true label (ParM's overall "
    "accuracy)",
    "gap_points": "base-model accuracy on the same images minus overall, in percentage points",
    "all_overall": "accuracy over all k outputs of a group when one of the N workers (any) is "
    "unavailable",
    "ci95": "95% half-width with each group (batch) as one sample",
    "train_time_s": "wall time of the training that produced the code's weights (from the cache "
    "metadata when loaded)",
}


def _view(result: ExperimentResult) -> dict:
    """Configuration, results and timing in one dict (what the report functions read)."""
    return {"config": result.config, "timing_s": result.timing_s, **result.results}


def _pct(stat: dict | None) -> str:
    if stat is None or stat.get("mean") is None:
        return "—"
    ci = stat.get("ci95")
    return f"{100 * stat['mean']:.2f}" + ("" if ci is None else f"±{100 * ci:.2f}")


def format_compare_table(result: ExperimentResult) -> str:
    """Plain-text table of a :func:`run_compare_learned` result (accuracies in %)."""
    result = _view(result)
    ds, cfg = result["dataset"], result["config"]
    lines = [
        f"compare-learned on {ds['name']} ({ds['num_eval']} test images; codes trained on "
        f"{ds['num_code_train']} training images for {cfg['code_epochs']} epochs)"
        + (f"\nnote: {ds['note']}" if ds["note"] else ""),
        "degraded mode, one unavailable output per group (GCC/BACC-natural: S = g of N); "
        "accuracies in % ± 95% CI",
        "",
    ]
    if cfg.get("interrupted"):
        lines.insert(1, "INTERRUPTED (Ctrl-C): only the rows finished are below.")
    for model, info in result["models"].items():
        lines.append(
            f"{model}: test accuracy {100 * info['test_accuracy']:.2f}%, "
            f"{100 * info['eval_accuracy']:.2f}% on the evaluation images; "
            f"{info['epochs']} epochs, {info['train_time_s']:.1f} s of training"
            + (" (cached)" if info["from_cache"] else "")
        )
    head = (
        f"{'model':<7}{'k':>2}  {'method':<13}{'K/N, S':>12}{'recon':>14}{'overall':>14}"
        f"{'gap pts':>9}{'all-k':>14}{'train s':>9}  {'λ_dec':>7}"
    )
    lines += ["", head, "-" * len(head)]
    for r in result["rows"]:
        shape = f"{r['num_inputs']}/{r['num_workers']}, {r['stragglers']}"
        lam = "" if r["lam_dec"] is None else format(r["lam_dec"], "g")
        train = f"{r['train_time_s']:.1f}" + ("*" if r.get("from_cache") else "")
        lines.append(
            f"{r['model']:<7}{r['k']:>2}  {r['method']:<13}{shape:>12}{_pct(r['recon']):>14}"
            f"{_pct(r['overall']):>14}{r['gap_points']:>9.2f}{_pct(r['all_overall']):>14}"
            f"{train:>9}  {lam:>7}"
        )
    lines += [
        "",
        "recon: argmax equal to the base model's; overall: equal to the true label; gap: base "
        "accuracy − overall; all-k: all outputs of a group with one worker unavailable; "
        "train s: training time of the code (* = loaded from the cache; GCC/BACC train nothing)",
    ]
    pub = result["published"]
    if result["comparison"]:
        lines += [
            "",
            f"published ParM gap, {pub['dataset']} {pub['base_model']} k=2: "
            f"{pub['parm_gap_points']:.2f} points ({pub['accuracy']['deployed']} → "
            f"{pub['accuracy']['reconstructed']}%)",
        ]
        for c in result["comparison"]:
            epochs = c.get("base_epochs")
            lines.append(
                f"  {c['model']:<7}{c['method']:<13} gap {c['gap_points']:.2f} points "
                f"({100 * c['base_accuracy']:.2f} → {100 * c['overall']:.2f}%; base {c['model']}"
                + ("" if epochs is None else f", {epochs} epochs")
                + ")"
                + (
                    ""
                    if c.get("like_for_like")
                    else f" — NOT like for like: the published "
                    f"number is a {pub['base_model']} base; compare {c['model']} rows only with "
                    f"each other"
                )
            )
        lines.append(
            f"  a {pub['base_model']} base on {pub['dataset']} at the published budget is not "
            "run here (no ResNet-18 in gcc_jax.nn.models); the gap depends on how "
            "long the base model was trained (its epochs are in every row of the JSON)"
        )
    t = result["timing_s"]
    lines.append(
        f"\ntime: base training {t['base_training']:.1f} s, code training "
        f"{t['code_training']:.1f} s, GCC λ tuning {t['tuning']:.1f} s, evaluation "
        f"{t['evaluation']:.1f} s, total {t['total']:.1f} s"
    )
    return "\n".join(lines)


report = format_compare_table


_COLORS = CODE_COLORS | {
    "ParM-sum": "C1",
    "ParM-concat": "C5",
    "learned": "C2",
    "GCC-natural": "C9",
    "BACC-natural": "C6",
}


def _bar_series(rows: list[dict], model: str, method: str, metric: str, ks, offset: float):
    """Bar positions, heights (%) and 95% CI half-widths of one method's ``metric`` per ``k``."""
    xs, ys, es = [], [], []
    for i, k in enumerate(ks):
        match = [r for r in rows if r["model"] == model and r["k"] == k and r["method"] == method]
        if match and match[0][metric]["mean"] is not None:
            xs.append(i + offset)
            ys.append(100 * match[0][metric]["mean"])
            es.append(100 * (match[0][metric]["ci95"] or 0.0))
    return xs, ys, es


def plot_compare(result: ExperimentResult):
    """Bars of degraded-mode accuracy per ``k`` and method; one column per model.

    Top row: overall accuracy (vs labels) with the base model's accuracy dashed; bottom row:
    reconstruction accuracy (vs the base argmax). Error bars are 95% CIs.
    """
    result = _view(result)
    models = list(result["models"])
    fig, axes = new_figure(2, len(models), figsize=(6.5 * len(models), 7.5), squeeze=False)
    ks = result["config"]["ks"]
    methods = [m for m in METHODS if any(r["method"] == m for r in result["rows"])]
    width = 0.8 / max(len(methods), 1)
    for col, model in enumerate(models):
        for row_i, metric in enumerate(("overall", "recon")):
            ax = axes[row_i, col]
            ends = [0.0, 100.0]  # the symmetric CIs are drawn in full, even past 0 or 100 %
            for j, method in enumerate(methods):
                offset = (j - (len(methods) - 1) / 2) * width
                xs, ys, es = _bar_series(result["rows"], model, method, metric, ks, offset)
                ax.bar(xs, ys, width, yerr=es, color=_COLORS.get(method), label=method, capsize=2)
                ends += [y - e for y, e in zip(ys, es, strict=True)]
                ends += [y + e for y, e in zip(ys, es, strict=True)]
            if metric == "overall":
                base = 100 * result["models"][model]["eval_accuracy"]
                ax.axhline(base, color="k", ls="--", lw=1, label="base model")
            ax.set_xticks(range(len(ks)))
            ax.set_xticklabels([f"k={k}" for k in ks])
            ax.set_ylabel(
                "accuracy vs true labels (%)"
                if metric == "overall"
                else "agreement with the base model (%)"
            )
            ax.set_title(f"{model} on {result['dataset']['name']}: {metric}", fontsize=10)
            ax.set_ylim(min(ends) - 2.0, max(ends) + 2.0)
            ax.grid(True, axis="y", alpha=0.3)
    legend_outside(axes[0, -1], fontsize=7)  # outside the data, next to the last column
    fig.suptitle("Degraded mode: accuracy on the queries whose output was unavailable (±95% CI)")
    fig.tight_layout()
    return fig


save = save_compare = save_report(format_compare_table, plot_compare)
"""Write ``compare_learned.json``, ``compare_learned.txt`` and ``compare_learned.png``."""
